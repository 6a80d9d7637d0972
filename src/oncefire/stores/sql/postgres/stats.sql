-- Figures for `stats` and the history of an event's deliveries and attempts.

-- name: function_names
SELECT name FROM oncefire_functions;

-- name: bucket_figures
-- Attempts per outcome and duration bin, and the highest attempt number, from the hour
-- buckets of the window (a few rows an hour a function, whatever the history).
SELECT function, outcome, bin, sum(count), max(max_number) FROM oncefire_buckets
WHERE hour >= %(since_hour)s GROUP BY function, outcome, bin;

-- name: bucket_sums
-- Per function and outcome over the window: attempts, seconds spent and CPU seconds.
SELECT function, outcome, sum(count), sum(duration_sum), sum(cpu_sum) FROM oncefire_buckets
WHERE hour >= %(since_hour)s AND outcome != 'dedupe' GROUP BY function, outcome;

-- name: state_counts
SELECT function, 'pending', count(*) FROM oncefire_deliveries WHERE state = 'pending'
GROUP BY function
UNION ALL
SELECT function, 'running', count(*) FROM oncefire_deliveries WHERE state = 'running'
GROUP BY function
UNION ALL
SELECT function, 'dead', count FROM oncefire_dead_counts WHERE count > 0;

-- name: delivery_states
SELECT function, state, attempt FROM oncefire_deliveries WHERE event_id = %(event_id)s
ORDER BY id;

-- name: attempts_of_event
-- Each delivery's attempts in order (one runs at a time): those that ended, then the one
-- running now (its row is written when it ends).
SELECT delivery_id, function, number, worker, started_at, finished_at, outcome, error
FROM (SELECT 0 AS running, id AS n, delivery_id, function, number, worker, started_at,
        finished_at, outcome, error
    FROM oncefire_attempts WHERE event_id = %(event_id)s
    UNION ALL
    SELECT 1, 0, id, function, attempt, worker, started_at, NULL, NULL, NULL
    FROM oncefire_deliveries WHERE event_id = %(event_id)s AND state = 'running') AS a
ORDER BY delivery_id, running, n;
