-- oncefire schema 12: ordering keys and rate limits.
-- A delivery of a function ordered by document carries its event's source as its ordering
-- key: a lease passes over it while an earlier delivery of the same (function, key) is
-- pending or running. Unordered deliveries keep a NULL key.
ALTER TABLE oncefire_deliveries ADD COLUMN ordering_key text;
-- What leases look up: the earlier deliveries of one key that are not finished.
CREATE INDEX oncefire_deliveries_ordered ON oncefire_deliveries (function, ordering_key, id)
    WHERE ordering_key IS NOT NULL AND state IN ('pending', 'running');
-- The functions ordered by document, as registered.
CREATE TABLE oncefire_ordering (
    function text PRIMARY KEY
);
-- Every writer (an App, the CLI, a redelivery, the one-statement document write) keys the
-- deliveries it inserts: the key never depends on which process wrote the event.
CREATE OR REPLACE FUNCTION oncefire_key_delivery() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM oncefire_ordering WHERE function = NEW.function) THEN
        NEW.ordering_key := (SELECT source FROM oncefire_events WHERE id = NEW.event_id);
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER oncefire_deliveries_key BEFORE INSERT ON oncefire_deliveries
FOR EACH ROW EXECUTE FUNCTION oncefire_key_delivery();
-- A token bucket per rate-limited function, shared by every worker: tokens are taken when
-- deliveries are leased, so waiting deliveries stay pending.
CREATE TABLE oncefire_rate_buckets (
    function text PRIMARY KEY,
    tokens double precision NOT NULL,
    refilled_at double precision NOT NULL
);
