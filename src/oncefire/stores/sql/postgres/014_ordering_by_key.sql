-- oncefire schema 14: ordering by a key the function computes (ordering_key=callable).
-- keyed_by: 'document' (the key is the event's source, set on insert) or 'key' (the key is
-- computed in Python by a worker that serves the function). A delivery of a 'key' function
-- is inserted with the key '' (not computed yet): no lease takes it until a worker has set
-- its key; a computed key is never ''.
ALTER TABLE oncefire_ordering ADD COLUMN keyed_by text NOT NULL DEFAULT 'document';
CREATE OR REPLACE FUNCTION oncefire_key_delivery() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    keyed text;
BEGIN
    SELECT keyed_by INTO keyed FROM oncefire_ordering WHERE function = NEW.function;
    IF keyed = 'document' THEN
        NEW.ordering_key := (SELECT source FROM oncefire_events WHERE id = NEW.event_id);
    ELSIF keyed = 'key' THEN
        NEW.ordering_key := '';
    END IF;
    RETURN NEW;
END;
$$;
