-- oncefire schema 11: an event's lineage and a function's field filter.
-- An event written from inside a function carries the root event of its chain and its
-- depth in it (a write made outside any function: root_id NULL, depth 0), so a function
-- that keeps writing what triggers it is stopped (see outbox.emit). Columns rather than a
-- key in the event's data: the payload stays what the writer wrote (what a function reads,
-- what @idempotent hashes, what a replay delivers), and a query can find long chains.
ALTER TABLE oncefire_events ADD COLUMN root_id TEXT;
ALTER TABLE oncefire_events ADD COLUMN depth INTEGER NOT NULL DEFAULT 0;
-- The fields an update must change to start the function: a JSON list of dotted paths,
-- NULL for no filter.
ALTER TABLE oncefire_functions ADD COLUMN fields TEXT;
