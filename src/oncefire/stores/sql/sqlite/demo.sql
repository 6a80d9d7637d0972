-- The application's own statements in `oncefire demo --tables` (oncefire/demo/tables.py):
-- what an application writing its table with plain SQL would run, on its own connection.

-- name: demo_drop_orders
DROP TABLE IF EXISTS demo_orders;

-- name: demo_create_orders
CREATE TABLE demo_orders (id INTEGER PRIMARY KEY, item TEXT, email TEXT, status TEXT, note TEXT);

-- name: demo_place_orders
INSERT INTO demo_orders VALUES (1, 'coffee beans', 'ada@example.com', 'paid', ''),
    (2, 'grinder', 'bob@example.com', 'paid', '');

-- name: demo_begin
BEGIN;

-- name: demo_place_order_3
INSERT INTO demo_orders VALUES (3, 'kettle', 'cy@example.com', 'paid', '');

-- name: demo_rollback
ROLLBACK;

-- name: demo_note_order_1
UPDATE demo_orders SET note = 'gift wrap' WHERE id = 1;

-- name: demo_ship_orders
UPDATE demo_orders SET status = 'shipped';

-- name: demo_other_document
-- Before `oncefire demo` writes into a store (demo_guard.py): a document outside the demo's
-- collections, if the store holds one.
SELECT path FROM oncefire_documents WHERE collection NOT IN (:own) LIMIT 1;
