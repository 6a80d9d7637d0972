-- oncefire schema 21: a statement that makes many dead letters at once may keep the dead-letter
-- counter itself, with one upsert, and turn the row trigger off for its transaction
-- (oncefire.dead_counts = 'by_statement', set local). A row trigger's upserts of one counter
-- row in one transaction each make a new version of the row that the next one walks past:
-- quadratic (40,000 dead letters in one statement took 9.4 s, 100,000 about a minute, with the
-- store's locks held), where one upsert a statement is linear.
DROP TRIGGER oncefire_dead_counts_changed ON oncefire_deliveries;
CREATE TRIGGER oncefire_dead_counts_changed AFTER UPDATE OF state ON oncefire_deliveries
FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state
    AND (OLD.state = 'dead' OR NEW.state = 'dead')
    AND current_setting('oncefire.dead_counts', true) IS DISTINCT FROM 'by_statement')
EXECUTE FUNCTION oncefire_count_dead();
