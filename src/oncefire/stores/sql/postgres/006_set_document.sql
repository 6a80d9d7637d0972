-- oncefire schema 6: a document write in one statement, so that db.document(path).set(data)
-- outside a transaction costs one round trip, as a plain INSERT does, instead of two.
--
-- The function does what a write transaction does (documents.Transaction.set), in the same
-- order and under the same locks: the key's advisory lock, the row lock, then the catalogue
-- version (after the row lock, which orders it against index declarations); it answers
-- 'stale' (and writes nothing) when the caller's catalogue is not the store's, or when the
-- current row predates data_size: the caller then writes through a transaction.
--
-- data_size is the byte length of the compact JSON of a document's data, as oncefire's codec
-- writes it, so that an event's size can be counted as the codec would count it.
ALTER TABLE oncefire_documents ADD COLUMN data_size bigint;

-- A float8 as Python's repr writes it in JSON: the shortest exact digits (with
-- extra_float_digits = 1, which oncefire_set_document sets), integral values with ".0".
-- No SET clause here, so that it is inlined.
CREATE OR REPLACE FUNCTION oncefire_json_float(x double precision) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN t ~ '^-?[0-9]+$' THEN t || '.0' ELSE t END FROM (SELECT x::text AS t) AS s
$$;

-- apply: set_document
