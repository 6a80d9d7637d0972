-- Renaming a function (stores/catalogue/rename.py): everything kept under its name moves to the new
-- name in one transaction. History (attempts, hour buckets, dedupe hits) moves too, so the
-- renamed function's figures go on; audit entries keep the name they were written with.

-- name: function_known
-- (in the catalogue, has deliveries) of a name.
SELECT (SELECT count(*) FROM oncefire_functions WHERE name = %(name)s) > 0,
    EXISTS (SELECT 1 FROM oncefire_deliveries WHERE function = %(name)s);

-- name: waiting_of
-- A function's deliveries still to run or to replay, by state.
SELECT state, count(*) FROM oncefire_deliveries
WHERE function = %(old)s AND state IN ('pending', 'running', 'dead') GROUP BY state;

-- name: rename_catalogue_row
-- The catalogue row moves when the new name has none (else the new name's row, registered by
-- the code that defines it, stays, and the old row goes).
UPDATE oncefire_functions SET name = %(new)s
WHERE name = %(old)s AND NOT EXISTS (SELECT 1 FROM oncefire_functions WHERE name = %(new)s)
RETURNING name;

-- name: drop_renamed_row
DELETE FROM oncefire_functions WHERE name = %(old)s;

-- name: rename_deliveries
UPDATE oncefire_deliveries SET function = %(new)s WHERE function = %(old)s;

-- name: rename_attempts
UPDATE oncefire_attempts SET function = %(new)s WHERE function = %(old)s;

-- name: rename_dedupe_hits
UPDATE oncefire_dedupe_hits SET function = %(new)s WHERE function = %(old)s;

-- name: rename_buckets
INSERT INTO oncefire_buckets (function, hour, outcome, bin, shard, count, duration_sum,
    cpu_sum, max_number, reads_sum, writes_sum)
SELECT %(new)s, hour, outcome, bin, shard, count, duration_sum, cpu_sum, max_number, reads_sum,
    writes_sum
FROM oncefire_buckets WHERE function = %(old)s
ON CONFLICT (function, hour, outcome, bin, shard) DO UPDATE
SET count = oncefire_buckets.count + excluded.count,
    duration_sum = oncefire_buckets.duration_sum + excluded.duration_sum,
    cpu_sum = oncefire_buckets.cpu_sum + excluded.cpu_sum,
    max_number = GREATEST(oncefire_buckets.max_number, excluded.max_number),
    reads_sum = oncefire_buckets.reads_sum + excluded.reads_sum,
    writes_sum = oncefire_buckets.writes_sum + excluded.writes_sum;

-- name: drop_renamed_buckets
DELETE FROM oncefire_buckets WHERE function = %(old)s;

-- name: rename_dead_counts
INSERT INTO oncefire_dead_counts (function, count)
SELECT %(new)s, count FROM oncefire_dead_counts WHERE function = %(old)s
ON CONFLICT (function) DO UPDATE SET count = oncefire_dead_counts.count + excluded.count;

-- name: drop_renamed_dead_counts
DELETE FROM oncefire_dead_counts WHERE function = %(old)s;

-- name: rename_records
-- @idempotent records are keyed "function/helper/key": a moved record keeps its result, so a
-- replayed delivery does not run its effect again. One the new name holds already stays.
UPDATE oncefire_idempotency AS r
SET key = %(new)s || substr(r.key, length(%(old)s) + 1), function = %(new)s
WHERE r.function = %(old)s AND NOT EXISTS (
    SELECT 1 FROM oncefire_idempotency AS n
    WHERE n.key = %(new)s || substr(r.key, length(%(old)s) + 1));

-- name: rename_ordering
UPDATE oncefire_ordering SET function = %(new)s
WHERE function = %(old)s AND NOT EXISTS (SELECT 1 FROM oncefire_ordering WHERE function = %(new)s);

-- name: drop_renamed_ordering
DELETE FROM oncefire_ordering WHERE function = %(old)s;

-- name: rename_rate_bucket
UPDATE oncefire_rate_buckets SET function = %(new)s
WHERE function = %(old)s AND NOT EXISTS (SELECT 1 FROM oncefire_rate_buckets WHERE function = %(new)s);

-- name: drop_renamed_rate_bucket
DELETE FROM oncefire_rate_buckets WHERE function = %(old)s;

-- name: rename_awaited
UPDATE oncefire_awaited_sources SET name = %(new)s WHERE name = %(old)s;

-- name: rename_totals
-- The totals the counters read go on under the new name (no trigger adds to them here).
INSERT INTO oncefire_totals (function, kind, bin, shard, count, duration_sum)
SELECT %(new)s, kind, bin, shard, count, duration_sum FROM oncefire_totals
WHERE function = %(old)s
ON CONFLICT (function, kind, bin, shard) DO UPDATE
SET count = oncefire_totals.count + excluded.count,
    duration_sum = oncefire_totals.duration_sum + excluded.duration_sum;

-- name: drop_renamed_totals
DELETE FROM oncefire_totals WHERE function = %(old)s;
