"""The workbench TUI (Textual): `workbench.screens.app.run(session_path, options)`.

Importing this package imports nothing heavy; the app module itself imports no torch.
"""
