-- oncefire schema 27: totals that only grow, which Prometheus's counters read
-- (oncefire.model.totals). Retention never purges them: they are kept apart from the history
-- they count.
--
-- One row per (function, kind, bin, shard). kind is an attempt's outcome ('succeeded',
-- 'failed', ...), 'dedupe' (duplicates an idempotency helper skipped), 'dead_letter' (dead
-- letters made), 'rate_limited' (deliveries that waited for their function's rate limit) or
-- 'loop_stopped' (deliveries of an event that stopped a loop). bin is an attempt's duration
-- bin, as in oncefire_buckets (0 for the other kinds); duration_sum sums the durations. The
-- statements that write an hour bucket add to the totals in the same statement, split by the
-- writing connection as the buckets are (schema 20); readers sum over the shards.
CREATE TABLE oncefire_totals (
    function text NOT NULL,
    kind text NOT NULL,
    bin integer NOT NULL,
    shard smallint NOT NULL DEFAULT (pg_backend_pid() % 8),
    count bigint NOT NULL,
    duration_sum double precision NOT NULL,
    PRIMARY KEY (function, kind, bin, shard)
);

-- An upgraded store starts from what it still holds: the hour buckets (kept longer than
-- attempts), the dead letters there are now, and those of them that stopped a loop.
INSERT INTO oncefire_totals (function, kind, bin, shard, count, duration_sum)
SELECT function, outcome, bin, 0, sum(count), sum(duration_sum) FROM oncefire_buckets
GROUP BY function, outcome, bin;
INSERT INTO oncefire_totals (function, kind, bin, shard, count, duration_sum)
SELECT function, 'dead_letter', 0, 0, count, 0 FROM oncefire_dead_counts WHERE count > 0;
INSERT INTO oncefire_totals (function, kind, bin, shard, count, duration_sum)
SELECT function, 'loop_stopped', 0, 0, count(*), 0 FROM oncefire_deliveries
WHERE state = 'dead' AND error LIKE 'recursive loop stopped at depth %' GROUP BY function;

-- The row trigger that counts dead letters also adds each new one to the totals (a statement
-- that keeps the counter itself, with oncefire.dead_counts = 'by_statement', adds its own).
CREATE OR REPLACE FUNCTION oncefire_count_dead() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.state = 'dead' THEN
        UPDATE oncefire_dead_counts SET count = count - 1 WHERE function = OLD.function;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') AND NEW.state = 'dead' THEN
        INSERT INTO oncefire_dead_counts (function, count) VALUES (NEW.function, 1)
        ON CONFLICT (function) DO UPDATE SET count = oncefire_dead_counts.count + 1;
        INSERT INTO oncefire_totals AS k (function, kind, bin, count, duration_sum)
        VALUES (NEW.function, 'dead_letter', 0, 1, 0)
        ON CONFLICT (function, kind, bin, shard) DO UPDATE SET count = k.count + 1;
    END IF;
    RETURN NULL;
END;
$$;
