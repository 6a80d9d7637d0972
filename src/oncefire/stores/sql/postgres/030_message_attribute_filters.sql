-- oncefire schema 30: a message function's attribute filter, a JSON object of attribute
-- names to values (NULL: none). A message starts the function only if it carries each one
-- with that value (oncefire.model.outbox); the custom events and storage events of
-- oncefire.firebase are routed by it.
ALTER TABLE oncefire_functions ADD COLUMN attributes text;
