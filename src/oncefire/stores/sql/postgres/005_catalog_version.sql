-- oncefire schema 5: a catalogue version, bumped by every function registration and index
-- declaration. A store keeps the functions and index fields it read between transactions
-- and checks this one number (read in the round trip that reads a write's document)
-- instead of reading the whole catalogue again on every write.
CREATE TABLE oncefire_catalog (version bigint NOT NULL);
INSERT INTO oncefire_catalog (version) VALUES (1);
