-- oncefire schema 27: totals that only grow, which Prometheus's counters read
-- (oncefire.model.totals). Retention never purges them: they are kept apart from the history
-- they count.
--
-- One row per (function, kind, bin). kind is an attempt's outcome ('succeeded', 'failed',
-- ...), 'dedupe' (duplicates an idempotency helper skipped), 'dead_letter' (dead letters
-- made), 'rate_limited' (deliveries that waited for their function's rate limit) or
-- 'loop_stopped' (deliveries of an event that stopped a loop). bin is an attempt's duration
-- bin, as in oncefire_buckets (0 for the other kinds); duration_sum sums the durations.
CREATE TABLE oncefire_totals (
    function TEXT NOT NULL,
    kind TEXT NOT NULL,
    bin INTEGER NOT NULL,
    count INTEGER NOT NULL,
    duration_sum REAL NOT NULL,
    PRIMARY KEY (function, kind, bin)
) WITHOUT ROWID;

-- An upgraded store starts from what it still holds: the hour buckets (kept longer than
-- attempts), the dead letters there are now, and those of them that stopped a loop.
INSERT INTO oncefire_totals (function, kind, bin, count, duration_sum)
SELECT function, outcome, bin, sum(count), sum(duration_sum) FROM oncefire_buckets
GROUP BY function, outcome, bin;
INSERT INTO oncefire_totals (function, kind, bin, count, duration_sum)
SELECT function, 'dead_letter', 0, count, 0 FROM oncefire_dead_counts WHERE count > 0;
INSERT INTO oncefire_totals (function, kind, bin, count, duration_sum)
SELECT function, 'loop_stopped', 0, count(*), 0 FROM oncefire_deliveries
WHERE state = 'dead' AND error LIKE 'recursive loop stopped at depth %' GROUP BY function;

-- Every write of an hour bucket adds what it added to the totals, in its own statement;
-- retention's deletes of buckets take nothing away.
CREATE TRIGGER oncefire_totals_bucket_added AFTER INSERT ON oncefire_buckets
BEGIN
    INSERT INTO oncefire_totals (function, kind, bin, count, duration_sum)
    VALUES (new.function, new.outcome, new.bin, new.count, new.duration_sum)
    ON CONFLICT (function, kind, bin) DO UPDATE SET count = count + excluded.count,
        duration_sum = duration_sum + excluded.duration_sum;
END;
CREATE TRIGGER oncefire_totals_bucket_grown AFTER UPDATE OF count ON oncefire_buckets
BEGIN
    INSERT INTO oncefire_totals (function, kind, bin, count, duration_sum)
    VALUES (new.function, new.outcome, new.bin, new.count - old.count,
        new.duration_sum - old.duration_sum)
    ON CONFLICT (function, kind, bin) DO UPDATE SET count = count + excluded.count,
        duration_sum = duration_sum + excluded.duration_sum;
END;

-- The triggers that count dead letters now also add each new one to the totals, whichever
-- statement makes it.
DROP TRIGGER oncefire_dead_counts_in;
CREATE TRIGGER oncefire_dead_counts_in AFTER UPDATE OF state ON oncefire_deliveries
WHEN new.state = 'dead' AND old.state != 'dead'
BEGIN
    INSERT INTO oncefire_dead_counts (function, count) VALUES (new.function, 1)
    ON CONFLICT (function) DO UPDATE SET count = count + 1;
    INSERT INTO oncefire_totals (function, kind, bin, count, duration_sum)
    VALUES (new.function, 'dead_letter', 0, 1, 0)
    ON CONFLICT (function, kind, bin) DO UPDATE SET count = count + 1;
END;
DROP TRIGGER oncefire_dead_counts_inserted;
CREATE TRIGGER oncefire_dead_counts_inserted AFTER INSERT ON oncefire_deliveries
WHEN new.state = 'dead'
BEGIN
    INSERT INTO oncefire_dead_counts (function, count) VALUES (new.function, 1)
    ON CONFLICT (function) DO UPDATE SET count = count + 1;
    INSERT INTO oncefire_totals (function, kind, bin, count, duration_sum)
    VALUES (new.function, 'dead_letter', 0, 1, 0)
    ON CONFLICT (function, kind, bin) DO UPDATE SET count = count + 1;
END;
