"""Contract tests of the idempotency records (stores/records/): @idempotent and tx.claim."""
