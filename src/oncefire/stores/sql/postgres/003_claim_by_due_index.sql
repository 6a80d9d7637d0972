-- oncefire schema 3: drop the (function, state) index. With stale statistics (a bulk insert
-- before the next ANALYZE) the planner chose it for leases and sorted the whole backlog on
-- every lease. Without it, leases walk the due index in run_at order and stop at LIMIT.
-- Stats count pending, running and dead deliveries through their partial indexes instead.
DROP INDEX IF EXISTS oncefire_deliveries_state;
-- Leases order by (run_at, id): with id in the index, equal run_at values (one bulk write)
-- need no sort either.
DROP INDEX IF EXISTS oncefire_deliveries_due;
CREATE INDEX oncefire_deliveries_due ON oncefire_deliveries (run_at, id) WHERE state = 'pending';
