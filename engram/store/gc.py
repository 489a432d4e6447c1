"""`engram gc`: drop objects no tape refers to. Tapes are the source of truth and never removed."""

from __future__ import annotations

import logging

from engram.errors import CorruptTape
from engram.fsutil import names_in, remove_stale_temps, subdirs_in
from engram.store.lock import ingest_lock
from engram.store.repo import Store
from engram.tape.objects import referenced_objects
from engram.tape.reader import TapeReader
from engram.tape.writer import tape_files

log = logging.getLogger(__name__)


def collect(store: Store, *, dry_run: bool = False) -> tuple[int, int]:
    """Returns (objects removed, objects kept). Holds the ingest lock: a tape being written may
    refer to objects it has just stored."""
    with ingest_lock(store):
        used: set[str] = set()
        # tapes set aside by `engram tapes rm` (without --purge) keep their objects: they can come back
        for path in [*tape_files(store.tapes_dir), *tape_files(store.removed_dir)]:
            try:
                with TapeReader(path) as r:
                    for ev in r.events():
                        referenced_objects(ev, used)
            except CorruptTape as exc:  # its objects cannot be known: removing any could lose them
                if path.parent == store.removed_dir:  # (reindex, which the tape's error says to run, never reads these)
                    raise CorruptTape(f"gc removed nothing: {path}, a tape `engram tapes rm` set aside, is damaged "
                                      f"({exc}); it cannot be restored: delete it, then run `engram gc` again") from exc
                raise CorruptTape(f"gc removed nothing: {exc}") from exc
        removed = kept = 0
        for name in sorted(subdirs_in(store.objects_dir)):  # (never a link: see fsutil.names_in)
            sub = store.objects_dir / name
            names = names_in(sub)
            remove_stale_temps(sub, names)
            for obj_name in names:
                obj = sub / obj_name
                if obj_name.startswith(".tmp-"):
                    continue
                digest = sub.name + obj.name
                if digest in used:
                    kept += 1
                    continue
                removed += 1
                if not dry_run:
                    obj.unlink()
        return removed, kept
