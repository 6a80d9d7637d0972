"""Documents and their transaction (DocumentTx): reads, writes, indexes and TTL paths, and
the outbox events a write appends. contract.py is the protocol."""
