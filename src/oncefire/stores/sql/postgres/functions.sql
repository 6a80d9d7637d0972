-- The functions catalogue (last seen, paused, forgotten) and the routing of events that no
-- function took when they were written (routing 'new' or 'unrouted').

-- name: events_to_route
SELECT id, type, source, time, data, size FROM oncefire_events
WHERE routing = %(routing)s AND id > %(after)s ORDER BY id LIMIT %(limit)s;

-- name: mark_routed
-- Guarded by the mark it leaves: two workers routing one event add its deliveries once.
UPDATE oncefire_events SET routing = %(to)s WHERE id = %(id)s AND routing = %(from)s RETURNING id;

-- name: functions_to_route
SELECT name FROM oncefire_functions WHERE needs_routing = 1;

-- name: routing_done
UPDATE oncefire_functions SET needs_routing = 0 WHERE name = %(name)s;

-- name: purge_unrouted
DELETE FROM oncefire_events WHERE id IN (
    SELECT id FROM oncefire_events WHERE routing = 'unrouted' AND time < %(before)s
    ORDER BY id LIMIT %(limit)s
) RETURNING id;

-- name: count_unrouted
SELECT count(*) FROM oncefire_events WHERE routing = 'unrouted';

-- name: touch_functions
UPDATE oncefire_functions SET last_seen = %(now)s WHERE name = ANY(%(names)s::text[]);

-- name: function_rows
SELECT f.name, f.kind, f.source, f.event_types, f.registered_at, f.last_seen, f.paused_at,
    f.paused_reason, (SELECT count(*) FROM oncefire_deliveries d
        WHERE d.function = f.name AND d.state = 'pending')
FROM oncefire_functions f ORDER BY f.name;

-- name: pause_function
UPDATE oncefire_functions SET paused_at = %(now)s, paused_reason = %(reason)s
WHERE name = %(name)s AND paused_at IS NULL RETURNING name;

-- name: resume_function
UPDATE oncefire_functions SET paused_at = NULL, paused_reason = NULL
WHERE name = %(name)s AND paused_at IS NOT NULL RETURNING name;

-- name: paused_functions
SELECT name FROM oncefire_functions WHERE paused_at IS NOT NULL;

-- name: forget_function
DELETE FROM oncefire_functions WHERE name = %(name)s RETURNING name;

-- name: dead_counts_by_statement
-- The dead-letter counter's row trigger off for this transaction: the next statement keeps it.
SELECT set_config('oncefire.dead_counts', 'by_statement', true);

-- name: dead_counts_by_row
SELECT set_config('oncefire.dead_counts', 'by_row', true);

-- name: bury_pending_of
-- A forgotten function's pending deliveries become dead letters: replayable, none destroyed.
-- The statement adds them to the counter and to the totals with one upsert each (after
-- dead_counts_by_statement).
WITH buried AS (
    UPDATE oncefire_deliveries SET state = 'dead', error = %(error)s, dead_at = %(now)s,
        error_group = %(error_group)s
    WHERE function = %(name)s AND state = 'pending' RETURNING id
), counted AS (
    INSERT INTO oncefire_dead_counts (function, count) SELECT %(name)s, count(*) FROM buried
    ON CONFLICT (function) DO UPDATE SET count = oncefire_dead_counts.count + excluded.count
), totals AS (
    INSERT INTO oncefire_totals AS k (function, kind, bin, count, duration_sum)
    SELECT %(name)s, 'dead_letter', 0, count(*), 0 FROM buried HAVING count(*) > 0
    ON CONFLICT (function, kind, bin, shard) DO UPDATE SET count = k.count + excluded.count
)
SELECT count(*) FROM buried;

-- name: budget_used
-- Attempts ended in the budget's window (by the (function, finished_at) index), and running.
SELECT (SELECT count(*) FROM oncefire_attempts WHERE function = %(function)s
        AND finished_at >= %(since)s),
    (SELECT count(*) FROM oncefire_deliveries WHERE function = %(function)s
        AND state = 'running');

-- name: failures_after
-- A failure-rate budget: the attempts ended after a time and those that did not succeed (by
-- the (function, finished_at) index).
SELECT count(*), sum(CASE WHEN outcome = 'succeeded' THEN 0 ELSE 1 END) FROM oncefire_attempts
WHERE function = %(function)s AND finished_at > %(after)s;
