-- oncefire schema 4: an attempt's row is written once, when it ends. A running attempt is
-- its delivery (state running, attempt, worker, claimed_at), so a claim no longer inserts a
-- row that its record then updates: half the attempts-table writes an attempt.
ALTER TABLE oncefire_deliveries ADD COLUMN claimed_at REAL;
UPDATE oncefire_deliveries SET claimed_at = (
    SELECT max(a.started_at) FROM oncefire_attempts a
    WHERE a.delivery_id = oncefire_deliveries.id AND a.outcome IS NULL
) WHERE state = 'running';
DELETE FROM oncefire_attempts WHERE outcome IS NULL;
DROP INDEX IF EXISTS oncefire_attempts_open;
