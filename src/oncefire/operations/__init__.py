"""What a person reads and does: dead letters, the functions catalogue, history."""
