-- Documents, their index entries, and the events and deliveries a write appends.
-- A write transaction locks the key (an advisory lock) and the row it reads.

-- name: lock_key
SELECT pg_advisory_xact_lock(%(key)s);

-- name: get_document
SELECT data, create_time, update_time FROM oncefire_documents WHERE path = %(path)s;

-- name: get_document_for_update
SELECT data, create_time, update_time FROM oncefire_documents WHERE path = %(path)s
FOR UPDATE;

-- name: put_document
INSERT INTO oncefire_documents (path, collection, data, create_time, update_time, data_size)
VALUES (%(path)s, %(collection)s, %(data)s::jsonb, %(create_time)s, %(update_time)s,
    %(data_size)s)
ON CONFLICT (path) DO UPDATE SET data = excluded.data, update_time = excluded.update_time,
    data_size = excluded.data_size;

-- name: delete_document
DELETE FROM oncefire_documents WHERE path = %(path)s;

-- name: list_documents
SELECT path, data, create_time, update_time FROM oncefire_documents
WHERE collection = %(collection)s ORDER BY path;

-- name: list_documents_equal
SELECT d.path, d.data, d.create_time, d.update_time FROM oncefire_index_entries i
JOIN oncefire_documents d ON d.path = i.path
WHERE i.collection = %(collection)s AND i.field = %(field)s
    AND left(i.value, 256) = left(%(value)s, 256) AND i.value = %(value)s
ORDER BY d.path;

-- name: delete_index_entries
DELETE FROM oncefire_index_entries WHERE path = %(path)s;

-- name: insert_index_entry
INSERT INTO oncefire_index_entries (collection, field, value, path)
VALUES (%(collection)s, %(field)s, %(value)s, %(path)s);

-- name: append_event
-- The event and its deliveries in one statement; workers are woken at the commit.
WITH e AS (
    INSERT INTO oncefire_events (id, type, source, time, data, size, routing, root_id, depth)
    VALUES (%(id)s, %(type)s, %(source)s, %(time)s, %(data)s::jsonb, %(size)s,
        CASE WHEN cardinality(%(names)s::text[]) = 0 THEN 'unrouted' END, %(root_id)s,
        %(depth)s)
    ON CONFLICT (id) DO NOTHING RETURNING id
), added AS (
    INSERT INTO oncefire_deliveries (event_id, function, state, run_at, created_at)
    SELECT e.id, f.name, 'pending', %(run_at)s, %(time)s FROM e
    CROSS JOIN unnest(%(names)s::text[]) WITH ORDINALITY AS f (name, n) ORDER BY f.n
    RETURNING id
)
SELECT (SELECT count(*) FROM e), n.notified FROM (SELECT 1) AS one
LEFT JOIN (
    SELECT oncefire_wake('oncefire', CASE WHEN count(*) <= 50
        THEN string_agg(id::text, ',' ORDER BY id) ELSE '' END)
    FROM added HAVING count(*) > 0
) AS n (notified) ON true;

-- name: bury_event
-- An event that stops a loop: its deliveries are dead letters before any runs.
UPDATE oncefire_deliveries SET state = 'dead', error = %(error)s, dead_at = %(now)s
WHERE event_id = %(event_id)s AND state = 'pending' RETURNING function;

-- name: add_deliveries
WITH added AS (
    INSERT INTO oncefire_deliveries (event_id, function, state, run_at, created_at)
    SELECT %(event_id)s, f.name, 'pending', %(run_at)s, %(run_at)s
    FROM unnest(%(names)s::text[]) WITH ORDINALITY AS f (name, n) ORDER BY f.n
    RETURNING id
)
SELECT array_agg(id ORDER BY id), oncefire_wake('oncefire', CASE WHEN count(*) <= 50
    THEN string_agg(id::text, ',' ORDER BY id) ELSE '' END)
FROM added HAVING count(*) > 0;

-- name: hold_lease
-- Fencing (oncefire/model/fencing.py): a function's transaction goes on only while its delivery is
-- still running under its lease. FOR SHARE holds the row to the commit, so a takeover (an
-- UPDATE of the row) waits for this transaction, and one committed first is seen here.
SELECT 1 FROM oncefire_deliveries
WHERE id = %(id)s AND state = 'running' AND lease_token = %(token)s
FOR SHARE;

-- name: claim_key
-- No advisory lock needed: a second INSERT of the key waits on the first one's index
-- entry. A row, not a row count, answers: counts wait for the pipeline's sync.
INSERT INTO oncefire_claims (key, created_at, expires_at)
VALUES (%(key)s, %(now)s, %(expires_at)s)
ON CONFLICT (key) DO UPDATE SET created_at = excluded.created_at,
    expires_at = excluded.expires_at WHERE oncefire_claims.expires_at <= %(now)s
RETURNING 1;

-- name: count_dedupe_hit
-- Counted in the hour bucket of its time and in the totals (oncefire_dedupe_hits is kept for
-- older stores' rows only, until retention purges them).
WITH b AS (
    INSERT INTO oncefire_buckets AS k (function, hour, outcome, bin, count, duration_sum,
        cpu_sum, max_number)
    VALUES (%(function)s, %(hour)s, 'dedupe', 0, 1, 0, 0, 0)
    ON CONFLICT (function, hour, outcome, bin, shard) DO UPDATE SET count = k.count + 1
)
INSERT INTO oncefire_totals AS k (function, kind, bin, count, duration_sum)
VALUES (%(function)s, 'dedupe', 0, 1, 0)
ON CONFLICT (function, kind, bin, shard) DO UPDATE SET count = k.count + 1;

-- name: set_document
-- A whole-document write and its event in one statement (migration 006).
SELECT oncefire_set_document(%(lock)s, %(path)s, %(collection)s, %(data)s, %(now)s,
    %(catalog)s, %(event_id)s, %(created_type)s, %(updated_type)s, %(on_create)s,
    %(on_update)s, %(fields)s, %(values)s, 'oncefire', 50);

-- name: json_float
-- The PL/pgSQL write's float formatter, which tests hold to the codec's.
SELECT oncefire_json_float(x) FROM unnest(%(values)s::float8[]) AS v (x);

-- name: documents_page
SELECT path, data, create_time, update_time FROM oncefire_documents
WHERE collection = %(collection)s AND path > %(after)s ORDER BY collection, path
LIMIT %(limit)s;

-- name: index_page_asc
-- A walk of the index (collection, field, left(value, 256), path) from past a (key, path)
-- cursor, stopping at LIMIT (migration 010). Keys compare by their first 256 characters:
-- the caller checks its filters again on every row.
SELECT d.path, d.data, d.create_time, d.update_time, left(i.value, 256)
FROM oncefire_index_entries i JOIN oncefire_documents d ON d.path = i.path
WHERE i.collection = %(collection)s AND i.field = %(field)s
    AND left(i.value, 256) <= left(%(hi)s, 256)
    AND (left(i.value, 256), i.path) > (left(%(after_value)s, 256), %(after_path)s)
ORDER BY left(i.value, 256), i.path LIMIT %(limit)s;

-- name: index_page_desc
SELECT d.path, d.data, d.create_time, d.update_time, left(i.value, 256)
FROM oncefire_index_entries i JOIN oncefire_documents d ON d.path = i.path
WHERE i.collection = %(collection)s AND i.field = %(field)s
    AND left(i.value, 256) >= left(%(lo)s, 256)
    AND (left(i.value, 256), i.path) < (left(%(after_value)s, 256), %(after_path)s)
ORDER BY left(i.value, 256) DESC, i.path DESC LIMIT %(limit)s;

-- name: expired_paths
-- Expiry keys of numbers (epoch seconds) and of times lie in two ranges: two seeks of the
-- index, each stopping at LIMIT; with nothing due, both find nothing at once.
(SELECT path FROM oncefire_index_entries
WHERE collection = %(collection)s AND field = %(field)s
    AND left(value, 256) BETWEEN %(numbers_from)s AND %(numbers_until)s
ORDER BY left(value, 256) LIMIT %(limit)s)
UNION ALL
(SELECT path FROM oncefire_index_entries
WHERE collection = %(collection)s AND field = %(field)s
    AND left(value, 256) BETWEEN %(times_from)s AND %(times_until)s
ORDER BY left(value, 256) LIMIT %(limit)s);

-- name: collection_names
-- The collections whose path lies in [prefix, prefix_end), each found by one seek of the
-- (collection, path) index past the one before: a walk of the collections, not the documents.
WITH RECURSIVE names(name) AS (
    SELECT min(collection) FROM oncefire_documents
    WHERE collection >= %(prefix)s AND collection < %(prefix_end)s
    UNION ALL
    SELECT (SELECT min(d.collection) FROM oncefire_documents d
            WHERE d.collection > names.name AND d.collection < %(prefix_end)s)
    FROM names WHERE names.name IS NOT NULL
)
SELECT name FROM names WHERE name IS NOT NULL;
