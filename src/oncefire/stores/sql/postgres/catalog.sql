-- The catalogue: registered functions and declared index fields, with its version.

-- name: catalog_version
SELECT version FROM oncefire_catalog;

-- name: bump_catalog
-- Every store's next transaction reads the catalogue again.
UPDATE oncefire_catalog SET version = version + 1;

-- name: catalog
-- One statement, so the version and what it labels come from one snapshot.
SELECT c.version, f.rows, i.rows FROM oncefire_catalog c,
    (SELECT coalesce(json_agg(json_build_array(name, kind, source, event_types,
        registered_at, fields, attributes) ORDER BY position), '[]')
        FROM oncefire_functions) AS f (rows),
    (SELECT coalesce(json_agg(json_build_array(collection, field, building)), '[]')
        FROM oncefire_index_fields) AS i (rows);

-- name: upsert_function
-- A name new to the store (needs_routing = 1) is offered the unrouted events by a worker.
INSERT INTO oncefire_functions (name, kind, source, event_types, registered_at, fields,
    attributes, needs_routing)
VALUES (%(name)s, %(kind)s, %(source)s, %(event_types)s, %(registered_at)s, %(fields)s,
    %(attributes)s, 1)
ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, source = excluded.source,
    event_types = excluded.event_types, fields = excluded.fields,
    attributes = excluded.attributes;

-- name: lock_documents_for_index
-- EXCLUSIVE mode waits for document writes in flight (from their first row lock: that is
-- when they check the catalogue) and holds off new ones until the index is complete, so no
-- write slips between the read and the declaration.
LOCK TABLE oncefire_documents IN EXCLUSIVE MODE;

-- name: order_function
-- From now on the function's new deliveries carry an ordering key: their event's source
-- (keyed_by 'document') or '' until a worker computes it (keyed_by 'key').
INSERT INTO oncefire_ordering (function, keyed_by) VALUES (%(function)s, %(keyed_by)s)
ON CONFLICT (function) DO UPDATE SET keyed_by = excluded.keyed_by;

-- name: unorder_function
DELETE FROM oncefire_ordering WHERE function = %(function)s;

-- name: unkey_function
-- A function no longer ordered by a computed key: its deliveries still waiting for a key take
-- their event's source (ordered by document now) or none, so none waits forever.
UPDATE oncefire_deliveries SET ordering_key = CASE WHEN %(keyed_by)s::text = 'document'
    THEN (SELECT source FROM oncefire_events WHERE id = oncefire_deliveries.event_id) END
WHERE function = %(function)s AND ordering_key = '' AND state IN ('pending', 'running')
    AND ordering_key IS NOT NULL;

-- name: declare_index_field
-- Writes keep a building field's entries at once; queries use it once it is complete.
INSERT INTO oncefire_index_fields (collection, field, building)
VALUES (%(collection)s, %(field)s, true)
ON CONFLICT DO NOTHING;

-- name: complete_index_field
UPDATE oncefire_index_fields SET building = false
WHERE collection = %(collection)s AND field = %(field)s;

-- name: clear_index_entries_of
-- A chunk's documents are indexed anew: their entries of this field go first.
DELETE FROM oncefire_index_entries
WHERE collection = %(collection)s AND field = %(field)s AND path = ANY(%(paths)s::text[]);

-- name: clear_index_field
DELETE FROM oncefire_index_entries WHERE collection = %(collection)s AND field = %(field)s;

-- name: index_field_declared
-- The field is declared and built (building: the declaration was cut off, or runs now).
SELECT building FROM oncefire_index_fields
WHERE collection = %(collection)s AND field = %(field)s;
