-- oncefire schema 10: index keys that sort as their values do (index_keys.py: numbers and
-- times as order-preserving hex, each type in a range of its own), so that a query walks a
-- field's index in order and stops at its limit, and the TTL sweep finds due documents
-- through the index of their expiry field.
-- Keys written before are of another encoding: the entries and declarations are dropped,
-- and each collection.index() and TTL policy declares its field again at the next start,
-- indexing the documents there. Until then, queries read their collection (and say so).
DELETE FROM oncefire_index_entries;
DELETE FROM oncefire_index_fields;
-- Keys sort as bytes (as in SQLite). A B-tree entry has a size limit and a key is as long
-- as its value, so the index holds a key's first 256 characters; the equality lookup by
-- md5 is served by the same index.
DROP INDEX IF EXISTS oncefire_index_entries_value;
ALTER TABLE oncefire_index_entries ALTER COLUMN value TYPE text COLLATE "C";
CREATE INDEX oncefire_index_entries_key
    ON oncefire_index_entries (collection, field, left(value, 256), path);
UPDATE oncefire_catalog SET version = version + 1;
