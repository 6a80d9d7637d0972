-- oncefire schema 1 (PostgreSQL). Times are seconds since the epoch, given by the app's clock.
-- Keys sort as bytes (COLLATE "C"), as in SQLite, so listings come back in the same order.
CREATE TABLE oncefire_documents (
    path text COLLATE "C" PRIMARY KEY,
    collection text COLLATE "C" NOT NULL,
    data jsonb NOT NULL,
    create_time double precision NOT NULL,
    update_time double precision NOT NULL
);
CREATE INDEX oncefire_documents_collection ON oncefire_documents (collection, path);

CREATE TABLE oncefire_index_fields (
    collection text COLLATE "C" NOT NULL,
    field text NOT NULL,
    PRIMARY KEY (collection, field)
);

-- A value key can be as long as the field it indexes, past a B-tree entry's limit, so the
-- lookup index holds its hash and the query compares the value itself as well.
CREATE TABLE oncefire_index_entries (
    collection text COLLATE "C" NOT NULL,
    field text NOT NULL,
    value text NOT NULL,
    path text COLLATE "C" NOT NULL,
    PRIMARY KEY (path, field)
);
CREATE INDEX oncefire_index_entries_value
    ON oncefire_index_entries (collection, field, md5(value));

CREATE TABLE oncefire_functions (
    position bigint GENERATED ALWAYS AS IDENTITY,  -- registration order, as SQLite's rowid
    name text PRIMARY KEY,
    kind text NOT NULL,
    source text NOT NULL,
    event_types text NOT NULL,
    registered_at double precision NOT NULL
);

CREATE TABLE oncefire_events (
    id text PRIMARY KEY,
    type text NOT NULL,
    source text NOT NULL,
    time double precision NOT NULL,
    data jsonb NOT NULL,
    size bigint NOT NULL
);

CREATE TABLE oncefire_deliveries (
    id bigserial PRIMARY KEY,
    event_id text NOT NULL REFERENCES oncefire_events (id),
    function text NOT NULL,
    state text NOT NULL,
    run_at double precision NOT NULL,
    attempt integer NOT NULL DEFAULT 0,
    lease_token text,
    lease_until double precision,
    worker text,
    error text,
    created_at double precision NOT NULL,
    dead_at double precision,
    truncated boolean NOT NULL DEFAULT false,
    dead_payload jsonb
);
CREATE INDEX oncefire_deliveries_due ON oncefire_deliveries (run_at) WHERE state = 'pending';
CREATE INDEX oncefire_deliveries_running ON oncefire_deliveries (function, lease_until)
    WHERE state = 'running';
CREATE INDEX oncefire_deliveries_dead ON oncefire_deliveries (id) WHERE state = 'dead';
CREATE INDEX oncefire_deliveries_event ON oncefire_deliveries (event_id);
CREATE INDEX oncefire_deliveries_state ON oncefire_deliveries (function, state);

CREATE TABLE oncefire_attempts (
    id bigserial PRIMARY KEY,
    delivery_id bigint NOT NULL,
    event_id text NOT NULL,
    function text NOT NULL,
    number integer NOT NULL,
    worker text NOT NULL,
    started_at double precision NOT NULL,
    finished_at double precision,
    outcome text,
    error text
);
CREATE INDEX oncefire_attempts_finished ON oncefire_attempts (finished_at);
CREATE INDEX oncefire_attempts_open ON oncefire_attempts (delivery_id) WHERE outcome IS NULL;
CREATE INDEX oncefire_attempts_event ON oncefire_attempts (event_id);

CREATE TABLE oncefire_claims (
    key text PRIMARY KEY,
    created_at double precision NOT NULL,
    expires_at double precision NOT NULL
);
CREATE INDEX oncefire_claims_expiry ON oncefire_claims (expires_at);

CREATE TABLE oncefire_idempotency (
    key text PRIMARY KEY,
    function text NOT NULL,
    status text NOT NULL,
    token text NOT NULL,
    payload_hash text NOT NULL,
    lease_until double precision NOT NULL,
    expires_at double precision NOT NULL,
    result text
);
CREATE INDEX oncefire_idempotency_expiry ON oncefire_idempotency (expires_at);

CREATE TABLE oncefire_dedupe_hits (
    function text NOT NULL,
    at double precision NOT NULL
);
CREATE INDEX oncefire_dedupe_hits_at ON oncefire_dedupe_hits (function, at);
