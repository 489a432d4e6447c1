"""The harness integrations: what `engram setup claude|codex` writes into an agent's settings
(the MCP server, the capture hooks and the context hooks, by the absolute path of the engram that
ran it; `setup --remove` takes them out), and what those hooks run (`hook`: capture starts
`engram ingest` in the background, which a running language server may carry out; `context`:
before an edit and at session start, the notes the model should see, from `engram.memory.briefs`).

May import the store, the memories and the standard library; never the command line or the
queries."""
