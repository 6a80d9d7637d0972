"""Contract tests of the read side (stores/read_side.py): dead letters, stats, cost, audits."""
