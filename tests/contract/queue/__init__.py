"""Contract tests of the delivery queue (stores/queue/), on every store."""
