"""The command line: `main` parses and dispatches; one module per group of commands —
`capture` (init, ingest, record), `tapes` (tapes, show, gc), `query` (explain, blame, view,
search, index, reindex), `agents` (setup, hook), `memory`
(remember, recall, forget, memory ...), `doctor`, `completion`, `demo`. `output` holds the
output convention (JSON for agents, text for people, `--json`), `style` colour on a terminal.
`running_server` sends a command to the language server running on the repository, when there
is one (its endpoint's run file).

The top layer of `engram/`: it may import every other package; nothing in `engram/` imports
it. Kept empty: the installed `engram`
script imports `running_server` before anything else, and must not pay for more."""
