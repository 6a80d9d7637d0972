"""Product features over the engine: schedules, TTL, retention, alerts, budgets, cost."""
