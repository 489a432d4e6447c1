"""The language server (`engram lsp`), one module per feature.

What each module owns:

- `server`: `EngramLanguageServer`, the state every feature shares (settings, open documents,
  stores, background tasks, the one index worker thread and its connections) and the plumbing
  over it (`off_loop`, `conn`, `store_for`, `any_store`). It registers no handler.
- `regions`: the live evidence regions of open documents (computed off the loop, debounced,
  dropped when the document moved on), the brief explain of one, and `index_changed`. Shared by
  the features; registers no handler.
- `notes`: the memories anchored in open documents (resolved against the unsaved text off the
  loop, kept per version) and their drift diagnostics. Shared like `regions`; registers no handler.
- `lifecycle`: `initialize`, `initialized`, `workspace/didChangeConfiguration`, `shutdown`; runs
  the hooks features add to `ls.on_initialized` / `ls.on_shutdown`.
- `sync`: document sync (open, change, save, close) and the editor tape's saves.
- `lenses`: code lenses and their resolution.
- `hover`: hovers over notes and evidence regions.
- `actions`: code actions (remember a note for the selection; re-anchor or forget a drifted one).
- `commands`: the `engram.*` workspace/executeCommand handlers (notes' among them).
- `endpoint`: start-up and shutdown of the MCP/HTTP endpoint in this process, and what it asks
  of the server (refresh after a handed-over ingest, merge segments when idle).
- `heap`: freezes the long-lived heap after start-up (and when it grew), so that the garbage
  collector's full passes stop pausing requests.
- `startup`: `create_server` (which features, in which order) and `main` (arguments, logging,
  transport).

Each feature module has `register(server)`, called by `startup.create_server`. A new feature is
a new module with its own `register`, added to
`startup.FEATURES`; one that has work at start-up or shutdown adds a lifecycle hook there.

What each may import: a feature module imports `server`, `regions`, `notes`, the shared adapters of
`engram_server` (`convert`, `documents`, `settings`), `engram.*`, pygls and lsprotocol, and never
another feature module or `startup`. `regions` and `notes` import only `server` of this package; `server`
none of it. Only `startup` imports the feature modules. The MCP modules (`engram_server.mcp_*`)
are loaded only by `endpoint`, off the event loop, once the client is initialised.
"""

from .startup import main

__all__ = ["main"]
