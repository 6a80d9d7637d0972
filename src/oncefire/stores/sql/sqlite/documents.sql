-- Documents, their index entries, and the events and deliveries a write appends.

-- name: document_with_catalog
-- The catalogue version rides along with a transaction's first read.
SELECT d.data, d.create_time, d.update_time, c.version FROM oncefire_catalog c
LEFT JOIN oncefire_documents d ON d.collection = :collection AND d.path = :path;

-- name: get_document
SELECT data, create_time, update_time FROM oncefire_documents
WHERE collection = :collection AND path = :path;

-- name: put_document
INSERT INTO oncefire_documents (path, collection, data, create_time, update_time)
VALUES (:path, :collection, :data, :create_time, :update_time)
ON CONFLICT (collection, path) DO UPDATE
SET data = excluded.data, update_time = excluded.update_time;

-- name: delete_document
DELETE FROM oncefire_documents WHERE collection = :collection AND path = :path;

-- name: list_documents
SELECT path, data, create_time, update_time FROM oncefire_documents
WHERE collection = :collection ORDER BY path;

-- name: list_documents_equal
-- CROSS JOIN keeps the index entries outside: SQLite would otherwise walk the whole
-- collection and probe the entries of each document.
SELECT d.path, d.data, d.create_time, d.update_time
FROM oncefire_index_entries i CROSS JOIN oncefire_documents d
    ON d.collection = i.collection AND d.path = i.path
WHERE i.collection = :collection AND i.field = :field AND i.value = :value ORDER BY d.path;

-- name: delete_index_entries
DELETE FROM oncefire_index_entries WHERE path = :path;

-- name: insert_index_entry
INSERT INTO oncefire_index_entries (collection, field, value, path)
VALUES (:collection, :field, :value, :path);

-- name: insert_event
-- :routing is 'unrouted' when no function takes the event (it is kept, never dropped).
INSERT INTO oncefire_events (id, type, source, time, data, size, routing, root_id, depth)
VALUES (:id, :type, :source, :time, :data, :size, :routing, :root_id, :depth)
ON CONFLICT (id) DO NOTHING;

-- name: insert_delivery
INSERT INTO oncefire_deliveries (event_id, function, state, run_at, created_at)
VALUES (:event_id, :function, 'pending', :run_at, :created_at);

-- name: bury_event
-- An event that stops a loop: its deliveries are dead letters before any runs.
UPDATE oncefire_deliveries SET state = 'dead', error = :error, dead_at = :now
WHERE event_id = :event_id AND state = 'pending' RETURNING function;

-- name: add_delivery
INSERT INTO oncefire_deliveries (event_id, function, state, run_at, created_at)
VALUES (:event_id, :function, 'pending', :run_at, :run_at) RETURNING id;

-- name: hold_lease
-- Fencing (oncefire/model/fencing.py): a function's transaction goes on only while its delivery is
-- still running under its lease; the write lock (BEGIN IMMEDIATE) keeps it so to the commit.
SELECT 1 FROM oncefire_deliveries WHERE id = :id AND state = 'running' AND lease_token = :token;

-- name: claim_key
INSERT INTO oncefire_claims (key, created_at, expires_at) VALUES (:key, :now, :expires_at)
ON CONFLICT (key) DO UPDATE SET created_at = excluded.created_at,
    expires_at = excluded.expires_at WHERE oncefire_claims.expires_at <= :now
RETURNING 1;

-- name: count_dedupe_hit
-- Counted in the hour bucket of its time, and so in the totals (oncefire_dedupe_hits is kept
-- for older stores' rows only, until retention purges them).
INSERT INTO oncefire_buckets (function, hour, outcome, bin, count, duration_sum, cpu_sum,
    max_number)
VALUES (:function, :hour, 'dedupe', 0, 1, 0, 0, 0)
ON CONFLICT (function, hour, outcome, bin) DO UPDATE SET count = count + 1;

-- name: documents_page
SELECT path, data, create_time, update_time FROM oncefire_documents
WHERE collection = :collection AND path > :after ORDER BY path LIMIT :limit;

-- name: index_page_asc
-- A walk of a field's index (collection, field, value, path) from past a (key, path)
-- cursor, stopping at LIMIT: a page costs its rows, whatever the collection holds.
SELECT d.path, d.data, d.create_time, d.update_time, i.value
FROM oncefire_index_entries i CROSS JOIN oncefire_documents d
    ON d.collection = i.collection AND d.path = i.path
WHERE i.collection = :collection AND i.field = :field AND i.value <= :hi
    AND (i.value, i.path) > (:after_value, :after_path)
ORDER BY i.value, i.path LIMIT :limit;

-- name: index_page_desc
SELECT d.path, d.data, d.create_time, d.update_time, i.value
FROM oncefire_index_entries i CROSS JOIN oncefire_documents d
    ON d.collection = i.collection AND d.path = i.path
WHERE i.collection = :collection AND i.field = :field AND i.value >= :lo
    AND (i.value, i.path) < (:after_value, :after_path)
ORDER BY i.value DESC, i.path DESC LIMIT :limit;

-- name: expired_paths
-- Expiry keys of numbers (epoch seconds) and of times lie in two ranges: two seeks of the
-- index, each stopping at LIMIT; with nothing due, both find nothing at once.
SELECT path FROM (
    SELECT path, value FROM oncefire_index_entries
    WHERE collection = :collection AND field = :field
        AND value BETWEEN :numbers_from AND :numbers_until
    ORDER BY value LIMIT :limit
)
UNION ALL
SELECT path FROM (
    SELECT path, value FROM oncefire_index_entries
    WHERE collection = :collection AND field = :field
        AND value BETWEEN :times_from AND :times_until
    ORDER BY value LIMIT :limit
);

-- name: collection_names
-- The collections whose path lies in [prefix, prefix_end), each found by one seek of the
-- (collection, path) index past the one before: a walk of the collections, not the documents.
WITH RECURSIVE names(name) AS (
    SELECT min(collection) FROM oncefire_documents
    WHERE collection >= :prefix AND collection < :prefix_end
    UNION ALL
    SELECT (SELECT min(d.collection) FROM oncefire_documents d
            WHERE d.collection > names.name AND d.collection < :prefix_end)
    FROM names WHERE names.name IS NOT NULL
)
SELECT name FROM names WHERE name IS NOT NULL;
