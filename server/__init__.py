"""Protocol adapters over the engram core: the language server and the MCP endpoint.

Installed as the package `engram_server` (never a top-level `server`). Nothing here writes to
stdout except the protocol itself.

- `lsp/`: the language server, one module per feature (its docstring maps them).
- `mcp_tools`: the MCP tools; `mcp_http` serves them from the language server's process,
  `mcp_stdio` on their own (`engram mcp`).
- `convert` (core results to lsprotocol types), `documents` (live regions kept on the text),
  `settings` (the client's settings): shared by the language server's modules.
- `entry`: the `engram` console script, the core CLI plus `engram lsp` and `engram mcp`.
"""
