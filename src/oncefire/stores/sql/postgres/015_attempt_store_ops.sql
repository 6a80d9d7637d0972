-- oncefire schema 15: the store reads and writes a function made, per attempt and summed in
-- the hour buckets, for `oncefire cost` (see docs/audit.md). NULL on an attempt: not counted
-- (older attempts, and attempts oncefire ended without running the function's code).
ALTER TABLE oncefire_attempts ADD COLUMN reads integer;
ALTER TABLE oncefire_attempts ADD COLUMN writes integer;
ALTER TABLE oncefire_buckets ADD COLUMN reads_sum bigint NOT NULL DEFAULT 0;
ALTER TABLE oncefire_buckets ADD COLUMN writes_sum bigint NOT NULL DEFAULT 0;
