-- oncefire schema 26: a write wakes the workers only while one of them sleeps.
--
-- PostgreSQL holds a database-wide lock from the commit of a transaction that sent a NOTIFY to
-- its end, WAL flush included: notifying transactions commit one at a time, where others share
-- their flushes. At 8 clients a document write that notified ran at 4,100 a second, 6,900
-- without (bench/pg_server_write.sh --clients 8, docs/scaling.md). Busy workers need no
-- notification (they look for work again after each batch), so a write now notifies only
-- while some worker is registered as sleeping (oncefire_sleepers; postgres/listener.py).
--
-- No wake-up is lost: a worker registers only while it holds the exclusive form of the
-- advisory lock that every waking statement takes in its shared form until it commits. So
-- the statements that looked for sleepers before have committed, and the worker's look for
-- work after it sees what they added; a statement that looks after it finds the worker.

-- A sleeping worker, by the server process of its LISTEN connection. Unlogged: it is a
-- hint about live connections, which a server restart ends anyway.
CREATE UNLOGGED TABLE oncefire_sleepers (
    pid integer PRIMARY KEY,
    since double precision NOT NULL
);

-- What every statement that makes work due calls in place of pg_notify.
CREATE OR REPLACE FUNCTION oncefire_wake(p_channel text, p_payload text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtext('oncefire'), hashtext('oncefire_sleepers'));
    IF EXISTS (SELECT FROM oncefire_sleepers) THEN
        PERFORM pg_notify(p_channel, p_payload);
    END IF;
END
$$;

-- The one-statement document write wakes through oncefire_wake (functions/set_document.sql).
-- apply: set_document
