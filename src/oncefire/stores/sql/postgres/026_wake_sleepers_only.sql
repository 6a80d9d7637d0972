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

-- The one-statement document write (migrations 006, 008), waking through oncefire_wake.
CREATE OR REPLACE FUNCTION oncefire_set_document(
    p_lock bigint,
    p_path text,
    p_collection text,
    p_data text,               -- the codec's compact JSON of the new data
    p_now double precision,
    p_catalog bigint,          -- the catalogue version the caller's names and fields are of
    p_event_id text,
    p_created_type text,
    p_updated_type text,
    p_created text[],          -- functions a creation starts, in order
    p_updated text[],          -- functions an update starts, in order
    p_fields text[],           -- index entries of the new data; NULL: no declared fields
    p_values text[],
    p_channel text,
    p_notify_most integer      -- more deliveries than this notify with an empty payload
) RETURNS text LANGUAGE plpgsql SET extra_float_digits = 1 AS $$
DECLARE
    old oncefire_documents%ROWTYPE;
    is_update boolean;
    created double precision;
    before text;
    after text;
    size bigint;
    ids bigint[];
BEGIN
    PERFORM pg_advisory_xact_lock(p_lock);
    SELECT * INTO old FROM oncefire_documents WHERE path = p_path FOR UPDATE;
    is_update := FOUND;
    IF (SELECT version FROM oncefire_catalog) <> p_catalog
            OR (is_update AND old.data_size IS NULL) THEN
        RETURN 'stale';
    END IF;
    IF is_update AND old.data::text = p_data::jsonb::text THEN
        RETURN 'unchanged';  -- a no-op write changes nothing and emits no event
    END IF;
    created := CASE WHEN is_update THEN old.create_time ELSE p_now END;
    INSERT INTO oncefire_documents (path, collection, data, create_time, update_time, data_size)
    VALUES (p_path, p_collection, p_data::jsonb, created, p_now, octet_length(p_data))
    ON CONFLICT (path) DO UPDATE SET data = excluded.data, update_time = excluded.update_time,
        data_size = excluded.data_size;
    IF p_fields IS NOT NULL THEN
        DELETE FROM oncefire_index_entries WHERE path = p_path;
        INSERT INTO oncefire_index_entries (collection, field, value, path)
        SELECT p_collection, f, v, p_path FROM unnest(p_fields, p_values) AS x (f, v);
    END IF;
    -- The event's data as the codec writes it: {"before": ..., "after": ...}.
    after := '{"data":' || p_data || ',"create_time":' || oncefire_json_float(created)
        || ',"update_time":' || oncefire_json_float(p_now) || '}';
    IF is_update THEN
        before := '{"data":' || old.data::text || ',"create_time":'
            || oncefire_json_float(old.create_time) || ',"update_time":'
            || oncefire_json_float(old.update_time) || '}';
        size := octet_length(before) - octet_length(old.data::text) + old.data_size;
    ELSE
        before := 'null';
        size := 4;
    END IF;
    size := size + octet_length(after) + length('{"before":,"after":}');
    INSERT INTO oncefire_events (id, type, source, time, data, size, routing)
    VALUES (p_event_id, CASE WHEN is_update THEN p_updated_type ELSE p_created_type END, p_path,
        p_now, ('{"before":' || before || ',"after":' || after || '}')::jsonb, size,
        CASE WHEN coalesce(cardinality(CASE WHEN is_update THEN p_updated ELSE p_created END),
            0) = 0 THEN 'unrouted' END);
    WITH added AS (
        INSERT INTO oncefire_deliveries (event_id, function, state, run_at, created_at)
        SELECT p_event_id, f.name, 'pending', p_now, p_now
        FROM unnest(CASE WHEN is_update THEN p_updated ELSE p_created END) WITH ORDINALITY
            AS f (name, n)
        ORDER BY f.n
        RETURNING id
    )
    SELECT array_agg(id ORDER BY id) INTO ids FROM added;
    IF ids IS NOT NULL THEN
        PERFORM oncefire_wake(p_channel, CASE WHEN cardinality(ids) <= p_notify_most
            THEN array_to_string(ids, ',') ELSE '' END);
    END IF;
    RETURN CASE WHEN is_update THEN 'updated' ELSE 'created' END;
END
$$;
