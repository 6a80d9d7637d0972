-- Dead letters: listing, replaying and dismissing dead deliveries. A filter left NULL
-- matches any; :has_ids = 0 means "whatever the ids".

-- name: list_dead
SELECT d.id, d.function, d.event_id, e.type, e.source, d.attempt, d.error, d.dead_at,
    COALESCE(d.dead_payload, e.data), d.truncated
FROM oncefire_deliveries d JOIN oncefire_events e ON e.id = d.event_id
WHERE d.state = 'dead'
    AND (:function IS NULL OR d.function = :function)
    AND (:error_contains IS NULL OR instr(d.error, :error_contains) > 0)
    AND (:error_group IS NULL OR d.error_group = :error_group)
    AND (:since IS NULL OR d.dead_at >= :since)
    AND (:until IS NULL OR d.dead_at < :until)
    AND (:before_id IS NULL OR d.id < :before_id)
ORDER BY d.id DESC LIMIT :limit;

-- name: get_dead
SELECT d.id, d.function, d.event_id, e.type, e.source, d.attempt, d.error, d.dead_at,
    COALESCE(d.dead_payload, e.data), d.truncated
FROM oncefire_deliveries d JOIN oncefire_events e ON e.id = d.event_id
WHERE d.state = 'dead' AND d.id = :id;

-- name: count_dead
SELECT count(*) FROM oncefire_deliveries d
WHERE d.state = 'dead'
    AND (:function IS NULL OR d.function = :function)
    AND (:error_contains IS NULL OR instr(d.error, :error_contains) > 0)
    AND (:error_group IS NULL OR d.error_group = :error_group)
    AND (:since IS NULL OR d.dead_at >= :since)
    AND (:until IS NULL OR d.dead_at < :until);

-- name: replay_dead
UPDATE oncefire_deliveries AS d SET state = 'pending', attempt = 0, run_at = :now,
    replayed_at = :now, error = NULL, dead_at = NULL, worker = NULL, solo = 0
WHERE d.state = 'dead' AND d.truncated = 0
    AND (:function IS NULL OR d.function = :function)
    AND (:error_contains IS NULL OR instr(d.error, :error_contains) > 0)
    AND (:error_group IS NULL OR d.error_group = :error_group)
    AND (:since IS NULL OR d.dead_at >= :since)
    AND (:until IS NULL OR d.dead_at < :until)
    AND (:has_ids = 0 OR d.id IN (:ids))
RETURNING id;

-- name: dismiss_dead
DELETE FROM oncefire_deliveries AS d
WHERE d.state = 'dead'
    AND (:function IS NULL OR d.function = :function)
    AND (:error_contains IS NULL OR instr(d.error, :error_contains) > 0)
    AND (:error_group IS NULL OR d.error_group = :error_group)
    AND (:since IS NULL OR d.dead_at >= :since)
    AND (:until IS NULL OR d.dead_at < :until)
    AND (:has_ids = 0 OR d.id IN (:ids))
RETURNING id, event_id;

-- Counts and lists that walk an index only, whatever the number of dead letters: a count
-- reads the kept counters (oncefire_dead_counts), a group's count its range of the partial
-- index (function, error_group, id), a list the newest entries of a partial index.

-- name: count_dead_all
SELECT COALESCE(sum(count), 0) FROM oncefire_dead_counts;

-- name: count_dead_of_function
SELECT COALESCE(sum(count), 0) FROM oncefire_dead_counts WHERE function = :function;

-- name: count_dead_of_group
SELECT count(*) FROM oncefire_deliveries d INDEXED BY oncefire_deliveries_dead_group
WHERE d.state = 'dead' AND d.function = :function AND d.error_group = :error_group;

-- name: count_dead_of_group_up_to
-- A group's count read through its index, stopping after :cap + 1 entries.
SELECT count(*) FROM (SELECT 1 FROM oncefire_deliveries d INDEXED BY oncefire_deliveries_dead_group
    WHERE d.state = 'dead' AND d.function = :function AND d.error_group = :error_group
    LIMIT :cap + 1) AS capped;

-- name: list_dead_newest
SELECT d.id, d.function, d.event_id, e.type, e.source, d.attempt, d.error, d.dead_at,
    COALESCE(d.dead_payload, e.data), d.truncated
FROM oncefire_deliveries d INDEXED BY oncefire_deliveries_dead JOIN oncefire_events e ON e.id = d.event_id
WHERE d.state = 'dead' AND (:before_id IS NULL OR d.id < :before_id)
ORDER BY d.id DESC LIMIT :limit;

-- name: list_dead_of_function
SELECT d.id, d.function, d.event_id, e.type, e.source, d.attempt, d.error, d.dead_at,
    COALESCE(d.dead_payload, e.data), d.truncated
FROM oncefire_deliveries d INDEXED BY oncefire_deliveries_dead_function JOIN oncefire_events e ON e.id = d.event_id
WHERE d.state = 'dead' AND d.function = :function AND (:before_id IS NULL OR d.id < :before_id)
ORDER BY d.id DESC LIMIT :limit;

-- name: list_dead_of_group
SELECT d.id, d.function, d.event_id, e.type, e.source, d.attempt, d.error, d.dead_at,
    COALESCE(d.dead_payload, e.data), d.truncated
FROM oncefire_deliveries d INDEXED BY oncefire_deliveries_dead_group JOIN oncefire_events e ON e.id = d.event_id
WHERE d.state = 'dead' AND d.function = :function AND d.error_group = :error_group
    AND (:before_id IS NULL OR d.id < :before_id)
ORDER BY d.id DESC LIMIT :limit;

-- A search of a function's dead letters by error text reads a window of its newest dead
-- letters (older than :before_id when given), never all of them, so it takes the same time
-- at any number of dead letters. search_dead_window counts the window and its matches and
-- gives the window's oldest id; search_dead_matches lists the newest matches in the window.

-- name: search_dead_window
SELECT count(*), COALESCE(sum(instr(w.error, :error_contains) > 0), 0), min(w.id)
FROM (SELECT d.id, d.error FROM oncefire_deliveries d INDEXED BY oncefire_deliveries_dead_function
    WHERE d.state = 'dead' AND d.function = :function
        AND (:before_id IS NULL OR d.id < :before_id)
    ORDER BY d.id DESC LIMIT :window) AS w;

-- name: search_dead_matches
SELECT d.id, d.function, d.event_id, e.type, e.source, d.attempt, d.error, d.dead_at,
    COALESCE(d.dead_payload, e.data), d.truncated
FROM oncefire_deliveries d INDEXED BY oncefire_deliveries_dead_function JOIN oncefire_events e ON e.id = d.event_id
WHERE d.state = 'dead' AND d.function = :function AND d.id >= :oldest_id
    AND (:before_id IS NULL OR d.id < :before_id) AND instr(d.error, :error_contains) > 0
ORDER BY d.id DESC LIMIT :limit;
