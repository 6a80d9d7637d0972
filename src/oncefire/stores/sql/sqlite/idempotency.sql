-- @idempotent records and tx.claim keys: each operation is one statement.

-- name: insert_record
-- Replaces a record whose expiry has passed; changes nothing while a live one exists.
INSERT INTO oncefire_idempotency (key, function, status, token, payload_hash, lease_until,
    expires_at, result)
VALUES (:key, :function, :status, :token, :payload_hash, :lease_until, :expires_at,
    :result_json)
ON CONFLICT (key) DO UPDATE SET function = excluded.function, status = excluded.status,
    token = excluded.token, payload_hash = excluded.payload_hash,
    lease_until = excluded.lease_until, expires_at = excluded.expires_at,
    result = excluded.result
WHERE oncefire_idempotency.expires_at <= :now;

-- name: insert_records
-- insert_record for many keys at once (a worker's turn acquires those of the deliveries it
-- leases): a JSON array of records, each key once; the keys inserted or replaced. (A SELECT
-- before ON CONFLICT needs its WHERE.)
INSERT INTO oncefire_idempotency (key, function, status, token, payload_hash, lease_until,
    expires_at, result)
SELECT value ->> 'key', value ->> 'function', value ->> 'status', value ->> 'token',
    value ->> 'payload_hash', value ->> 'lease_until', value ->> 'expires_at',
    value ->> 'result_json'
FROM json_each(:records) WHERE true
ON CONFLICT (key) DO UPDATE SET function = excluded.function, status = excluded.status,
    token = excluded.token, payload_hash = excluded.payload_hash,
    lease_until = excluded.lease_until, expires_at = excluded.expires_at,
    result = excluded.result
WHERE oncefire_idempotency.expires_at <= :now
RETURNING key;

-- name: get_record
SELECT key, function, status, token, payload_hash, lease_until, expires_at, result
FROM oncefire_idempotency WHERE key = :key;

-- name: take_over_record
UPDATE oncefire_idempotency SET function = :function, status = :status, token = :token,
    payload_hash = :payload_hash, lease_until = :lease_until, expires_at = :expires_at,
    result = :result_json
WHERE key = :key AND token = :stale_token AND status = 'in_progress'
    AND lease_until <= :lease_ended_by;

-- name: complete_records
-- Many records at once (a worker's turn completes those its attempts made): a JSON array of
-- {key, token, completed_at, expires_at, result_json}; each only if its token still holds it.
UPDATE oncefire_idempotency SET status = 'completed', lease_until = c.completed_at,
    expires_at = c.expires_at, result = c.result_json
FROM (SELECT value ->> 'key' AS key, value ->> 'token' AS token,
        value ->> 'completed_at' AS completed_at, value ->> 'expires_at' AS expires_at,
        value ->> 'result_json' AS result_json
    FROM json_each(:completions)) AS c
WHERE oncefire_idempotency.key = c.key AND oncefire_idempotency.token = c.token
RETURNING oncefire_idempotency.key;

-- name: release_record
DELETE FROM oncefire_idempotency WHERE key = :key AND token = :token
    AND status = 'in_progress';

-- name: release_records
-- Many in-progress records, each by its key and the start of its token (a whole token, or
-- "<delivery id>.<attempt>." for what a worker acquired with a lease): a JSON array of
-- {key, token}; how many were deleted.
DELETE FROM oncefire_idempotency WHERE key IN (
    SELECT r.key FROM json_each(:held) AS h
    JOIN oncefire_idempotency AS r ON r.key = h.value ->> 'key'
    WHERE r.status = 'in_progress'
        AND substr(r.token, 1, length(h.value ->> 'token')) = h.value ->> 'token');

-- name: purge_claims
DELETE FROM oncefire_claims WHERE key IN (SELECT key FROM oncefire_claims
    WHERE expires_at <= :now LIMIT :limit);

-- name: purge_records
DELETE FROM oncefire_idempotency WHERE key IN (SELECT key FROM oncefire_idempotency
    WHERE expires_at <= :now AND lease_until <= :now LIMIT :limit);
