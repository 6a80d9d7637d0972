-- oncefire schema 20: the hour buckets of one key are split by the connection that writes them
-- (its backend pid), so that workers ending attempts of one function in the same hour at once
-- do not queue on one row's lock until each other's commit (a lock held through a commit's
-- flush, once an event with per-event acknowledgement). Every reader sums over the shards.
ALTER TABLE oncefire_buckets ADD COLUMN shard smallint NOT NULL DEFAULT 0;
ALTER TABLE oncefire_buckets ALTER COLUMN shard SET DEFAULT (pg_backend_pid() % 8);
ALTER TABLE oncefire_buckets DROP CONSTRAINT oncefire_buckets_pkey;
ALTER TABLE oncefire_buckets ADD PRIMARY KEY (function, hour, outcome, bin, shard);
