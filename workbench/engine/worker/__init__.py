"""The worker process: its start, serving jobs, running one row, state between rows, build caches."""
