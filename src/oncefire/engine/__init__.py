"""The engine: the worker, its turn, one attempt, rescue and routing of deliveries."""
