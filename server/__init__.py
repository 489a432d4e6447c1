"""Protocol adapters over the engram core: the language server and the MCP endpoint.

Installed as the package `engram_server` (never a top-level `server`). Nothing here writes to
stdout except the protocol itself.
"""
