"""Command implementations: thin layers that parse arguments, call the cores and render."""
