-- Retention: finished history purged in small batches found by index (see docs/retention.md).
-- Dead, pending and running deliveries are never selected; an event goes with its last
-- delivery.

-- name: finished_before
SELECT id, event_id FROM oncefire_deliveries INDEXED BY oncefire_deliveries_finished
WHERE state IN ('succeeded', 'forwarded') AND finished_at < :before
LIMIT :limit;

-- name: delete_attempts_of
DELETE FROM oncefire_attempts WHERE event_id IN (:event_ids) AND delivery_id IN (:ids);

-- name: delete_finished
DELETE FROM oncefire_deliveries WHERE id IN (:ids) AND state IN ('succeeded', 'forwarded');

-- name: delete_bare_events
-- Routed events no delivery refers to any more (an unrouted event has none: never here).
DELETE FROM oncefire_events WHERE id IN (:event_ids) AND routing IS NULL
    AND NOT EXISTS (SELECT 1 FROM oncefire_deliveries d WHERE d.event_id = oncefire_events.id);

-- name: purge_dedupe_hits
DELETE FROM oncefire_dedupe_hits WHERE rowid IN (SELECT rowid FROM oncefire_dedupe_hits
    INDEXED BY oncefire_dedupe_hits_time WHERE at < :before LIMIT :limit);

-- name: purge_buckets
DELETE FROM oncefire_buckets WHERE (function, hour, outcome, bin) IN (
    SELECT function, hour, outcome, bin FROM oncefire_buckets INDEXED BY oncefire_buckets_hour
    WHERE hour < :before LIMIT :limit);

-- name: free_pages
-- Free pages a store with auto_vacuum = INCREMENTAL (2) can give back to the file system.
SELECT CASE WHEN auto_vacuum = 2 THEN freelist_count ELSE 0 END
FROM pragma_auto_vacuum, pragma_freelist_count;

-- name: reclaim_page
-- The driver steps this pragma once, which gives back one free page (the store repeats it).
PRAGMA incremental_vacuum(1);

-- name: count_finished_before
SELECT count(*) FROM oncefire_deliveries INDEXED BY oncefire_deliveries_finished
WHERE state IN ('succeeded', 'forwarded') AND finished_at < :before;

-- name: count_attempts_finished_before
SELECT count(*) FROM oncefire_deliveries d INDEXED BY oncefire_deliveries_finished
JOIN oncefire_attempts a ON a.event_id = d.event_id AND a.delivery_id = d.id
WHERE d.state IN ('succeeded', 'forwarded') AND d.finished_at < :before;

-- name: count_events_finished_before
-- Events all of whose deliveries finished before :before.
SELECT count(DISTINCT d.event_id) FROM oncefire_deliveries d
    INDEXED BY oncefire_deliveries_finished
WHERE d.state IN ('succeeded', 'forwarded') AND d.finished_at < :before
    AND NOT EXISTS (SELECT 1 FROM oncefire_deliveries o WHERE o.event_id = d.event_id
        AND NOT (o.state IN ('succeeded', 'forwarded') AND o.finished_at < :before));

-- name: count_expired_claims
SELECT (SELECT count(*) FROM oncefire_claims WHERE expires_at <= :now)
    + (SELECT count(*) FROM oncefire_idempotency WHERE expires_at <= :now
        AND lease_until <= :now);

-- name: count_dedupe_hits_before
SELECT count(*) FROM oncefire_dedupe_hits WHERE at < :before;

-- name: count_buckets_before
SELECT count(*) FROM oncefire_buckets WHERE hour < :before;

-- name: count_unrouted_before
SELECT count(*) FROM oncefire_events WHERE routing = 'unrouted' AND time < :before;
