-- oncefire schema 25: the event ids made from row changes follow the order of capture across
-- connections (move_row_changes). moved: the seq of the changes moved before
-- oncefire_row_changes last emptied, added to each change's seq, since SQLite gives the next
-- row of an empty table the rowid 1 again. Column n of oncefire_row_changes, which triggers
-- still fill with total_changes(), is no longer read.
CREATE TABLE oncefire_row_changes_moved (moved INTEGER NOT NULL);
INSERT INTO oncefire_row_changes_moved (moved) VALUES (0);
