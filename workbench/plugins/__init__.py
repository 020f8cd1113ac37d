"""Plugins: manifests (declarations without torch), plugin source files, what each registered, code digests."""
