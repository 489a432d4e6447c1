"""Capture: turning agents' session files into tapes, and indexing them as they are written.

`discovery` finds a repository's sessions (Claude Code, Codex, Gemini CLI, Qwen Code, OpenCode)
and tells a file's format; `pipeline` runs the adapters, redacts, writes the new part of each
session as a tape and hands it to the indexer (serially or in worker processes); `stats` is what
one run did; `record` captures a command or a transcript on stdin; `watch` follows live sessions;
`redact` removes secrets before anything is stored; `editor_tape` records what the editor did.

May import the store, tapes, adapters, anchors and the index; never the command line, the
queries or the protocol servers."""
