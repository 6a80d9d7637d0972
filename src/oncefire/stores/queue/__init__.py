"""The delivery queue: lease due deliveries, start, renew and end them, hand them back, and
rescue those whose lease ran out. contract.py is the protocol; sql.py, sqlite.py and
postgres.py implement it."""
