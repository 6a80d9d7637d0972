-- oncefire schema 14: ordering by a key the function computes (ordering_key=callable).
-- keyed_by: 'document' (the key is the event's source, set on insert) or 'key' (the key is
-- computed in Python by a worker that serves the function). A delivery of a 'key' function
-- is inserted with the key '' (not computed yet): no lease takes it until a worker has set
-- its key; a computed key is never ''.
ALTER TABLE oncefire_ordering ADD COLUMN keyed_by TEXT NOT NULL DEFAULT 'document';
DROP TRIGGER oncefire_deliveries_key;
CREATE TRIGGER oncefire_deliveries_key AFTER INSERT ON oncefire_deliveries
WHEN EXISTS (SELECT 1 FROM oncefire_ordering WHERE function = NEW.function)
BEGIN
    UPDATE oncefire_deliveries
    SET ordering_key = (
        SELECT CASE o.keyed_by
            WHEN 'document' THEN (SELECT source FROM oncefire_events WHERE id = NEW.event_id)
            ELSE '' END
        FROM oncefire_ordering AS o WHERE o.function = NEW.function)
    WHERE id = NEW.id;
END;
