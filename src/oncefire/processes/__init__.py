"""Worker processes: the supervisor `oncefire worker` runs, and each process it starts."""
