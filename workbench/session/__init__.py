"""Session files: the YAML model, safe loading with line marks, schema, settings, checks, paths, compare runs."""
