-- oncefire schema 18: table triggers write their events into oncefire_row_changes, a table
-- with no index but its rowid, and the workers move them into oncefire_events
-- (keeper.route_new). A trigger's insert then touches no other index: the outbox's key and
-- routing index are written outside the application's transaction (docs/tables.md, "Cost").
-- ms: the database's clock when the change was captured (a trigger has no other); n: the
-- connection's total_changes() then, from which the event id is made with ms.
CREATE TABLE oncefire_row_changes (
    seq INTEGER PRIMARY KEY,
    ms INTEGER NOT NULL,
    n INTEGER NOT NULL,
    type TEXT NOT NULL,
    source TEXT NOT NULL,
    data TEXT NOT NULL
);

-- The triggers made before this version write into oncefire_events, which still works; an
-- empty shape has `oncefire migrate` (or app.watch_tables()) make them again.
UPDATE oncefire_watched_tables SET shape = '';
