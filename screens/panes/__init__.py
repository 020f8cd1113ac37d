"""The result panes of the TUI (Timing, Profile, PTX, Traffic, Log, Diagnosis) and the modules
only they use (charts, kernel names, the PTX views)."""
