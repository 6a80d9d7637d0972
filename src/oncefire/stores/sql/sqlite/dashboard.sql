-- Named queries of the dashboard, the metrics and the alerts (SQLite). Every time is given
-- by the caller (the app's clock); every listing is bounded by a LIMIT.

-- name: event
SELECT id, type, source, time, data, size, root_id, depth FROM oncefire_events
WHERE id = :id

-- name: function_states
-- Whether paused, and the last sign of a worker of each stored function (the functions page).
SELECT name, last_seen, paused_at, paused_reason FROM oncefire_functions ORDER BY name

-- name: event_deliveries
SELECT id, function, state, attempt, run_at, error, dead_at, created_at
FROM oncefire_deliveries WHERE event_id = :event_id ORDER BY id LIMIT 100

-- name: recent_attempts
SELECT id, delivery_id, event_id, number, worker, started_at, finished_at, outcome, error
FROM oncefire_attempts WHERE function = :function AND finished_at IS NOT NULL
ORDER BY finished_at DESC, id DESC LIMIT :limit

-- name: recent_attempts_by_outcome
SELECT id, delivery_id, event_id, number, worker, started_at, finished_at, outcome, error
FROM oncefire_attempts WHERE function = :function AND finished_at IS NOT NULL
AND outcome = :outcome ORDER BY finished_at DESC, id DESC LIMIT :limit

-- name: attempts_per_hour
-- From the hour buckets: slot 0 is the hour that starts at :since (an hour's start).
SELECT CAST((hour - :since) / 3600 AS INTEGER) AS hour, sum(count) AS attempts,
    sum(CASE WHEN outcome = 'succeeded' THEN 0 ELSE count END) AS failed
FROM oncefire_buckets WHERE function = :function AND hour >= :since
    AND outcome != 'dedupe'
GROUP BY 1 ORDER BY 1
-- name: pending_backlog
SELECT function, count(*) AS pending, min(CASE WHEN run_at <= :now THEN run_at END) AS oldest_due
FROM oncefire_deliveries WHERE state = 'pending' GROUP BY function

-- name: dead_groups
-- The newest 10 000 dead letters of a function, grouped by their error's first line.
SELECT substr(substr(coalesce(error, ''), 1, instr(coalesce(error, '') || char(10), char(10)) - 1),
    1, 120) AS error, count(*) AS count, max(dead_at) AS last_at
FROM (SELECT error, dead_at FROM oncefire_deliveries WHERE state = 'dead'
    AND function = :function ORDER BY id DESC LIMIT 10000) AS newest
GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT :limit

-- name: dead_since
SELECT id, dead_at FROM oncefire_deliveries WHERE state = 'dead' AND dead_at >= :since
ORDER BY dead_at, id LIMIT :limit

-- name: delete_dead
DELETE FROM oncefire_deliveries WHERE id = :id AND state = 'dead' RETURNING id

-- name: is_marked
SELECT key, at FROM oncefire_alert_marks WHERE key = :key

-- name: mark
INSERT INTO oncefire_alert_marks (key, at) VALUES (:key, :at) ON CONFLICT (key) DO NOTHING RETURNING key

-- name: set_mark
INSERT INTO oncefire_alert_marks (key, at) VALUES (:key, :at)
ON CONFLICT (key) DO UPDATE SET at = excluded.at

-- name: forget_marks
DELETE FROM oncefire_alert_marks WHERE key LIKE 'dead_letter:%' AND at < :before

-- name: unmark
DELETE FROM oncefire_alert_marks WHERE key = :key RETURNING key

-- name: add_audit
INSERT INTO oncefire_audit (at, actor, action, function, target, count, detail)
VALUES (:at, :actor, :action, :function, :target, :count, :detail)

-- name: audit_log
SELECT id, at, actor, action, function, target, count, detail FROM oncefire_audit
ORDER BY id DESC LIMIT :limit

-- name: audit_log_before
SELECT id, at, actor, action, function, target, count, detail FROM oncefire_audit
WHERE id < :before ORDER BY id DESC LIMIT :limit

-- name: outcomes_since
-- From the attempt rows (the alerts' windows are minutes, finer than a bucket).
SELECT function, outcome, count(*) AS n FROM oncefire_attempts
INDEXED BY oncefire_attempts_finished WHERE finished_at >= :since GROUP BY function, outcome

-- name: states_by_function
SELECT function, 'pending' AS state, count(*) AS n FROM oncefire_deliveries
WHERE state = 'pending' GROUP BY function
UNION ALL SELECT function, 'running', count(*) FROM oncefire_deliveries
WHERE state = 'running' GROUP BY function
UNION ALL SELECT function, 'dead', count FROM oncefire_dead_counts WHERE count > 0

-- name: metric_totals
-- The totals that only grow (schema 27): a few rows a function, whatever the history.
SELECT function, kind, bin, count, duration_sum FROM oncefire_totals
