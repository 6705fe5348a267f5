"""Small widgets and rendering helpers shared by the TUI's screens."""
