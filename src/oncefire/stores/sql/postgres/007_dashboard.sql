-- oncefire schema 7: what the dashboard, the metrics and the alerts read and write.
-- The operators' audit trail: every replay, dismiss, edit and bulk action.
CREATE TABLE oncefire_audit (
    id bigserial PRIMARY KEY,
    at double precision NOT NULL,
    actor text NOT NULL,
    action text NOT NULL,
    function text,
    target text,
    count bigint NOT NULL,
    detail text NOT NULL
);
-- Alerts already fired: one row per dead letter notified, and one per threshold that is
-- above its limit now (deleted when it falls back), so each fires once per crossing.
CREATE TABLE oncefire_alert_marks (
    key text PRIMARY KEY,
    at double precision NOT NULL
);
-- A function's recent attempts and failures per hour, newest first.
CREATE INDEX oncefire_attempts_function ON oncefire_attempts (function, finished_at);
-- Dead letters by the time they died (new-dead-letter alerts) and by function.
CREATE INDEX oncefire_deliveries_dead_at ON oncefire_deliveries (dead_at) WHERE state = 'dead';
CREATE INDEX oncefire_deliveries_dead_function ON oncefire_deliveries (function, id)
    WHERE state = 'dead';
-- The oldest pending delivery of each function.
CREATE INDEX oncefire_deliveries_pending_age ON oncefire_deliveries (function, run_at)
    WHERE state = 'pending';
