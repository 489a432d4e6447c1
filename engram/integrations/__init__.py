"""The harness integrations: what `engram setup claude|codex` writes into an agent's settings
(the MCP server and the capture hooks, by the absolute path of the engram that ran it, and
`setup --remove`, `setup`), and what those hooks run (`hook`: it starts
`engram ingest` in the background, which a running language server may carry out).

May import the store and the standard library; never the command line or the queries."""
