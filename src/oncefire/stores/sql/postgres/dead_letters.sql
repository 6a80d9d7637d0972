-- Dead letters: listing, replaying and dismissing dead deliveries. A filter left NULL
-- matches any; NOT %(has_ids)s means "whatever the ids".

-- name: list_dead
SELECT d.id, d.function, d.event_id, e.type, e.source, d.attempt, d.error, d.dead_at,
    COALESCE(d.dead_payload, e.data), d.truncated
FROM oncefire_deliveries d JOIN oncefire_events e ON e.id = d.event_id
WHERE d.state = 'dead'
    AND (%(function)s::text IS NULL OR d.function = %(function)s::text)
    AND (%(error_contains)s::text IS NULL OR strpos(d.error, %(error_contains)s::text) > 0)
    AND (%(error_group)s::text IS NULL OR d.error_group = %(error_group)s::text)
    AND (%(since)s::float8 IS NULL OR d.dead_at >= %(since)s::float8)
    AND (%(until)s::float8 IS NULL OR d.dead_at < %(until)s::float8)
    AND (%(before_id)s::bigint IS NULL OR d.id < %(before_id)s::bigint)
ORDER BY d.id DESC LIMIT %(limit)s;

-- name: get_dead
SELECT d.id, d.function, d.event_id, e.type, e.source, d.attempt, d.error, d.dead_at,
    COALESCE(d.dead_payload, e.data), d.truncated
FROM oncefire_deliveries d JOIN oncefire_events e ON e.id = d.event_id
WHERE d.state = 'dead' AND d.id = %(id)s;

-- name: count_dead
SELECT count(*) FROM oncefire_deliveries d
WHERE d.state = 'dead'
    AND (%(function)s::text IS NULL OR d.function = %(function)s::text)
    AND (%(error_contains)s::text IS NULL OR strpos(d.error, %(error_contains)s::text) > 0)
    AND (%(error_group)s::text IS NULL OR d.error_group = %(error_group)s::text)
    AND (%(since)s::float8 IS NULL OR d.dead_at >= %(since)s::float8)
    AND (%(until)s::float8 IS NULL OR d.dead_at < %(until)s::float8);

-- name: replay_dead
WITH d AS (
    UPDATE oncefire_deliveries AS d SET state = 'pending', attempt = 0, run_at = %(now)s,
        replayed_at = %(now)s, error = NULL, dead_at = NULL, worker = NULL, solo = false
    WHERE d.state = 'dead' AND NOT d.truncated
        AND (%(function)s::text IS NULL OR d.function = %(function)s::text)
        AND (%(error_contains)s::text IS NULL
            OR strpos(d.error, %(error_contains)s::text) > 0)
        AND (%(error_group)s::text IS NULL OR d.error_group = %(error_group)s::text)
        AND (%(since)s::float8 IS NULL OR d.dead_at >= %(since)s::float8)
        AND (%(until)s::float8 IS NULL OR d.dead_at < %(until)s::float8)
        AND (NOT %(has_ids)s OR d.id = ANY(%(ids)s::bigint[]))
    RETURNING d.id
), n AS (
    SELECT oncefire_wake('oncefire', CASE WHEN count(*) <= 50
        THEN string_agg(id::text, ',' ORDER BY id) ELSE '' END)
    FROM d HAVING count(*) > 0
)
SELECT d.id FROM d LEFT JOIN n ON true;

-- name: dismiss_dead
DELETE FROM oncefire_deliveries AS d
WHERE d.state = 'dead'
    AND (%(function)s::text IS NULL OR d.function = %(function)s::text)
    AND (%(error_contains)s::text IS NULL OR strpos(d.error, %(error_contains)s::text) > 0)
    AND (%(error_group)s::text IS NULL OR d.error_group = %(error_group)s::text)
    AND (%(since)s::float8 IS NULL OR d.dead_at >= %(since)s::float8)
    AND (%(until)s::float8 IS NULL OR d.dead_at < %(until)s::float8)
    AND (NOT %(has_ids)s OR d.id = ANY(%(ids)s::bigint[]))
RETURNING d.id, d.event_id;

-- Counts and lists that walk an index only, whatever the number of dead letters: a count
-- reads the kept counters (oncefire_dead_counts), a group's count its range of the partial
-- index (function, error_group, id), a list the newest entries of a partial index.

-- name: count_dead_all
SELECT COALESCE(sum(count), 0) FROM oncefire_dead_counts;

-- name: count_dead_of_function
SELECT COALESCE(sum(count), 0) FROM oncefire_dead_counts WHERE function = %(function)s;

-- name: count_dead_of_group
SELECT count(*) FROM oncefire_deliveries d
WHERE d.state = 'dead' AND d.function = %(function)s AND d.error_group = %(error_group)s;

-- name: count_dead_of_group_up_to
-- A group's count read through its index, stopping after cap + 1 entries.
SELECT count(*) FROM (SELECT 1 FROM oncefire_deliveries d
    WHERE d.state = 'dead' AND d.function = %(function)s AND d.error_group = %(error_group)s
    LIMIT %(cap)s + 1) AS capped;

-- name: list_dead_newest
SELECT d.id, d.function, d.event_id, e.type, e.source, d.attempt, d.error, d.dead_at,
    COALESCE(d.dead_payload, e.data), d.truncated
FROM oncefire_deliveries d JOIN oncefire_events e ON e.id = d.event_id
WHERE d.state = 'dead' AND (%(before_id)s::bigint IS NULL OR d.id < %(before_id)s::bigint)
ORDER BY d.id DESC LIMIT %(limit)s;

-- name: list_dead_of_function
SELECT d.id, d.function, d.event_id, e.type, e.source, d.attempt, d.error, d.dead_at,
    COALESCE(d.dead_payload, e.data), d.truncated
FROM oncefire_deliveries d JOIN oncefire_events e ON e.id = d.event_id
WHERE d.state = 'dead' AND d.function = %(function)s AND (%(before_id)s::bigint IS NULL OR d.id < %(before_id)s::bigint)
ORDER BY d.id DESC LIMIT %(limit)s;

-- name: list_dead_of_group
SELECT d.id, d.function, d.event_id, e.type, e.source, d.attempt, d.error, d.dead_at,
    COALESCE(d.dead_payload, e.data), d.truncated
FROM oncefire_deliveries d JOIN oncefire_events e ON e.id = d.event_id
WHERE d.state = 'dead' AND d.function = %(function)s AND d.error_group = %(error_group)s
    AND (%(before_id)s::bigint IS NULL OR d.id < %(before_id)s::bigint)
ORDER BY d.id DESC LIMIT %(limit)s;

-- A search of a function's dead letters by error text reads a window of its newest dead
-- letters (older than before_id when given), never all of them, so it takes the same time
-- at any number of dead letters. search_dead_window counts the window and its matches and
-- gives the window's oldest id; search_dead_matches lists the newest matches in the window.

-- name: search_dead_window
SELECT count(*), COALESCE(sum((strpos(w.error, %(error_contains)s::text) > 0)::int), 0), min(w.id)
FROM (SELECT d.id, d.error FROM oncefire_deliveries d
    WHERE d.state = 'dead' AND d.function = %(function)s
        AND (%(before_id)s::bigint IS NULL OR d.id < %(before_id)s::bigint)
    ORDER BY d.id DESC LIMIT %(window)s) AS w;

-- name: search_dead_matches
SELECT d.id, d.function, d.event_id, e.type, e.source, d.attempt, d.error, d.dead_at,
    COALESCE(d.dead_payload, e.data), d.truncated
FROM oncefire_deliveries d JOIN oncefire_events e ON e.id = d.event_id
WHERE d.state = 'dead' AND d.function = %(function)s AND d.id >= %(oldest_id)s::bigint
    AND (%(before_id)s::bigint IS NULL OR d.id < %(before_id)s::bigint)
    AND strpos(d.error, %(error_contains)s::text) > 0
ORDER BY d.id DESC LIMIT %(limit)s;
