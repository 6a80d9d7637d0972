-- Bookkeeping of the numbered migrations (the migrations themselves are 001_... files).

-- name: lock_migrations
-- Concurrent first use: one process migrates, the others wait here and find it done.
SELECT pg_advisory_xact_lock(%(key)s);

-- name: create_schema_table
CREATE TABLE IF NOT EXISTS oncefire_schema (version integer NOT NULL);

-- name: schema_version
SELECT max(version) FROM oncefire_schema;

-- name: write_schema_version
INSERT INTO oncefire_schema (version) VALUES (%(version)s);

-- name: listen
-- The channel every oncefire_wake of these files names.
LISTEN oncefire;

-- The sleeping workers, whom writes notify (oncefire_wake, migration 026).

-- name: register_sleeper
-- A worker registers on its LISTEN connection once it holds the exclusive form of the lock
-- every waking statement holds shared until it commits: the statements that looked for
-- sleepers before have committed by then (their work is visible to the worker's next look),
-- and those that look later find it. Only tried (the caller tries again a while), so that no
-- write ever waits behind a registration; nothing is written without the lock. Also forgets
-- the rows of connections that are gone (a worker that was killed).
WITH locked AS (
    SELECT pg_try_advisory_xact_lock(hashtext('oncefire'), hashtext('oncefire_sleepers')) AS ok
), gone AS (
    DELETE FROM oncefire_sleepers
    WHERE (SELECT ok FROM locked) AND pid NOT IN (SELECT pid FROM pg_stat_activity)
)
INSERT INTO oncefire_sleepers (pid, since)
SELECT pg_backend_pid(), extract(epoch FROM clock_timestamp()) FROM locked WHERE ok
ON CONFLICT (pid) DO UPDATE SET since = excluded.since
RETURNING pid;

-- name: forget_sleeper
-- A worker busy for a while: writes need not wake it.
DELETE FROM oncefire_sleepers WHERE pid = pg_backend_pid();

-- name: backend_pid
SELECT pg_backend_pid();

-- name: begin
BEGIN;

-- name: begin_bounded
-- A transaction of oncefire's own (a lease, a batch, housekeeping): it never waits on user
-- code, so a session idle in it for 5 s belongs to a frozen process (stopped, swapped out,
-- its machine paused). The server then ends that session, and the locks it held (a capped
-- function's, rows of a delivery) no longer stall every other worker; the frozen process
-- finds its connection gone when it resumes, and its transaction was rolled back.
BEGIN; SET LOCAL idle_in_transaction_session_timeout = '5s';

-- name: begin_turn
-- A worker's turn (store.batch(): the attempts that ended, the lease, the marks), bounded as
-- begin_bounded, in one round trip with the settings its statements want:
-- - the plan the session keeps (generic) once psycopg prepares a statement: each has one
--   shape whatever its values, and left to choose, PostgreSQL plans the completion again on
--   every call (its custom plan for one delivery looks cheaper than the generic one for an
--   unknown number), a large share of the server's work when each event is committed alone;
-- - no_bitmap_scans, which the lease wants (deliveries.sql).
BEGIN; SET LOCAL idle_in_transaction_session_timeout = '5s';
SET LOCAL plan_cache_mode = force_generic_plan;
SET LOCAL enable_bitmapscan = off;

-- name: begin_snapshot
-- A read-only transaction that sees one moment of the database.
BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;

-- name: discard_plans
-- Appended to a BEGIN now and then (postgres_pool.PLANS_FOR): the session's prepared
-- statements are planned again at their next run, for the tables as they are by then.
DISCARD PLANS;

-- name: commit
COMMIT;

-- name: rollback
ROLLBACK;
