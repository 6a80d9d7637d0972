-- Retention: finished history purged in small batches found by index (see docs/retention.md).
-- Dead, pending and running deliveries are never selected; an event goes with its last
-- delivery. Deleted rows are reused after autovacuum; batches keep each transaction short.

-- name: finished_before
SELECT id, event_id FROM oncefire_deliveries
WHERE state IN ('succeeded', 'forwarded') AND finished_at < %(before)s
LIMIT %(limit)s FOR UPDATE SKIP LOCKED;

-- name: delete_attempts_of
DELETE FROM oncefire_attempts
WHERE event_id = ANY(%(event_ids)s::text[]) AND delivery_id = ANY(%(ids)s::bigint[]);

-- name: delete_finished
DELETE FROM oncefire_deliveries
WHERE id = ANY(%(ids)s::bigint[]) AND state IN ('succeeded', 'forwarded');

-- name: delete_bare_events
-- Routed events no delivery refers to any more (an unrouted event has none: never here).
DELETE FROM oncefire_events e WHERE id = ANY(%(event_ids)s::text[]) AND routing IS NULL
    AND NOT EXISTS (SELECT 1 FROM oncefire_deliveries d WHERE d.event_id = e.id);

-- name: purge_dedupe_hits
DELETE FROM oncefire_dedupe_hits WHERE ctid = ANY(ARRAY(SELECT ctid FROM oncefire_dedupe_hits
    WHERE at < %(before)s LIMIT %(limit)s));

-- name: purge_buckets
DELETE FROM oncefire_buckets WHERE (function, hour, outcome, bin) IN (
    SELECT function, hour, outcome, bin FROM oncefire_buckets
    WHERE hour < %(before)s LIMIT %(limit)s);

-- name: free_pages
-- PostgreSQL's autovacuum makes deleted rows' space reusable: no pages to give back here.
SELECT 0;

-- name: reclaim_page
-- Never run (free_pages is 0): SQLite's incremental_vacuum step.
SELECT 0;

-- name: count_finished_before
SELECT count(*) FROM oncefire_deliveries
WHERE state IN ('succeeded', 'forwarded') AND finished_at < %(before)s;

-- name: count_attempts_finished_before
SELECT count(*) FROM oncefire_deliveries d
JOIN oncefire_attempts a ON a.event_id = d.event_id AND a.delivery_id = d.id
WHERE d.state IN ('succeeded', 'forwarded') AND d.finished_at < %(before)s;

-- name: count_events_finished_before
-- Events all of whose deliveries finished before %(before)s.
SELECT count(DISTINCT d.event_id) FROM oncefire_deliveries d
WHERE d.state IN ('succeeded', 'forwarded') AND d.finished_at < %(before)s
    AND NOT EXISTS (SELECT 1 FROM oncefire_deliveries o WHERE o.event_id = d.event_id
        AND NOT (o.state IN ('succeeded', 'forwarded') AND o.finished_at < %(before)s));

-- name: count_expired_claims
SELECT (SELECT count(*) FROM oncefire_claims WHERE expires_at <= %(now)s)
    + (SELECT count(*) FROM oncefire_idempotency WHERE expires_at <= %(now)s
        AND lease_until <= %(now)s);

-- name: count_dedupe_hits_before
SELECT count(*) FROM oncefire_dedupe_hits WHERE at < %(before)s;

-- name: count_buckets_before
SELECT count(*) FROM oncefire_buckets WHERE hour < %(before)s;

-- name: count_unrouted_before
SELECT count(*) FROM oncefire_events WHERE routing = 'unrouted' AND time < %(before)s;
