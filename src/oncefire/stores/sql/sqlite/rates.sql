-- Rate limits: one token bucket per rate-limited function, shared by every worker. Leases
-- read and spend it inside their BEGIN IMMEDIATE transaction, which no other lease interleaves.

-- name: rate_buckets
SELECT function, tokens, refilled_at FROM oncefire_rate_buckets WHERE function IN (:functions);

-- name: spend_tokens
INSERT INTO oncefire_rate_buckets (function, tokens, refilled_at)
VALUES (:function, :tokens, :now)
ON CONFLICT (function) DO UPDATE SET tokens = excluded.tokens,
    refilled_at = excluded.refilled_at;
