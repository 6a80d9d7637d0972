-- oncefire schema 29: each schedule's last tick handled (fired or skipped), so a worker that
-- starts after a downtime finds the ticks missed meanwhile and applies the schedule's
-- missed-tick policy to them (oncefire.features.ticks). A tick's event stays its once-only record.
CREATE TABLE oncefire_schedule_ticks (
    function TEXT PRIMARY KEY,
    last_tick REAL NOT NULL
);
