"""Idempotency records: the @idempotent record of a key and the keys of tx.claim.
contract.py is the protocol; sql.py implements it on both databases."""
