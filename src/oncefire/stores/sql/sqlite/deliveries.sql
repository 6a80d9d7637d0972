-- Deliveries: leasing due ones, ending them with their attempt's row, renewing, rescuing.
-- A list parameter (:functions) stands for as many placeholders as it has values; one read
-- with json_each(:ids) is sent as one JSON text (a batch's ids: one parameter, not 512).

-- name: due_deliveries
-- The due index walks pending rows in run_at order and stops at LIMIT; the planner would
-- otherwise pick (function, state) and sort the backlog. :has_ids limits them to :ids.
-- A delivery with an ordering key waits while an earlier one of its key is not finished;
-- one without (ordering_key IS NULL) is not looked at further. BEGIN IMMEDIATE serializes
-- leases, so no two leases can both find a key free. A delivery whose key a worker has not
-- computed yet ('') is not leased. A solo delivery is leased only alone (see take_due).
SELECT run_at, id, solo FROM oncefire_deliveries AS d INDEXED BY oncefire_deliveries_due
WHERE state = 'pending' AND run_at <= :now AND function IN (:functions)
    AND (:has_ids = 0 OR id IN (:ids))
    AND (ordering_key IS NULL OR ordering_key <> '' AND NOT EXISTS (
        SELECT 1 FROM oncefire_deliveries AS o INDEXED BY oncefire_deliveries_ordered
        WHERE o.function = d.function AND o.ordering_key = d.ordering_key AND o.id < d.id
            AND o.state IN ('pending', 'running') AND o.ordering_key IS NOT NULL))
ORDER BY run_at, id LIMIT :limit;

-- name: lease_deliveries
-- :is_ahead = 1: marked started a wave ahead as they are leased (start_leases), without a
-- statement of their own; but :head, if not NULL, started (it starts alone).
UPDATE oncefire_deliveries SET state = 'running', attempt = attempt + 1,
    lease_token = :token, lease_until = :lease_until, worker = :worker,
    started_at = CASE WHEN :is_ahead OR id IS :head THEN :now END,
    ahead = CASE WHEN id IS :head THEN 0 ELSE :is_ahead END
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'pending'
RETURNING run_at, id, function, attempt, event_id, replayed_at, solo;

-- name: events_by_id
SELECT id, type, source, time, data, size, root_id, depth FROM oncefire_events
WHERE id IN (SELECT value FROM json_each(:ids));

-- name: running_counts
SELECT function, count(*) FROM oncefire_deliveries
WHERE state = 'running' AND lease_until > :now AND function IN (:functions)
GROUP BY function;

-- name: end_succeeded
UPDATE oncefire_deliveries SET state = 'succeeded', error = NULL, lease_token = NULL,
    lease_until = NULL, finished_at = :finished_at
WHERE id = :id AND state = 'running' AND lease_token = :token
RETURNING id, event_id, function, attempt, worker, started_at;

-- name: end_succeeded_of_token
-- A lease batch's deliveries share its token: one statement a token, not one a delivery; they
-- finished at the latest of their times (retention needs it to the minute, not closer).
UPDATE oncefire_deliveries SET state = 'succeeded', error = NULL, lease_token = NULL,
    lease_until = NULL, finished_at = :finished_at
WHERE lease_token = :token AND state = 'running'
    AND id IN (SELECT value FROM json_each(:ids))
RETURNING id, event_id, function, attempt, worker, started_at;

-- name: end_retried
-- A crash keeps a solo delivery solo; any other ending clears it.
UPDATE oncefire_deliveries SET state = 'pending', run_at = :run_at, error = :error,
    lease_token = NULL, lease_until = NULL,
    solo = CASE WHEN :outcome = 'crashed' THEN solo ELSE 0 END
WHERE id = :id AND state = 'running' AND lease_token = :token
RETURNING id, event_id, function, attempt, worker, started_at;

-- name: end_dead
UPDATE oncefire_deliveries SET state = 'dead', error = :dead_error, dead_at = :finished_at,
    error_group = :error_group,
    truncated = :is_truncated, dead_payload = :truncated, lease_token = NULL,
    lease_until = NULL
WHERE id = :id AND state = 'running' AND lease_token = :token
RETURNING id, event_id, function, attempt, worker, started_at;

-- name: end_forwarded
UPDATE oncefire_deliveries SET state = 'forwarded', error = :error, lease_token = NULL,
    lease_until = NULL, finished_at = :finished_at
WHERE id = :id AND state = 'running' AND lease_token = :token
RETURNING id, event_id, function, attempt, worker, started_at;

-- name: insert_attempt
-- Bound by position, a row a tuple in the columns' order: a batch's rows by name cost a
-- microsecond more each (twelve names looked up a row).
INSERT INTO oncefire_attempts (delivery_id, event_id, function, number, worker, started_at,
    finished_at, outcome, error, cpu_seconds, reads, writes)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: add_to_bucket
-- A batch's attempts summed per bucket in Python, then one upsert a bucket.
INSERT INTO oncefire_buckets (function, hour, outcome, bin, count, duration_sum, cpu_sum,
    max_number, reads_sum, writes_sum)
VALUES (:function, :hour, :outcome, :bin, :count, :duration_sum, :cpu_sum, :max_number,
    :reads_sum, :writes_sum)
ON CONFLICT (function, hour, outcome, bin) DO UPDATE SET count = count + excluded.count,
    duration_sum = duration_sum + excluded.duration_sum, cpu_sum = cpu_sum + excluded.cpu_sum,
    max_number = max(max_number, excluded.max_number),
    reads_sum = reads_sum + excluded.reads_sum, writes_sum = writes_sum + excluded.writes_sum;

-- name: add_to_total
-- Deliveries counted in the totals (schema 27) apart from an attempt: kind 'rate_limited' or
-- 'loop_stopped'. (Attempts and dedupe hits reach them by the hour buckets' triggers.)
INSERT INTO oncefire_totals (function, kind, bin, count, duration_sum)
VALUES (:function, :kind, 0, :count, 0)
ON CONFLICT (function, kind, bin) DO UPDATE SET count = count + excluded.count;

-- name: truncate_payload
-- The full payload is not kept once no other delivery still needs it.
UPDATE oncefire_events SET data = :truncated
WHERE id = (SELECT event_id FROM oncefire_deliveries WHERE id = :id)
AND NOT EXISTS (SELECT 1 FROM oncefire_deliveries o WHERE o.event_id = oncefire_events.id
    AND o.id != :id AND o.state IN ('pending', 'running'));

-- name: release_leases
-- The deliveries of one lease token (its batch shares it): one statement a token, not one a
-- delivery. :is_solo = 1: they were marked ahead when their worker died, so each is leased
-- alone from now on. :run_at: when they are due again (NULL: when they were).
UPDATE oncefire_deliveries SET state = 'pending', attempt = attempt - 1, lease_token = NULL,
    lease_until = NULL, worker = NULL, solo = max(solo, :is_solo),
    run_at = COALESCE(:run_at, run_at)
WHERE lease_token = :token AND state = 'running'
    AND id IN (SELECT value FROM json_each(:ids));

-- name: start_leases
-- Leased deliveries of one token whose functions start: started_at is their attempt's start
-- (a lease leaves it NULL, so a dead worker's never-started deliveries are handed back
-- uncharged). :is_ahead = 1: marked with others, a wave ahead: if their worker dies they are
-- handed back uncharged and solo.
UPDATE oncefire_deliveries SET started_at = COALESCE(started_at, :now), ahead = :is_ahead
WHERE lease_token = :token AND state = 'running' AND lease_until > :now
    AND id IN (SELECT value FROM json_each(:ids))
RETURNING id;

-- name: renew_leases
UPDATE oncefire_deliveries SET lease_until = :lease_until
WHERE lease_token = :token AND state = 'running' AND lease_until > :now
    AND id IN (SELECT value FROM json_each(:ids))
RETURNING id;

-- name: expired_leases
SELECT d.id, d.lease_token, d.function, d.attempt, d.event_id, d.started_at, d.ahead
FROM oncefire_deliveries d
WHERE d.state = 'running' AND d.lease_until <= :now AND d.function IN (:functions)
LIMIT :limit;

-- name: next_due
-- A delivery held back by an earlier one of its ordering key is not due before that one ends;
-- one whose key is not computed yet ('') is due: a worker keys it before its lease.
SELECT min(run_at) FROM oncefire_deliveries AS d
WHERE state = 'pending' AND function IN (:functions)
    AND (ordering_key IS NULL OR ordering_key = '' OR NOT EXISTS (
        SELECT 1 FROM oncefire_deliveries AS o INDEXED BY oncefire_deliveries_ordered
        WHERE o.function = d.function AND o.ordering_key = d.ordering_key AND o.id < d.id
            AND o.state IN ('pending', 'running') AND o.ordering_key IS NOT NULL));

-- name: later_of_key
-- The ordering key of a delivery and the events of its key that wait behind it, in order:
-- they run once it is a dead letter.
SELECT d.ordering_key, o.event_id FROM oncefire_deliveries d
LEFT JOIN oncefire_deliveries o ON o.function = d.function
    AND o.ordering_key = d.ordering_key AND o.id > d.id AND o.state IN ('pending', 'running')
WHERE d.id = :id AND d.ordering_key IS NOT NULL
ORDER BY o.id LIMIT :limit;

-- name: unkeyed_deliveries
-- Pending deliveries of functions ordered by a computed key whose key is not computed yet
-- (''), oldest first, with their events.
SELECT d.id, d.function, d.attempt, e.id, e.type, e.source, e.time, e.data, e.size
FROM oncefire_deliveries AS d INDEXED BY oncefire_deliveries_ordered
JOIN oncefire_events AS e ON e.id = d.event_id
WHERE d.function IN (:functions) AND d.ordering_key = '' AND d.state = 'pending'
    AND d.state IN ('pending', 'running') AND d.ordering_key IS NOT NULL
ORDER BY d.id LIMIT :limit;

-- name: set_ordering_key
-- The key a worker computed; a delivery keyed meanwhile (by another worker) stays as it is.
UPDATE oncefire_deliveries SET ordering_key = :key WHERE id = :id AND ordering_key = '';

-- name: bury_unkeyed
-- A delivery whose key cannot be computed becomes a dead letter; a replay keys it again.
UPDATE oncefire_deliveries SET state = 'dead', error = :error, dead_at = :now
WHERE id = :id AND state = 'pending' AND ordering_key = '';

-- name: take_expired_leases
-- Rescue: re-lease deliveries whose lease ran out to the rescuer, in the write transaction
-- (BEGIN IMMEDIATE), so each is rescued by one worker. The worker column keeps the worker
-- that died: the crashed attempt is its.
UPDATE oncefire_deliveries SET lease_token = :token, lease_until = :lease_until
WHERE id IN (
    SELECT id FROM oncefire_deliveries
    WHERE state = 'running' AND lease_until <= :now AND function IN (:functions)
    ORDER BY id LIMIT :limit
)
RETURNING id, lease_token, function, attempt, event_id, started_at, ahead;
