"""The store: `.engram/` beside a repository's `.git/` — finding and creating it (`repo`), the
paths inside it (`location`), its settings (`config.toml`, `config`), the ingest lock (`lock`)
and garbage collection of unreferenced objects (`gc`).

A bottom layer: it may import only `engram.errors`, `engram.fsutil`, `engram.tape` (gc reads
tapes) and the standard library. `location` is read by the running-server path of the command
line before anything else is imported, so it imports nothing but `os`."""
