"""`kt tui`: a live cluster dashboard in Textual, fed by kt's client library."""
