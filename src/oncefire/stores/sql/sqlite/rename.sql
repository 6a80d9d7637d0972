-- Renaming a function (stores/catalogue/rename.py): everything kept under its name moves to the new
-- name in one transaction. History (attempts, hour buckets, dedupe hits) moves too, so the
-- renamed function's figures go on; audit entries keep the name they were written with.

-- name: function_known
-- (in the catalogue, has deliveries) of a name.
SELECT (SELECT count(*) FROM oncefire_functions WHERE name = :name),
    EXISTS (SELECT 1 FROM oncefire_deliveries WHERE function = :name);

-- name: waiting_of
-- A function's deliveries still to run or to replay, by state.
SELECT state, count(*) FROM oncefire_deliveries
WHERE function = :old AND state IN ('pending', 'running', 'dead') GROUP BY state;

-- name: rename_catalogue_row
-- The catalogue row moves when the new name has none (else the new name's row, registered by
-- the code that defines it, stays, and the old row goes).
UPDATE oncefire_functions SET name = :new
WHERE name = :old AND NOT EXISTS (SELECT 1 FROM oncefire_functions WHERE name = :new)
RETURNING name;

-- name: drop_renamed_row
DELETE FROM oncefire_functions WHERE name = :old;

-- name: rename_deliveries
UPDATE oncefire_deliveries SET function = :new WHERE function = :old;

-- name: rename_attempts
UPDATE oncefire_attempts SET function = :new WHERE function = :old;

-- name: rename_dedupe_hits
UPDATE oncefire_dedupe_hits SET function = :new WHERE function = :old;

-- name: rename_buckets
INSERT INTO oncefire_buckets (function, hour, outcome, bin, count, duration_sum, cpu_sum,
    max_number, reads_sum, writes_sum)
SELECT :new, hour, outcome, bin, count, duration_sum, cpu_sum, max_number, reads_sum,
    writes_sum
FROM oncefire_buckets WHERE function = :old
ON CONFLICT (function, hour, outcome, bin) DO UPDATE SET count = count + excluded.count,
    duration_sum = duration_sum + excluded.duration_sum, cpu_sum = cpu_sum + excluded.cpu_sum,
    max_number = max(max_number, excluded.max_number),
    reads_sum = reads_sum + excluded.reads_sum, writes_sum = writes_sum + excluded.writes_sum;

-- name: drop_renamed_buckets
DELETE FROM oncefire_buckets WHERE function = :old;

-- name: rename_dead_counts
INSERT INTO oncefire_dead_counts (function, count)
SELECT :new, count FROM oncefire_dead_counts WHERE function = :old
ON CONFLICT (function) DO UPDATE SET count = count + excluded.count;

-- name: drop_renamed_dead_counts
DELETE FROM oncefire_dead_counts WHERE function = :old;

-- name: rename_records
-- @idempotent records are keyed "function/helper/key": a moved record keeps its result, so a
-- replayed delivery does not run its effect again. One the new name holds already stays.
UPDATE oncefire_idempotency SET key = :new || substr(key, length(:old) + 1), function = :new
WHERE function = :old AND NOT EXISTS (
    SELECT 1 FROM oncefire_idempotency AS n
    WHERE n.key = :new || substr(oncefire_idempotency.key, length(:old) + 1));

-- name: rename_ordering
UPDATE oncefire_ordering SET function = :new
WHERE function = :old AND NOT EXISTS (SELECT 1 FROM oncefire_ordering WHERE function = :new);

-- name: drop_renamed_ordering
DELETE FROM oncefire_ordering WHERE function = :old;

-- name: rename_rate_bucket
UPDATE oncefire_rate_buckets SET function = :new
WHERE function = :old AND NOT EXISTS (SELECT 1 FROM oncefire_rate_buckets WHERE function = :new);

-- name: drop_renamed_rate_bucket
DELETE FROM oncefire_rate_buckets WHERE function = :old;

-- name: rename_awaited
UPDATE oncefire_awaited_sources SET name = :new WHERE name = :old;

-- name: rename_totals
-- Runs before rename_buckets, whose moves the buckets' triggers add to the new name's totals
-- (schema 27): what the old name's buckets still hold is left for them to add.
INSERT INTO oncefire_totals (function, kind, bin, count, duration_sum)
SELECT :new, t.kind, t.bin, t.count - coalesce(b.count, 0),
    t.duration_sum - coalesce(b.duration_sum, 0)
FROM oncefire_totals AS t
LEFT JOIN (
    SELECT outcome, bin, sum(count) AS count, sum(duration_sum) AS duration_sum
    FROM oncefire_buckets WHERE function = :old GROUP BY outcome, bin
) AS b ON b.outcome = t.kind AND b.bin = t.bin
WHERE t.function = :old
ON CONFLICT (function, kind, bin) DO UPDATE SET count = count + excluded.count,
    duration_sum = duration_sum + excluded.duration_sum;

-- name: drop_renamed_totals
DELETE FROM oncefire_totals WHERE function = :old;
