-- oncefire schema 10: index keys that sort as their values do (index_keys.py: numbers and
-- times as order-preserving hex, each type in a range of its own), so that a query walks a
-- field's index (collection, field, value, path) in order and stops at its limit, and the
-- TTL sweep finds due documents through the index of their expiry field.
-- Keys written before are of another encoding: the entries and declarations are dropped,
-- and each collection.index() and TTL policy declares its field again at the next start,
-- indexing the documents there. Until then, queries read their collection (and say so).
DELETE FROM oncefire_index_entries;
DELETE FROM oncefire_index_fields;
UPDATE oncefire_catalog SET version = version + 1;
