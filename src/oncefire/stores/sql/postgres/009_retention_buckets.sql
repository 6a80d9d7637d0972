-- oncefire schema 9: bounded growth. Statistics come from hour buckets kept in the
-- statement that records an attempt; dead letters are counted by a kept counter; finished
-- deliveries carry the time they finished, so retention finds them by index.
--
-- One row per (function, hour, outcome, duration bin): counts, summed durations and CPU
-- seconds, and the highest attempt number. outcome 'dedupe' counts duplicates skipped by
-- an idempotency helper (bin 0). A duration's bin is width_bucket over these lower bounds
-- (oncefire.model.buckets.DURATION_BOUNDS; the bounds are part of the schema).
CREATE TABLE oncefire_buckets (
    function text NOT NULL,
    hour double precision NOT NULL,
    outcome text NOT NULL,
    bin integer NOT NULL,
    count bigint NOT NULL,
    duration_sum double precision NOT NULL,
    cpu_sum double precision NOT NULL,
    max_number integer NOT NULL,
    PRIMARY KEY (function, hour, outcome, bin)
);
CREATE INDEX oncefire_buckets_hour ON oncefire_buckets (hour);

ALTER TABLE oncefire_attempts ADD COLUMN cpu_seconds double precision;

INSERT INTO oncefire_buckets (function, hour, outcome, bin, count, duration_sum, cpu_sum,
    max_number)
SELECT function, floor(finished_at / 3600) * 3600, outcome,
    width_bucket(finished_at - started_at, ARRAY[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
        0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300]::float8[]),
    count(*), sum(greatest(finished_at - started_at, 0)), 0, max(number)
FROM oncefire_attempts WHERE outcome IS NOT NULL AND finished_at IS NOT NULL
GROUP BY 1, 2, 3, 4;
INSERT INTO oncefire_buckets (function, hour, outcome, bin, count, duration_sum, cpu_sum,
    max_number)
SELECT function, floor(at / 3600) * 3600, 'dedupe', 0, count(*), 0, 0, 0
FROM oncefire_dedupe_hits GROUP BY 1, 2;

-- When a delivery finished (succeeded or forwarded): retention purges by it.
ALTER TABLE oncefire_deliveries ADD COLUMN finished_at double precision;
UPDATE oncefire_deliveries SET finished_at = run_at WHERE state IN ('succeeded', 'forwarded');
CREATE INDEX oncefire_deliveries_finished ON oncefire_deliveries (finished_at)
    WHERE state IN ('succeeded', 'forwarded');
-- Dedupe hits are counted in the buckets; their rows are purged by time.
CREATE INDEX oncefire_dedupe_hits_time ON oncefire_dedupe_hits (at);

-- A dead letter's error group: the first line of its error (120 characters at most), the
-- grouping the dashboard shows. Lists and counts of a group walk this partial index.
ALTER TABLE oncefire_deliveries ADD COLUMN error_group text;
UPDATE oncefire_deliveries SET error_group = left(split_part(coalesce(error, ''), E'\n', 1), 120)
WHERE state = 'dead';
CREATE INDEX oncefire_deliveries_dead_group ON oncefire_deliveries (function, error_group, id)
    WHERE state = 'dead';
-- Dead letters per function, kept by the statements that bury, replay and dismiss.
CREATE TABLE oncefire_dead_counts (
    function text PRIMARY KEY,
    count bigint NOT NULL
);
INSERT INTO oncefire_dead_counts (function, count)
SELECT function, count(*) FROM oncefire_deliveries WHERE state = 'dead' GROUP BY function;
-- A trigger keeps the counters in the statement that makes or ends a dead letter, whichever
-- statement it is (bury, replay, dismiss, an operator's edit): no path can miss one. Its
-- WHEN clause keeps it off every other state change (leases, completions).
CREATE OR REPLACE FUNCTION oncefire_count_dead() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.state = 'dead' THEN
        UPDATE oncefire_dead_counts SET count = count - 1 WHERE function = OLD.function;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') AND NEW.state = 'dead' THEN
        INSERT INTO oncefire_dead_counts (function, count) VALUES (NEW.function, 1)
        ON CONFLICT (function) DO UPDATE SET count = oncefire_dead_counts.count + 1;
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER oncefire_dead_counts_changed AFTER UPDATE OF state ON oncefire_deliveries
FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state
    AND (OLD.state = 'dead' OR NEW.state = 'dead'))
EXECUTE FUNCTION oncefire_count_dead();
CREATE TRIGGER oncefire_dead_counts_deleted AFTER DELETE ON oncefire_deliveries
FOR EACH ROW WHEN (OLD.state = 'dead') EXECUTE FUNCTION oncefire_count_dead();
CREATE TRIGGER oncefire_dead_counts_inserted AFTER INSERT ON oncefire_deliveries
FOR EACH ROW WHEN (NEW.state = 'dead') EXECUTE FUNCTION oncefire_count_dead();
