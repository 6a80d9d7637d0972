-- The unrouted events by origin, and the awaited sources whose unrouted events are warned
-- about (stores/catalogue/awaited.py, oncefire/operations/unrouted.py).

-- name: unrouted_origins
-- Events no function has taken yet, counted by kind (the type's first part) and origin: a
-- document's collection (its path without the last segment), a row's table, else the source
-- (a topic). The partial routing index finds them.
SELECT split_part(type, '.', 1) AS kind,
    CASE WHEN type LIKE 'document.%%' THEN regexp_replace(source, '/[^/]*$', '')
        WHEN type LIKE 'row.%%' THEN split_part(source, '/', 1)
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
VALUES (%(kind)s, %(source)s, %(reason)s, %(name)s, %(since)s)
ON CONFLICT (kind, source) DO NOTHING;

-- name: ignore_source
DELETE FROM oncefire_awaited_sources WHERE kind = %(kind)s AND source = %(source)s
RETURNING kind;
