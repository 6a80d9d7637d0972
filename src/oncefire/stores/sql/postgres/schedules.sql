-- Each schedule's last tick handled (oncefire.features.ticks): read when a worker first looks at the
-- schedule, moved on in the transaction that emits its ticks.

-- name: tick_after
-- The no-op update makes RETURNING give the row that was already there.
INSERT INTO oncefire_schedule_ticks (function, last_tick) VALUES (%(function)s, %(since)s)
ON CONFLICT (function) DO UPDATE SET last_tick = oncefire_schedule_ticks.last_tick
RETURNING last_tick;

-- name: record_tick
INSERT INTO oncefire_schedule_ticks (function, last_tick) VALUES (%(function)s, %(tick)s)
ON CONFLICT (function) DO UPDATE
SET last_tick = GREATEST(oncefire_schedule_ticks.last_tick, excluded.last_tick);
