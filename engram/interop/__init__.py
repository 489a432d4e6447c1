"""Interop: what other provenance tools keep, read as Engram evidence, and Engram's evidence
written in their formats.

`agent_trace` writes and reads Agent Trace records (cursor/agent-trace, v0.1.0 RFC): file →
conversation → line ranges, with Engram's winnowed fingerprints beside each range's content hash
so that a reformatted range is still found. `gitai` reads git-ai authorship notes
(`refs/notes/ai`, `authorship/3.0.0`) and `entire` the transcripts Entire commits to its
checkpoint branch (`entire/checkpoints/v1`); `sources` runs both from `engram ingest` when the
repository has them. `git` runs git, read-only; `tapes` turns attributions into tapes.

Nothing here invents text: a line range becomes a `code.edit` only with the text that git or the
working tree holds for it; a range whose text cannot be had is kept as a `span.link` that says
what is missing, and is never matched by its line numbers alone.

May import the store, tapes, anchors, adapters, the index, capture and the queries; never the
command line or the protocol servers."""
