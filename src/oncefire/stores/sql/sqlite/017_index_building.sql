-- oncefire schema 17: a declared index field is built in chunks (issue 11 point 14). While
-- building = 1 every write keeps its entries but queries do not use it: the documents that
-- were there before the declaration are still being indexed.
ALTER TABLE oncefire_index_fields ADD COLUMN building INTEGER NOT NULL DEFAULT 0;
