-- oncefire schema 9: bounded growth. Statistics come from hour buckets kept in the
-- transaction that records an attempt; dead letters are counted by a kept counter; finished
-- deliveries carry the time they finished, so retention finds them by index.
--
-- One row per (function, hour, outcome, duration bin): counts, summed durations and CPU
-- seconds, and the highest attempt number. outcome 'dedupe' counts duplicates skipped by
-- an idempotency helper (bin 0). A duration's bin is how many of these lower bounds (in
-- seconds) it reaches: 0.001 0.0025 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5 10 30 60 300
-- (oncefire.model.buckets.DURATION_BOUNDS; the bounds are part of the schema).
CREATE TABLE oncefire_buckets (
    function TEXT NOT NULL,
    hour REAL NOT NULL,
    outcome TEXT NOT NULL,
    bin INTEGER NOT NULL,
    count INTEGER NOT NULL,
    duration_sum REAL NOT NULL,
    cpu_sum REAL NOT NULL,
    max_number INTEGER NOT NULL,
    PRIMARY KEY (function, hour, outcome, bin)
) WITHOUT ROWID;
CREATE INDEX oncefire_buckets_hour ON oncefire_buckets (hour);

ALTER TABLE oncefire_attempts ADD COLUMN cpu_seconds REAL;

INSERT INTO oncefire_buckets (function, hour, outcome, bin, count, duration_sum, cpu_sum,
    max_number)
SELECT function, hour, outcome, bin, count(*), sum(duration), 0, max(number) FROM (
    SELECT function, CAST(finished_at / 3600 AS INTEGER) * 3600.0 AS hour, outcome, number,
        max(finished_at - started_at, 0) AS duration,
        (finished_at - started_at >= 0.001) + (finished_at - started_at >= 0.0025)
        + (finished_at - started_at >= 0.005) + (finished_at - started_at >= 0.01)
        + (finished_at - started_at >= 0.025) + (finished_at - started_at >= 0.05)
        + (finished_at - started_at >= 0.1) + (finished_at - started_at >= 0.25)
        + (finished_at - started_at >= 0.5) + (finished_at - started_at >= 1)
        + (finished_at - started_at >= 2.5) + (finished_at - started_at >= 5)
        + (finished_at - started_at >= 10) + (finished_at - started_at >= 30)
        + (finished_at - started_at >= 60) + (finished_at - started_at >= 300) AS bin
    FROM oncefire_attempts WHERE outcome IS NOT NULL AND finished_at IS NOT NULL
) AS a GROUP BY function, hour, outcome, bin;
INSERT INTO oncefire_buckets (function, hour, outcome, bin, count, duration_sum, cpu_sum,
    max_number)
SELECT function, CAST(at / 3600 AS INTEGER) * 3600.0, 'dedupe', 0, count(*), 0, 0, 0
FROM oncefire_dedupe_hits GROUP BY 1, 2;

-- When a delivery finished (succeeded or forwarded): retention purges by it.
ALTER TABLE oncefire_deliveries ADD COLUMN finished_at REAL;
UPDATE oncefire_deliveries SET finished_at = run_at WHERE state IN ('succeeded', 'forwarded');
CREATE INDEX oncefire_deliveries_finished ON oncefire_deliveries (finished_at)
    WHERE state IN ('succeeded', 'forwarded');
-- Dedupe hits are counted in the buckets; their rows are purged by time.
CREATE INDEX oncefire_dedupe_hits_time ON oncefire_dedupe_hits (at);

-- A dead letter's error group: the first line of its error (120 characters at most), the
-- grouping the dashboard shows. Lists and counts of a group walk this partial index.
ALTER TABLE oncefire_deliveries ADD COLUMN error_group TEXT;
UPDATE oncefire_deliveries SET error_group = substr(substr(coalesce(error, ''), 1,
    instr(coalesce(error, '') || char(10), char(10)) - 1), 1, 120)
WHERE state = 'dead';
CREATE INDEX oncefire_deliveries_dead_group ON oncefire_deliveries (function, error_group, id)
    WHERE state = 'dead';
-- Dead letters per function, kept by the statements that bury, replay and dismiss.
CREATE TABLE oncefire_dead_counts (
    function TEXT PRIMARY KEY,
    count INTEGER NOT NULL
);
INSERT INTO oncefire_dead_counts (function, count)
SELECT function, count(*) FROM oncefire_deliveries WHERE state = 'dead' GROUP BY function;
-- Triggers keep the counters in the statement that makes or ends a dead letter, whichever
-- statement it is (bury, replay, dismiss, an operator's edit): no path can miss one.
CREATE TRIGGER oncefire_dead_counts_in AFTER UPDATE OF state ON oncefire_deliveries
WHEN new.state = 'dead' AND old.state != 'dead'
BEGIN
    INSERT INTO oncefire_dead_counts (function, count) VALUES (new.function, 1)
    ON CONFLICT (function) DO UPDATE SET count = count + 1;
END;
CREATE TRIGGER oncefire_dead_counts_out AFTER UPDATE OF state ON oncefire_deliveries
WHEN old.state = 'dead' AND new.state != 'dead'
BEGIN
    UPDATE oncefire_dead_counts SET count = count - 1 WHERE function = old.function;
END;
CREATE TRIGGER oncefire_dead_counts_deleted AFTER DELETE ON oncefire_deliveries
WHEN old.state = 'dead'
BEGIN
    UPDATE oncefire_dead_counts SET count = count - 1 WHERE function = old.function;
END;
CREATE TRIGGER oncefire_dead_counts_inserted AFTER INSERT ON oncefire_deliveries
WHEN new.state = 'dead'
BEGIN
    INSERT INTO oncefire_dead_counts (function, count) VALUES (new.function, 1)
    ON CONFLICT (function) DO UPDATE SET count = count + 1;
END;
