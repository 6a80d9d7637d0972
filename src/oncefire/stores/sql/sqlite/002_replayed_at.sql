-- oncefire schema 2: when a dead letter was last replayed. max_event_age counts from the
-- later of the event's time and this, so a person's replay gets a fresh age allowance.
ALTER TABLE oncefire_deliveries ADD COLUMN replayed_at REAL;
