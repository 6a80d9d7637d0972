-- Figures for `oncefire cost`, from the hour buckets of attempts (see docs/audit.md).

-- name: cost_sums
-- Per function and outcome over the window: attempts, seconds spent, CPU seconds, and the
-- store reads and writes the function made.
SELECT function, outcome, sum(count), sum(duration_sum), sum(cpu_sum), sum(reads_sum),
    sum(writes_sum)
FROM oncefire_buckets WHERE hour >= %(since_hour)s AND outcome != 'dedupe'
GROUP BY function, outcome ORDER BY function, outcome;
