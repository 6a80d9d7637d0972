-- @idempotent records and tx.claim keys: each operation is one statement.
-- No lock is taken first: a second INSERT of a key waits on the first one's index entry,
-- and a guarded UPDATE or DELETE meeting a concurrent change re-checks its WHERE on the
-- row as that change left it, so each operation is atomic in READ COMMITTED.

-- name: insert_record
-- Replaces a record whose expiry has passed; changes nothing while a live one exists.
-- Committed on its own (:unflushed), it does not wait for the WAL flush: synchronous_commit
-- is off for this statement's transaction alone, as the set_config it reads makes it. An
-- in-progress record lost in a server crash changes no outcome (docs/idempotency.md), and any
-- later commit that waits flushes it too. In a batch the setting is left as it is.
WITH unflushed AS (SELECT set_config('synchronous_commit',
    CASE WHEN %(unflushed)s THEN 'off' ELSE current_setting('synchronous_commit') END, true))
INSERT INTO oncefire_idempotency (key, function, status, token, payload_hash, lease_until,
    expires_at, result)
SELECT %(key)s, %(function)s, %(status)s, %(token)s, %(payload_hash)s, %(lease_until)s,
    %(expires_at)s, %(result_json)s
FROM unflushed
ON CONFLICT (key) DO UPDATE SET function = excluded.function, status = excluded.status,
    token = excluded.token, payload_hash = excluded.payload_hash,
    lease_until = excluded.lease_until, expires_at = excluded.expires_at,
    result = excluded.result
WHERE oncefire_idempotency.expires_at <= %(now)s;

-- name: insert_records
-- insert_record for many keys at once (a worker's turn acquires those of the deliveries it
-- leases, in the turn's transaction): a JSON array of records, each key once; the keys
-- inserted or replaced.
INSERT INTO oncefire_idempotency (key, function, status, token, payload_hash, lease_until,
    expires_at, result)
SELECT r.key, r.function, r.status, r.token, r.payload_hash, r.lease_until, r.expires_at,
    r.result_json
FROM json_to_recordset(%(records)s::json) AS r (key text, function text, status text,
    token text, payload_hash text, lease_until double precision,
    expires_at double precision, result_json text)
ON CONFLICT (key) DO UPDATE SET function = excluded.function, status = excluded.status,
    token = excluded.token, payload_hash = excluded.payload_hash,
    lease_until = excluded.lease_until, expires_at = excluded.expires_at,
    result = excluded.result
WHERE oncefire_idempotency.expires_at <= %(now)s
RETURNING oncefire_idempotency.key;

-- name: get_record
SELECT key, function, status, token, payload_hash, lease_until, expires_at, result
FROM oncefire_idempotency WHERE key = %(key)s;

-- name: take_over_record
-- Committed on its own, without waiting for the WAL flush, as insert_record.
WITH unflushed AS (SELECT set_config('synchronous_commit',
    CASE WHEN %(unflushed)s THEN 'off' ELSE current_setting('synchronous_commit') END, true))
UPDATE oncefire_idempotency SET function = %(function)s, status = %(status)s, token = %(token)s,
    payload_hash = %(payload_hash)s, lease_until = %(lease_until)s, expires_at = %(expires_at)s,
    result = %(result_json)s
FROM unflushed
WHERE key = %(key)s AND token = %(stale_token)s AND status = 'in_progress'
    AND lease_until <= %(lease_ended_by)s;

-- name: complete_records
-- Many records at once (a worker's turn completes those its attempts made): a JSON array of
-- {key, token, completed_at, expires_at, result_json}; each only if its token still holds it.
UPDATE oncefire_idempotency AS r SET status = 'completed', lease_until = c.completed_at,
    expires_at = c.expires_at, result = c.result_json
FROM json_to_recordset(%(completions)s::json) AS c (key text, token text,
    completed_at double precision, expires_at double precision, result_json text)
WHERE r.key = c.key AND r.token = c.token
RETURNING r.key;

-- name: release_record
DELETE FROM oncefire_idempotency WHERE key = %(key)s AND token = %(token)s
    AND status = 'in_progress';

-- name: release_records
-- Many in-progress records, each by its key and the start of its token (a whole token, or
-- "<delivery id>.<attempt>." for what a worker acquired with a lease): a JSON array of
-- {key, token}; how many were deleted.
DELETE FROM oncefire_idempotency AS r
USING json_to_recordset(%(held)s::json) AS h (key text, token text)
WHERE r.key = h.key AND r.status = 'in_progress' AND starts_with(r.token, h.token);

-- name: purge_claims
DELETE FROM oncefire_claims WHERE key IN (SELECT key FROM oncefire_claims
    WHERE expires_at <= %(now)s LIMIT %(limit)s FOR UPDATE SKIP LOCKED);

-- name: purge_records
DELETE FROM oncefire_idempotency WHERE key IN (SELECT key FROM oncefire_idempotency
    WHERE expires_at <= %(now)s AND lease_until <= %(now)s LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED);
