-- Deliveries: leasing due ones, ending them with their attempt's row, renewing, rescuing.
-- An attempt's row is written once, when it ends, from what its delivery tells of it, in the
-- ending's statement with its hour bucket and the totals that only grow (schema 27).
-- Statements that make work due wake sleeping workers: oncefire_wake('oncefire', ids)
-- (migration 026), with an empty payload past 50 ids.
-- A batch's arrays are sent in binary (%(ids)b): psycopg writes a text array element by
-- element in Python (docs/performance.md). A binary array's elements are of one Python type
-- (no int among floats).

-- name: no_bitmap_scans
-- Walk the due index in (run_at, id) order and stop at LIMIT. Right after a bulk write,
-- before autovacuum's ANALYZE, the planner's estimates make a bitmap scan plus a sort of the
-- whole backlog look cheaper, and a lease would sort the backlog each time.
SET LOCAL enable_bitmapscan = off;

-- name: lease_due
-- Lock due deliveries (SKIP LOCKED: those other workers hold are passed over), make them
-- running under a fresh lease and return them with their events. The batch shares one token
-- (%(token)s): the lease is a delivery's id with it (the server makes no token a row).
-- %(ids)s, if not empty,
-- limits them to those delivery ids; %(is_ahead)s marks them started a wave ahead too, as
-- start_leases would, but the first started when it starts alone, now (%(free_slots)s is 1,
-- or it is the only one and a slot is free).
-- A delivery with an ordering key waits while an earlier one of its key (lower id) is pending
-- or running. Two leases never take two of one key: a delivery only leaves pending and
-- running when it ends, so any snapshot shows an earlier unfinished one as unfinished, and
-- the row lock keeps two leases from taking the same head. A delivery whose key a worker has
-- not computed yet ('') is not leased.
-- A solo delivery is leased only alone, by a worker holding nothing else (%(is_alone)s): a
-- lease takes the due deliveries before the first solo one, or that one alone when it is the
-- first and the worker is alone.
WITH due AS (
    SELECT id, run_at, solo FROM oncefire_deliveries d
    WHERE state = 'pending' AND run_at <= %(now)s AND function = ANY(%(free)s::text[])
        AND (cardinality(%(ids)s::bigint[]) = 0 OR id = ANY(%(ids)s::bigint[]))
        AND (ordering_key IS NULL OR ordering_key <> '' AND NOT EXISTS (
            SELECT 1 FROM oncefire_deliveries o
            WHERE o.function = d.function AND o.ordering_key = d.ordering_key AND o.id < d.id
                AND o.state IN ('pending', 'running') AND o.ordering_key IS NOT NULL))
    ORDER BY run_at, id LIMIT %(limit)s FOR UPDATE SKIP LOCKED
), ranked AS (
    SELECT id, solo, row_number() OVER (ORDER BY run_at, id) AS n FROM due
), cut AS (
    SELECT min(n) AS n FROM ranked WHERE solo
), chosen AS (
    SELECT r.id, r.n = 1 AND %(is_ahead)s AND %(free_slots)s >= 1
        AND (%(free_slots)s = 1 OR count(*) OVER () = 1)
        AS is_head_started
    FROM ranked r, cut
    WHERE cut.n IS NULL OR r.n < cut.n OR (r.n = 1 AND cut.n = 1 AND %(is_alone)s)
), taken AS (
    UPDATE oncefire_deliveries d SET state = 'running', attempt = d.attempt + 1,
        lease_token = %(token)s,
        lease_until = %(lease_until)s, worker = %(worker)s,
        started_at = CASE WHEN %(is_ahead)s THEN %(now)s END,
        ahead = %(is_ahead)s AND NOT chosen.is_head_started
    FROM chosen WHERE d.id = chosen.id
    RETURNING d.id, d.function, d.attempt, d.event_id, d.run_at, d.replayed_at, d.solo
)
SELECT t.id, t.function, t.attempt, e.id, e.type, e.source, e.time, e.data, e.size,
    e.root_id, e.depth, t.replayed_at, t.solo, t.run_at
FROM taken t JOIN oncefire_events e ON e.id = t.event_id ORDER BY t.run_at, t.id;

-- name: lease_due_capped
-- lease_due, where each capped function takes at most its free slots (%(rooms)s).
WITH due AS (
    SELECT id, run_at, solo FROM (
        SELECT * FROM (
            SELECT id, run_at, solo FROM oncefire_deliveries d
            WHERE state = 'pending' AND run_at <= %(now)s AND function = ANY(%(free)s::text[])
                AND (cardinality(%(ids)s::bigint[]) = 0 OR id = ANY(%(ids)s::bigint[]))
                AND (ordering_key IS NULL OR ordering_key <> '' AND NOT EXISTS (
                    SELECT 1 FROM oncefire_deliveries o
                    WHERE o.function = d.function AND o.ordering_key = d.ordering_key
                        AND o.id < d.id AND o.state IN ('pending', 'running')
                        AND o.ordering_key IS NOT NULL))
            ORDER BY run_at, id LIMIT %(limit)s FOR UPDATE SKIP LOCKED
        ) AS a
        UNION ALL
        SELECT c.id, c.run_at, c.solo FROM unnest(%(capped)s::text[], %(rooms)s::int[]) AS f (name, room)
        CROSS JOIN LATERAL (
            SELECT id, run_at, solo FROM oncefire_deliveries d
            WHERE state = 'pending' AND run_at <= %(now)s AND function = f.name
                AND (cardinality(%(ids)s::bigint[]) = 0 OR id = ANY(%(ids)s::bigint[]))
                AND (ordering_key IS NULL OR ordering_key <> '' AND NOT EXISTS (
                    SELECT 1 FROM oncefire_deliveries o
                    WHERE o.function = d.function AND o.ordering_key = d.ordering_key
                        AND o.id < d.id AND o.state IN ('pending', 'running')
                        AND o.ordering_key IS NOT NULL))
            ORDER BY run_at, id LIMIT f.room FOR UPDATE SKIP LOCKED
        ) AS c
    ) AS u ORDER BY run_at, id LIMIT %(limit)s
), ranked AS (
    SELECT id, solo, row_number() OVER (ORDER BY run_at, id) AS n FROM due
), cut AS (
    SELECT min(n) AS n FROM ranked WHERE solo
), chosen AS (
    SELECT r.id, r.n = 1 AND %(is_ahead)s AND %(free_slots)s >= 1
        AND (%(free_slots)s = 1 OR count(*) OVER () = 1)
        AS is_head_started
    FROM ranked r, cut
    WHERE cut.n IS NULL OR r.n < cut.n OR (r.n = 1 AND cut.n = 1 AND %(is_alone)s)
), taken AS (
    UPDATE oncefire_deliveries d SET state = 'running', attempt = d.attempt + 1,
        lease_token = %(token)s,
        lease_until = %(lease_until)s, worker = %(worker)s,
        started_at = CASE WHEN %(is_ahead)s THEN %(now)s END,
        ahead = %(is_ahead)s AND NOT chosen.is_head_started
    FROM chosen WHERE d.id = chosen.id
    RETURNING d.id, d.function, d.attempt, d.event_id, d.run_at, d.replayed_at, d.solo
)
SELECT t.id, t.function, t.attempt, e.id, e.type, e.source, e.time, e.data, e.size,
    e.root_id, e.depth, t.replayed_at, t.solo, t.run_at
FROM taken t JOIN oncefire_events e ON e.id = t.event_id ORDER BY t.run_at, t.id;

-- name: lock_function
-- Free slots of a capped function are counted under a lock every worker leasing it takes.
SELECT pg_advisory_xact_lock(%(key)s);

-- name: running_counts
SELECT function, count(*) FROM oncefire_deliveries
WHERE state = 'running' AND lease_until > %(now)s AND function = ANY(%(functions)s::text[])
GROUP BY function;

-- name: end_succeeded
WITH d AS (
    UPDATE oncefire_deliveries SET state = 'succeeded', error = NULL, lease_token = NULL,
        lease_until = NULL, finished_at = %(finished_at)s
    WHERE id = %(id)s AND state = 'running' AND lease_token = %(token)s
    RETURNING id, event_id, function, attempt, worker, started_at
), a AS (
    INSERT INTO oncefire_attempts (delivery_id, event_id, function, number, worker,
        started_at, finished_at, outcome, error, cpu_seconds, reads, writes)
    SELECT id, event_id, function, attempt, worker, COALESCE(%(started_at)s::double precision,
        started_at, %(finished_at)s), %(finished_at)s, %(outcome)s, %(error)s,
        %(cpu_seconds)s::double precision, %(reads)s::integer, %(writes)s::integer FROM d
    RETURNING function, number, finished_at, outcome, finished_at - started_at AS duration,
        cpu_seconds, reads, writes
), b AS (
    INSERT INTO oncefire_buckets AS k (function, hour, outcome, bin, count, duration_sum,
        cpu_sum, max_number, reads_sum, writes_sum)
    SELECT function, floor(finished_at / 3600) * 3600, outcome,
        width_bucket(duration, %(bounds)s::float8[]), 1, greatest(duration, 0),
        COALESCE(cpu_seconds, 0), number, COALESCE(reads, 0), COALESCE(writes, 0) FROM a
    ON CONFLICT (function, hour, outcome, bin, shard) DO UPDATE SET count = k.count + 1,
        duration_sum = k.duration_sum + excluded.duration_sum,
        cpu_sum = k.cpu_sum + excluded.cpu_sum,
        max_number = greatest(k.max_number, excluded.max_number),
        reads_sum = k.reads_sum + excluded.reads_sum,
        writes_sum = k.writes_sum + excluded.writes_sum
), totals AS (
    INSERT INTO oncefire_totals AS k (function, kind, bin, count, duration_sum)
    SELECT function, outcome, width_bucket(duration, %(bounds)s::float8[]), 1,
        greatest(duration, 0) FROM a
    ON CONFLICT (function, kind, bin, shard) DO UPDATE SET count = k.count + 1,
        duration_sum = k.duration_sum + excluded.duration_sum
)
SELECT id FROM d;

-- name: end_succeeded_many
-- One statement for the whole batch: the round trip per delivery was the drain's cost. It
-- returns (id, NULL) for each delivery ended and (NULL, key) for each record completed. A
-- lease token is set only while its delivery runs, so matching it is the state check. A
-- literal state = 'running' would let the planner, on statistics taken when nothing ran,
-- scan the whole partial running index for every batch instead of looking each id up.
WITH x AS (
    SELECT * FROM unnest(%(ids)b::bigint[], %(tokens)b::text[], %(finished)b::float8[],
        %(started)b::float8[], %(cpu)b::float8[], %(reads)b::integer[], %(writes)b::integer[])
        AS x (id, token, finished_at, started_at, cpu_seconds, reads, writes)
), d AS (
    UPDATE oncefire_deliveries o SET state = 'succeeded', error = NULL, lease_token = NULL,
        lease_until = NULL, finished_at = x.finished_at
    FROM x WHERE o.id = x.id AND o.lease_token = x.token
    RETURNING o.id, o.event_id, o.function, o.attempt, o.worker, o.started_at AS marked_at,
        x.finished_at, x.started_at, x.cpu_seconds, x.reads, x.writes
), a AS (
    INSERT INTO oncefire_attempts (delivery_id, event_id, function, number, worker,
        started_at, finished_at, outcome, error, cpu_seconds, reads, writes)
    SELECT id, event_id, function, attempt, worker, COALESCE(started_at, marked_at,
        finished_at), finished_at, 'succeeded', NULL, cpu_seconds, reads, writes FROM d
    RETURNING function, number, finished_at, finished_at - started_at AS duration, cpu_seconds,
        reads, writes
), b AS (
    -- The batch summed per bucket in the statement: one upsert a bucket, not one an attempt.
    INSERT INTO oncefire_buckets AS k (function, hour, outcome, bin, count, duration_sum,
        cpu_sum, max_number, reads_sum, writes_sum)
    SELECT function, floor(finished_at / 3600) * 3600 AS hour, 'succeeded',
        width_bucket(duration, %(bounds)b::float8[]) AS bin, count(*), sum(greatest(duration, 0)),
        COALESCE(sum(cpu_seconds), 0), max(number), COALESCE(sum(reads), 0),
        COALESCE(sum(writes), 0) FROM a
    GROUP BY function, hour, bin
    ON CONFLICT (function, hour, outcome, bin, shard) DO UPDATE SET count = k.count + excluded.count,
        duration_sum = k.duration_sum + excluded.duration_sum,
        cpu_sum = k.cpu_sum + excluded.cpu_sum,
        max_number = greatest(k.max_number, excluded.max_number),
        reads_sum = k.reads_sum + excluded.reads_sum,
        writes_sum = k.writes_sum + excluded.writes_sum
), totals AS (
    INSERT INTO oncefire_totals AS k (function, kind, bin, count, duration_sum)
    SELECT function, 'succeeded', width_bucket(duration, %(bounds)b::float8[]) AS bin,
        count(*), sum(greatest(duration, 0)) FROM a
    GROUP BY function, bin
    ON CONFLICT (function, kind, bin, shard) DO UPDATE SET count = k.count + excluded.count,
        duration_sum = k.duration_sum + excluded.duration_sum
), r AS (
    -- The @idempotent records the attempts completed (%(completions)s, as complete_records):
    -- written with their endings, not in a statement of their own.
    UPDATE oncefire_idempotency AS r SET status = 'completed', lease_until = c.completed_at,
        expires_at = c.expires_at, result = c.result_json
    FROM json_to_recordset(%(completions)s::json) AS c (key text, token text,
        completed_at double precision, expires_at double precision, result_json text)
    WHERE r.key = c.key AND r.token = c.token
    RETURNING r.key
)
SELECT id, NULL FROM d UNION ALL SELECT NULL, key FROM r;

-- name: end_retried
-- A retry due at once (%(is_due)s) wakes a worker for it. A crash keeps a solo delivery solo;
-- any other ending clears it.
WITH d AS (
    UPDATE oncefire_deliveries SET state = 'pending', run_at = %(run_at)s, error = %(error)s,
        lease_token = NULL, lease_until = NULL,
        solo = solo AND %(outcome)s::text = 'crashed'
    WHERE id = %(id)s AND state = 'running' AND lease_token = %(token)s
    RETURNING id, event_id, function, attempt, worker, started_at
), a AS (
    INSERT INTO oncefire_attempts (delivery_id, event_id, function, number, worker,
        started_at, finished_at, outcome, error, cpu_seconds, reads, writes)
    SELECT id, event_id, function, attempt, worker, COALESCE(%(started_at)s::double precision,
        started_at, %(finished_at)s), %(finished_at)s, %(outcome)s, %(error)s,
        %(cpu_seconds)s::double precision, %(reads)s::integer, %(writes)s::integer FROM d
    RETURNING function, number, finished_at, outcome, finished_at - started_at AS duration,
        cpu_seconds, reads, writes
), b AS (
    INSERT INTO oncefire_buckets AS k (function, hour, outcome, bin, count, duration_sum,
        cpu_sum, max_number, reads_sum, writes_sum)
    SELECT function, floor(finished_at / 3600) * 3600, outcome,
        width_bucket(duration, %(bounds)s::float8[]), 1, greatest(duration, 0),
        COALESCE(cpu_seconds, 0), number, COALESCE(reads, 0), COALESCE(writes, 0) FROM a
    ON CONFLICT (function, hour, outcome, bin, shard) DO UPDATE SET count = k.count + 1,
        duration_sum = k.duration_sum + excluded.duration_sum,
        cpu_sum = k.cpu_sum + excluded.cpu_sum,
        max_number = greatest(k.max_number, excluded.max_number),
        reads_sum = k.reads_sum + excluded.reads_sum,
        writes_sum = k.writes_sum + excluded.writes_sum
), totals AS (
    INSERT INTO oncefire_totals AS k (function, kind, bin, count, duration_sum)
    SELECT function, outcome, width_bucket(duration, %(bounds)s::float8[]), 1,
        greatest(duration, 0) FROM a
    ON CONFLICT (function, kind, bin, shard) DO UPDATE SET count = k.count + 1,
        duration_sum = k.duration_sum + excluded.duration_sum
)
SELECT id, CASE WHEN %(is_due)s THEN oncefire_wake('oncefire', id::text) END FROM d;

-- name: end_dead
-- A cut payload (%(truncated)s not NULL) replaces the event's: the full one is not kept once
-- no other delivery needs it.
WITH d AS (
    UPDATE oncefire_deliveries SET state = 'dead', error = %(dead_error)s,
        dead_at = %(finished_at)s, error_group = %(error_group)s, truncated = %(is_truncated)s,
        dead_payload = %(truncated)s::jsonb, lease_token = NULL, lease_until = NULL
    WHERE id = %(id)s AND state = 'running' AND lease_token = %(token)s
    RETURNING id, event_id, function, attempt, worker, started_at
), a AS (
    INSERT INTO oncefire_attempts (delivery_id, event_id, function, number, worker,
        started_at, finished_at, outcome, error, cpu_seconds, reads, writes)
    SELECT id, event_id, function, attempt, worker, COALESCE(%(started_at)s::double precision,
        started_at, %(finished_at)s), %(finished_at)s, %(outcome)s, %(error)s,
        %(cpu_seconds)s::double precision, %(reads)s::integer, %(writes)s::integer FROM d
    RETURNING function, number, finished_at, outcome, finished_at - started_at AS duration,
        cpu_seconds, reads, writes
), b AS (
    INSERT INTO oncefire_buckets AS k (function, hour, outcome, bin, count, duration_sum,
        cpu_sum, max_number, reads_sum, writes_sum)
    SELECT function, floor(finished_at / 3600) * 3600, outcome,
        width_bucket(duration, %(bounds)s::float8[]), 1, greatest(duration, 0),
        COALESCE(cpu_seconds, 0), number, COALESCE(reads, 0), COALESCE(writes, 0) FROM a
    ON CONFLICT (function, hour, outcome, bin, shard) DO UPDATE SET count = k.count + 1,
        duration_sum = k.duration_sum + excluded.duration_sum,
        cpu_sum = k.cpu_sum + excluded.cpu_sum,
        max_number = greatest(k.max_number, excluded.max_number),
        reads_sum = k.reads_sum + excluded.reads_sum,
        writes_sum = k.writes_sum + excluded.writes_sum
), totals AS (
    INSERT INTO oncefire_totals AS k (function, kind, bin, count, duration_sum)
    SELECT function, outcome, width_bucket(duration, %(bounds)s::float8[]), 1,
        greatest(duration, 0) FROM a
    ON CONFLICT (function, kind, bin, shard) DO UPDATE SET count = k.count + 1,
        duration_sum = k.duration_sum + excluded.duration_sum
), t AS (
    UPDATE oncefire_events SET data = %(truncated)s::jsonb
    WHERE %(truncated)s::text IS NOT NULL AND id = (SELECT event_id FROM d) AND NOT EXISTS (SELECT 1 FROM oncefire_deliveries o
        WHERE o.event_id = oncefire_events.id AND o.id != %(id)s
        AND o.state IN ('pending', 'running'))
)
SELECT id FROM d;

-- name: end_forwarded
WITH d AS (
    UPDATE oncefire_deliveries SET state = 'forwarded', error = %(error)s, lease_token = NULL,
        lease_until = NULL, finished_at = %(finished_at)s
    WHERE id = %(id)s AND state = 'running' AND lease_token = %(token)s
    RETURNING id, event_id, function, attempt, worker, started_at
), a AS (
    INSERT INTO oncefire_attempts (delivery_id, event_id, function, number, worker,
        started_at, finished_at, outcome, error, cpu_seconds, reads, writes)
    SELECT id, event_id, function, attempt, worker, COALESCE(%(started_at)s::double precision,
        started_at, %(finished_at)s), %(finished_at)s, %(outcome)s, %(error)s,
        %(cpu_seconds)s::double precision, %(reads)s::integer, %(writes)s::integer FROM d
    RETURNING function, number, finished_at, outcome, finished_at - started_at AS duration,
        cpu_seconds, reads, writes
), b AS (
    INSERT INTO oncefire_buckets AS k (function, hour, outcome, bin, count, duration_sum,
        cpu_sum, max_number, reads_sum, writes_sum)
    SELECT function, floor(finished_at / 3600) * 3600, outcome,
        width_bucket(duration, %(bounds)s::float8[]), 1, greatest(duration, 0),
        COALESCE(cpu_seconds, 0), number, COALESCE(reads, 0), COALESCE(writes, 0) FROM a
    ON CONFLICT (function, hour, outcome, bin, shard) DO UPDATE SET count = k.count + 1,
        duration_sum = k.duration_sum + excluded.duration_sum,
        cpu_sum = k.cpu_sum + excluded.cpu_sum,
        max_number = greatest(k.max_number, excluded.max_number),
        reads_sum = k.reads_sum + excluded.reads_sum,
        writes_sum = k.writes_sum + excluded.writes_sum
), totals AS (
    INSERT INTO oncefire_totals AS k (function, kind, bin, count, duration_sum)
    SELECT function, outcome, width_bucket(duration, %(bounds)s::float8[]), 1,
        greatest(duration, 0) FROM a
    ON CONFLICT (function, kind, bin, shard) DO UPDATE SET count = k.count + 1,
        duration_sum = k.duration_sum + excluded.duration_sum
)
SELECT id FROM d;

-- name: add_to_total
-- Deliveries counted in the totals (schema 27) apart from an attempt: kind 'rate_limited' or
-- 'loop_stopped'.
INSERT INTO oncefire_totals AS k (function, kind, bin, count, duration_sum)
VALUES (%(function)s, %(kind)s, 0, %(count)s, 0)
ON CONFLICT (function, kind, bin, shard) DO UPDATE SET count = k.count + excluded.count;

-- name: release_leases
-- The token is the state check, as in end_succeeded_many. %(is_solo)s: they were marked ahead
-- when their worker died, so each is leased alone from now on. %(run_at)s: when they are due
-- again (NULL: when they were).
WITH d AS (
    UPDATE oncefire_deliveries d SET state = 'pending', attempt = d.attempt - 1,
        lease_token = NULL, lease_until = NULL, worker = NULL, solo = d.solo OR %(is_solo)s,
        run_at = COALESCE(%(run_at)s::double precision, d.run_at)
    FROM unnest(%(ids)b::bigint[], %(tokens)b::text[]) AS l (id, token)
    WHERE d.id = l.id AND d.lease_token = l.token
    RETURNING d.id
)
SELECT count(*), oncefire_wake('oncefire', CASE WHEN count(*) <= 50
    THEN string_agg(id::text, ',' ORDER BY id) ELSE '' END)
FROM d HAVING count(*) > 0;

-- name: start_leases
-- Leased deliveries whose functions start: started_at is their attempt's start (a lease leaves
-- it NULL, so a dead worker's never-started deliveries are handed back uncharged).
-- %(is_ahead)s: marked with others, a wave ahead: if their worker dies they are handed back
-- uncharged and solo.
UPDATE oncefire_deliveries d SET started_at = COALESCE(d.started_at, %(now)s),
    ahead = %(is_ahead)s
FROM unnest(%(ids)b::bigint[], %(tokens)b::text[]) AS l (id, token)
WHERE d.id = l.id AND d.lease_token = l.token AND d.lease_until > %(now)s
RETURNING d.id;

-- name: renew_leases
UPDATE oncefire_deliveries d SET lease_until = %(lease_until)s
FROM unnest(%(ids)b::bigint[], %(tokens)b::text[]) AS l (id, token)
WHERE d.id = l.id AND d.lease_token = l.token AND d.lease_until > %(now)s
RETURNING d.id;

-- name: expired_leases
SELECT d.id, d.lease_token, d.function, d.attempt, d.started_at, e.id, e.type, e.source,
    e.time, e.data, e.size, e.root_id, e.depth, d.ahead
FROM oncefire_deliveries d JOIN oncefire_events e ON e.id = d.event_id
WHERE d.state = 'running' AND d.lease_until <= %(now)s
    AND d.function = ANY(%(functions)s::text[])
ORDER BY d.id LIMIT %(limit)s;

-- name: next_due
-- A delivery held back by an earlier one of its ordering key is not due before that one ends;
-- one whose key is not computed yet ('') is due: a worker keys it before its lease.
SELECT min(run_at) FROM oncefire_deliveries d
WHERE state = 'pending' AND function = ANY(%(functions)s::text[])
    AND (ordering_key IS NULL OR ordering_key = '' OR NOT EXISTS (
        SELECT 1 FROM oncefire_deliveries o
        WHERE o.function = d.function AND o.ordering_key = d.ordering_key AND o.id < d.id
            AND o.state IN ('pending', 'running') AND o.ordering_key IS NOT NULL));

-- name: later_of_key
-- The ordering key of a delivery and the events of its key that wait behind it, in order:
-- they run once it is a dead letter.
SELECT d.ordering_key, o.event_id FROM oncefire_deliveries d
LEFT JOIN oncefire_deliveries o ON o.function = d.function
    AND o.ordering_key = d.ordering_key AND o.id > d.id AND o.state IN ('pending', 'running')
WHERE d.id = %(id)s AND d.ordering_key IS NOT NULL
ORDER BY o.id LIMIT %(limit)s;

-- name: unkeyed_deliveries
-- Pending deliveries of functions ordered by a computed key whose key is not computed yet
-- (''), oldest first, with their events.
SELECT d.id, d.function, d.attempt, e.id, e.type, e.source, e.time, e.data, e.size
FROM oncefire_deliveries d
JOIN oncefire_events e ON e.id = d.event_id
WHERE d.function = ANY(%(functions)s::text[]) AND d.ordering_key = '' AND d.state = 'pending'
    AND d.state IN ('pending', 'running') AND d.ordering_key IS NOT NULL
ORDER BY d.id LIMIT %(limit)s;

-- name: set_ordering_key
-- The key a worker computed; a delivery keyed meanwhile (by another worker) stays as it is.
UPDATE oncefire_deliveries SET ordering_key = %(key)s WHERE id = %(id)s AND ordering_key = '';

-- name: bury_unkeyed
-- A delivery whose key cannot be computed becomes a dead letter; a replay keys it again.
UPDATE oncefire_deliveries SET state = 'dead', error = %(error)s, dead_at = %(now)s
WHERE id = %(id)s AND state = 'pending' AND ordering_key = '';

-- name: take_expired_leases
-- Rescue: re-lease deliveries whose lease ran out to the rescuer, skipping rows another
-- rescuer is taking (SKIP LOCKED), so each is rescued by one worker. The worker column keeps
-- the worker that died: the crashed attempt is its.
WITH expired AS (
    SELECT id FROM oncefire_deliveries
    WHERE state = 'running' AND lease_until <= %(now)s
        AND function = ANY(%(functions)s::text[])
    ORDER BY id LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), taken AS (
    UPDATE oncefire_deliveries d SET lease_token = %(token)s, lease_until = %(lease_until)s
    FROM expired WHERE d.id = expired.id AND d.state = 'running'
    RETURNING d.id, d.lease_token, d.function, d.attempt, d.started_at, d.event_id, d.ahead
)
SELECT t.id, t.lease_token, t.function, t.attempt, t.started_at, e.id, e.type, e.source,
    e.time, e.data, e.size, e.root_id, e.depth, t.ahead
FROM taken t JOIN oncefire_events e ON e.id = t.event_id
ORDER BY t.id;

-- name: database_time
-- The database's clock, for lease times judged by one clock for the whole cluster.
SELECT extract(epoch FROM clock_timestamp())::double precision;
