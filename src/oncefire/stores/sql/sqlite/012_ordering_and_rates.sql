-- oncefire schema 12: ordering keys and rate limits.
-- A delivery of a function ordered by document carries its event's source as its ordering
-- key: a lease passes over it while an earlier delivery of the same (function, key) is
-- pending or running. Unordered deliveries keep a NULL key.
ALTER TABLE oncefire_deliveries ADD COLUMN ordering_key TEXT;
-- What leases look up: the earlier deliveries of one key that are not finished.
CREATE INDEX oncefire_deliveries_ordered ON oncefire_deliveries (function, ordering_key, id)
    WHERE ordering_key IS NOT NULL AND state IN ('pending', 'running');
-- The functions ordered by document, as registered.
CREATE TABLE oncefire_ordering (
    function TEXT PRIMARY KEY
);
-- Every writer (an App, the CLI, a redelivery) keys the deliveries it inserts in the same
-- statement: the key never depends on which process wrote the event.
CREATE TRIGGER oncefire_deliveries_key AFTER INSERT ON oncefire_deliveries
WHEN EXISTS (SELECT 1 FROM oncefire_ordering WHERE function = NEW.function)
BEGIN
    UPDATE oncefire_deliveries
    SET ordering_key = (SELECT source FROM oncefire_events WHERE id = NEW.event_id)
    WHERE id = NEW.id;
END;
-- A token bucket per rate-limited function, shared by every worker: tokens are taken when
-- deliveries are leased, so waiting deliveries stay pending.
CREATE TABLE oncefire_rate_buckets (
    function TEXT PRIMARY KEY,
    tokens REAL NOT NULL,
    refilled_at REAL NOT NULL
);
