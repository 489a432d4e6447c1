"""Sharing through git: a store's tapes, objects, team memories and purges travel as git objects
under `refs/engram/` of the repository's own remote, merge-free, and each clone extends its own
index from them (docs/sharing.md).

`git` runs the plumbing (never a branch, the index or the working tree); `layout` says which refs
and trees hold what; `choose` decides what may leave this clone (settings, private marks, memory
scope, redaction); `push` and `pull` move it, objects first and refs last, unioning with whatever
other clones pushed.

May import the store, tapes, the index, capture (redaction, removal) and the memories; never the
command line, the queries or the protocol servers."""
