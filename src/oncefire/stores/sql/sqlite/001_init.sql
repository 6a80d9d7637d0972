-- oncefire schema 1 (SQLite). Times are seconds since the epoch, given by the app's clock.
CREATE TABLE oncefire_documents (
    path TEXT PRIMARY KEY,
    collection TEXT NOT NULL,
    data TEXT NOT NULL,
    create_time REAL NOT NULL,
    update_time REAL NOT NULL
);
CREATE INDEX oncefire_documents_collection ON oncefire_documents (collection, path);

CREATE TABLE oncefire_index_fields (
    collection TEXT NOT NULL,
    field TEXT NOT NULL,
    PRIMARY KEY (collection, field)
);

CREATE TABLE oncefire_index_entries (
    collection TEXT NOT NULL,
    field TEXT NOT NULL,
    value TEXT NOT NULL,
    path TEXT NOT NULL,
    PRIMARY KEY (collection, field, value, path)
);
CREATE INDEX oncefire_index_entries_path ON oncefire_index_entries (path);

CREATE TABLE oncefire_functions (
    name TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    source TEXT NOT NULL,
    event_types TEXT NOT NULL,
    registered_at REAL NOT NULL
);

CREATE TABLE oncefire_events (
    id TEXT PRIMARY KEY,
    type TEXT NOT NULL,
    source TEXT NOT NULL,
    time REAL NOT NULL,
    data TEXT NOT NULL,
    size INTEGER NOT NULL
);

CREATE TABLE oncefire_deliveries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id TEXT NOT NULL REFERENCES oncefire_events (id),
    function TEXT NOT NULL,
    state TEXT NOT NULL,
    run_at REAL NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0,
    lease_token TEXT,
    lease_until REAL,
    worker TEXT,
    error TEXT,
    created_at REAL NOT NULL,
    dead_at REAL,
    truncated INTEGER NOT NULL DEFAULT 0,
    dead_payload TEXT
);
CREATE INDEX oncefire_deliveries_due ON oncefire_deliveries (run_at) WHERE state = 'pending';
CREATE INDEX oncefire_deliveries_running ON oncefire_deliveries (function, lease_until)
    WHERE state = 'running';
CREATE INDEX oncefire_deliveries_dead ON oncefire_deliveries (id) WHERE state = 'dead';
CREATE INDEX oncefire_deliveries_event ON oncefire_deliveries (event_id);
CREATE INDEX oncefire_deliveries_state ON oncefire_deliveries (function, state);

CREATE TABLE oncefire_attempts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id INTEGER NOT NULL,
    event_id TEXT NOT NULL,
    function TEXT NOT NULL,
    number INTEGER NOT NULL,
    worker TEXT NOT NULL,
    started_at REAL NOT NULL,
    finished_at REAL,
    outcome TEXT,
    error TEXT
);
CREATE INDEX oncefire_attempts_finished ON oncefire_attempts (finished_at);
CREATE INDEX oncefire_attempts_open ON oncefire_attempts (delivery_id) WHERE outcome IS NULL;
CREATE INDEX oncefire_attempts_event ON oncefire_attempts (event_id);

CREATE TABLE oncefire_claims (
    key TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX oncefire_claims_expiry ON oncefire_claims (expires_at);

CREATE TABLE oncefire_idempotency (
    key TEXT PRIMARY KEY,
    function TEXT NOT NULL,
    status TEXT NOT NULL,
    token TEXT NOT NULL,
    payload_hash TEXT NOT NULL,
    lease_until REAL NOT NULL,
    expires_at REAL NOT NULL,
    result TEXT
);
CREATE INDEX oncefire_idempotency_expiry ON oncefire_idempotency (expires_at);

CREATE TABLE oncefire_dedupe_hits (
    function TEXT NOT NULL,
    at REAL NOT NULL
);
CREATE INDEX oncefire_dedupe_hits_at ON oncefire_dedupe_hits (function, at);
