-- Rate limits: one token bucket per rate-limited function, shared by every worker. A lease
-- locks the buckets it spends from (FOR UPDATE, in name order) until it commits.

-- name: rate_buckets
SELECT function, tokens, refilled_at FROM oncefire_rate_buckets
WHERE function = ANY(%(functions)s::text[]);

-- name: ensure_rate_buckets
-- A new bucket starts full; a row is needed before it can be locked.
INSERT INTO oncefire_rate_buckets (function, tokens, refilled_at)
SELECT f.name, f.tokens, %(now)s FROM unnest(%(functions)s::text[], %(tokens)s::float8[])
    AS f (name, tokens)
ON CONFLICT (function) DO NOTHING;

-- name: lock_rate_buckets
SELECT function, tokens, refilled_at FROM oncefire_rate_buckets
WHERE function = ANY(%(functions)s::text[]) ORDER BY function FOR UPDATE;

-- name: spend_tokens
INSERT INTO oncefire_rate_buckets (function, tokens, refilled_at)
VALUES (%(function)s, %(tokens)s, %(now)s)
ON CONFLICT (function) DO UPDATE SET tokens = excluded.tokens,
    refilled_at = excluded.refilled_at;
