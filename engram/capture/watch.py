"""`engram ingest --watch`: follow live session files and capture what they append.

Polls (portable, no extra dependency): every interval, sessions whose files changed size or
mtime since the last pass are ingested again — which, by design, only captures the new bytes.
"""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any, Callable
from pathlib import Path

from engram.capture.discovery import Job, discover, jobs_from_paths
from engram.capture.pipeline import ingest
from engram.capture.stats import IngestStats
from engram.store.repo import Store

log = logging.getLogger(__name__)


def _signature(job: Job) -> tuple[tuple[str, int, int], ...]:
    """Size and mtime of the job's files (for Claude Code, the subagent files listed with it on
    this pass); a file gone since it was listed is left out, as the next pass would."""
    sig = []
    for src in job.sources:
        try:
            st = src.path.stat()
            sig.append((str(src.path), st.st_size, st.st_mtime_ns))
        except FileNotFoundError:
            continue
    return tuple(sig)


def _present(paths: list[Path], gone: set[Path]) -> list[Path]:
    """The paths there now. One that went away (a file replaced by an editor's save, a transcript
    moved) is watched for until it is back, said once each way: it ended the watch with 'no such
    file' (the first ingest, before the watch, still refuses a path that is not there)."""
    present = []
    for p in paths:
        if p.exists():
            present.append(p)
            if p in gone:
                gone.discard(p)
                print(f"{p} is back", flush=True)
        elif p not in gone:
            gone.add(p)
            print(f"{p} is gone; watching for it to come back", flush=True)
    return present


def watch(store: Store, args: argparse.Namespace, maps: list[tuple[str, str]], interval: float = 2.0, *,
          indexer_for: Callable[[Store], Any] = lambda store: None) -> int:
    """Capture changed sessions every `interval` seconds until interrupted; `indexer_for(store)`
    gives what indexes each new tape (the command line's, so a benchmark can turn it off)."""
    seen: dict[Path, tuple] = {}
    gone: set[Path] = set()
    print("watching for session changes (Ctrl-C to stop)", flush=True)
    try:
        while True:
            stats = IngestStats()
            if args.paths:
                jobs = jobs_from_paths(_present([Path(p) for p in args.paths], gone), stats)
            else:
                jobs = discover(store.root, Path(args.claude) if args.claude else None,
                                Path(args.codex) if args.codex else None, stats, maps=maps)
            changed = []
            for job in jobs:
                sig = _signature(job)
                if seen.get(job.main) != sig:
                    seen[job.main] = sig
                    changed.append(job)
            if changed:
                ingest(store, changed, maps=maps, stats=stats, after_tape=indexer_for(store))
                if stats.tapes:
                    print(stats.summary(), flush=True)
            time.sleep(interval)
    except KeyboardInterrupt:
        return 0
