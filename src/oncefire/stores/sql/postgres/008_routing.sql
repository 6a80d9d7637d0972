-- oncefire schema 8: no event is dropped, and functions can be listed, paused and forgotten.
-- routing: NULL, routed (its deliveries exist); 'new', awaiting routing by a worker (what a
-- table trigger inserts); 'unrouted', no function matched it yet (kept for the retention).
ALTER TABLE oncefire_events ADD COLUMN routing text;
CREATE INDEX oncefire_events_routing ON oncefire_events (routing, id) WHERE routing IS NOT NULL;
-- last_seen: when a worker serving the function last said so (at most once a minute).
-- paused_at: set while the function is paused (by a person or its budget); its deliveries
-- stay pending. needs_routing: a new name whose unrouted events are still to be offered.
ALTER TABLE oncefire_functions ADD COLUMN last_seen double precision;
ALTER TABLE oncefire_functions ADD COLUMN paused_at double precision;
ALTER TABLE oncefire_functions ADD COLUMN paused_reason text;
ALTER TABLE oncefire_functions ADD COLUMN needs_routing integer NOT NULL DEFAULT 0;

-- The one-statement document write (functions/set_document.sql) marks an event no function
-- takes.
-- apply: set_document
