"""Contract tests of the read side (stores/reads/): dead letters, stats, cost, audits."""
