-- Read-only queries of `oncefire audit` over the recorded history (PostgreSQL).
-- Times are seconds since the epoch given by the caller; nothing here reads the clock.

-- name: looping_events
-- Events a function ran more than most_attempts times, or was handed more than
-- most_deliveries times (redeliveries, and replays: a replay starts its delivery again at
-- attempt 1), in the window.
SELECT function, event_id, count(*) AS attempts, greatest(count(DISTINCT delivery_id), count(*) FILTER (WHERE number = 1)) AS deliveries
FROM oncefire_attempts
WHERE finished_at >= %(since)s
GROUP BY function, event_id
HAVING count(*) > %(most_attempts)s OR greatest(count(DISTINCT delivery_id), count(*) FILTER (WHERE number = 1)) > %(most_deliveries)s
ORDER BY attempts DESC, event_id
LIMIT %(limit)s;

-- name: deep_lineages
-- Chains of function writes (events written inside functions, by lineage) that reached
-- least_depth in the window: the deepest event of each root, and a function it started.
SELECT e.root_id, max(e.depth) AS depth, min(d.function) AS function, count(DISTINCT e.id)
FROM oncefire_events e
JOIN oncefire_deliveries d ON d.event_id = e.id
WHERE e.time >= %(since)s AND e.depth >= %(least_depth)s AND e.root_id IS NOT NULL
GROUP BY e.root_id
ORDER BY depth DESC, e.root_id
LIMIT %(limit)s;

-- name: failure_groups
-- Errors (their first line) that at least least_events events of a function failed with and
-- have not got past since (their delivery is pending, running or dead).
SELECT function, error_line, count(DISTINCT event_id) AS events, count(*) AS attempts
FROM (
    SELECT a.function, a.event_id,
        split_part(a.error, E'\n', 1) AS error_line
    FROM oncefire_attempts a
    JOIN oncefire_deliveries d ON d.id = a.delivery_id AND d.state <> 'succeeded'
    WHERE a.finished_at >= %(since)s AND a.outcome <> 'succeeded' AND a.error IS NOT NULL
) AS failures
GROUP BY function, error_line
HAVING count(DISTINCT event_id) >= %(least_events)s
ORDER BY events DESC, function
LIMIT %(limit)s;

-- name: attempt_halves
-- Attempts and failures of each function in the first and second half of the window.
SELECT function,
    sum(CASE WHEN finished_at < %(middle)s THEN 1 ELSE 0 END) AS early_attempts,
    sum(CASE WHEN finished_at < %(middle)s AND outcome <> 'succeeded' THEN 1 ELSE 0 END)
        AS early_failures,
    sum(CASE WHEN finished_at >= %(middle)s THEN 1 ELSE 0 END) AS late_attempts,
    sum(CASE WHEN finished_at >= %(middle)s AND outcome <> 'succeeded' THEN 1 ELSE 0 END)
        AS late_failures
FROM oncefire_attempts
WHERE finished_at >= %(since)s
GROUP BY function
ORDER BY function;

-- name: dead_letter_halves
-- Dead letters of each function made in the first and second half of the window.
SELECT function,
    sum(CASE WHEN dead_at < %(middle)s THEN 1 ELSE 0 END) AS early,
    sum(CASE WHEN dead_at >= %(middle)s THEN 1 ELSE 0 END) AS late
FROM oncefire_deliveries
WHERE state = 'dead' AND dead_at >= %(since)s
GROUP BY function
ORDER BY function;
