-- oncefire schema 28: which unrouted events are warned about (oncefire/operations/unrouted.py).
-- An event no function takes is still kept for unrouted_retention and offered to the first
-- function registered later that takes it; the dashboard, the metric and the audit warn only
-- about those of an awaited source: a topic, collection or table some function took (written
-- when a function is registered or forgotten) or that an operator named (reason 'kept').
-- kind: 'document' (source: the document pattern, wildcard names left out, like
-- 'users/{}/orders/{}'), 'message' (the topic) or 'row' (the table).
CREATE TABLE oncefire_awaited_sources (
    kind text NOT NULL,
    source text NOT NULL,
    reason text NOT NULL,           -- 'function' or 'kept'
    name text,                      -- the function that took it (reason 'function')
    since double precision NOT NULL,
    PRIMARY KEY (kind, source)
);
-- An HTTP request has its one delivery: it was never unrouted (until now marked so).
UPDATE oncefire_events SET routing = NULL WHERE routing = 'unrouted' AND type = 'http.request';
