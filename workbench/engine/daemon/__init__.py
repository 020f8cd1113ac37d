"""The warm daemon (`--replay` through a per-user background process): server, client, paths, wire."""
