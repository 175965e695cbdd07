"""A tiny local issue tracker in SQLite: the system under test of the example bench.

`tracker.db` holds the schema, the deterministic seed, the end-state snapshot and the operations;
`bench/bin/tracker` (a CLI) and `bench/tracker_mcp.py` (an MCP server) are two interfaces to them.
"""
