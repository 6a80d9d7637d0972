"""Contract tests of documents and their transaction (stores/documents/), on every store."""
