-- oncefire schema 6: documents are found by (collection, path) through one index, instead of
-- by path through one index and by collection through another, so a document write updates
-- two b-trees instead of three (a path names its collection, so every lookup can give it).
-- PostgreSQL's schema 6 serves the same write path (one statement a document write).
CREATE TABLE oncefire_documents_new (
    path TEXT NOT NULL,
    collection TEXT NOT NULL,
    data TEXT NOT NULL,
    create_time REAL NOT NULL,
    update_time REAL NOT NULL
);
INSERT INTO oncefire_documents_new (path, collection, data, create_time, update_time)
    SELECT path, collection, data, create_time, update_time FROM oncefire_documents
    ORDER BY collection, path;
DROP TABLE oncefire_documents;
ALTER TABLE oncefire_documents_new RENAME TO oncefire_documents;
CREATE UNIQUE INDEX oncefire_documents_key ON oncefire_documents (collection, path);
