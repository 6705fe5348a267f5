"""The TUI's screens: overview, topics, groups, log directories, messages, help,
and the dialogs behind every action."""
