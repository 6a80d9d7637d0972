-- oncefire schema 4: an attempt's row is written once, when it ends. A running attempt is
-- its delivery (state running, attempt, worker, claimed_at), so a claim no longer inserts a
-- row that its record then updates: half the attempts-table writes an attempt.
ALTER TABLE oncefire_deliveries ADD COLUMN claimed_at double precision;
UPDATE oncefire_deliveries d SET claimed_at = a.started_at
    FROM (SELECT delivery_id, max(started_at) AS started_at FROM oncefire_attempts
          WHERE outcome IS NULL GROUP BY delivery_id) AS a
    WHERE a.delivery_id = d.id AND d.state = 'running';
DELETE FROM oncefire_attempts WHERE outcome IS NULL;
DROP INDEX IF EXISTS oncefire_attempts_open;
