"""The wire-protocol core: a sans-IO codec driven by schema data, and a client library."""
