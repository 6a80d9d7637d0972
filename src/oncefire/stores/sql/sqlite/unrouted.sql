-- The unrouted events by origin, and the awaited sources whose unrouted events are warned
-- about (stores/catalogue/awaited.py, oncefire/operations/unrouted.py).

-- name: unrouted_origins
-- Events no function has taken yet, counted by kind (the type's first part) and origin: a
-- document's collection (its path without the last segment), a row's table, else the source
-- (a topic). The partial routing index finds them.
SELECT substr(type, 1, instr(type || '.', '.') - 1) AS kind,
    CASE WHEN type LIKE 'document.%' THEN rtrim(rtrim(source, replace(source, '/', '')), '/')
        WHEN type LIKE 'row.%' AND instr(source, '/') > 0
            THEN substr(source, 1, instr(source, '/') - 1)
        ELSE source END AS origin,
    count(*) AS events
FROM oncefire_events
WHERE routing = 'unrouted'
GROUP BY 1, 2
ORDER BY events DESC, origin;

-- name: awaited_sources
SELECT kind, source, reason, name FROM oncefire_awaited_sources ORDER BY kind, source;

-- name: await_source
INSERT INTO oncefire_awaited_sources (kind, source, reason, name, since)
VALUES (:kind, :source, :reason, :name, :since)
ON CONFLICT (kind, source) DO NOTHING;

-- name: ignore_source
DELETE FROM oncefire_awaited_sources WHERE kind = :kind AND source = :source RETURNING kind;
