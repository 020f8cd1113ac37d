"""Watch mode: re-run what each save changed (the cycle, the per-row diff, the file watcher)."""
