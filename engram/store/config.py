"""`.engram/config.toml`: every key has a default, the file only overrides.

Kept as plain nested dicts so a new key needs one line here and nothing else.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

from engram.errors import BadInput

log = logging.getLogger(__name__)

CHOICES: dict[str, tuple[str, ...]] = {"explain.rank": ("writer", "touches", "evidence"),
                                       "share.memory_scope": ("team", "personal")}
DEFAULTS: dict[str, Any] = {
    "ingest": {
        # Lines longer than this are skipped (counted) rather than parsed: a runaway
        # tool output must not take the whole machine's memory.
        "max_line_bytes": 32 * 1024 * 1024,
        # Strings longer than this move out of the tape into .engram/objects/.
        "object_threshold": 256 * 1024,
        # Folders besides the repository and the harnesses' session folders (~/.claude, ~/.codex)
        # that a running language server may ingest transcripts from when the command line hands
        # it `engram ingest PATH` (the command line itself ingests any path it is given).
        "transcript_dirs": [],
    },
    "redact": {
        # Extra patterns: a list of {name = "...", pattern = "..."} tables.
        "patterns": [],
    },
    "explain": {
        "window": {"before": 3, "after": 3},
        "min_confidence": 0.5,
        # How sessions are ordered: "writer" (the sessions that changed the span's lines, latest
        # first, then the others by touches), "touches" (most touches, then the latest; the
        # specification's) or "evidence" (the strongest match first); see engram.query.ranking.
        "rank": "writer",
        # Tokens an answer in JSON may take (engram.query.budget: 4 bytes of compact JSON each);
        # what does not fit is left for `--page 2`. 0: no bound.
        "budget": 4000,
    },
    "hooks": {
        # What the agents' hooks tell the model about the notes (engram.memory.briefs), in tokens
        # of 4 bytes of text: before an edit (the notes on the lines it changes and the file's
        # drifted ones) and at session start (the most important notes). 0: say nothing.
        "edit_budget": 800,
        "session_budget": 1500,
        # An `edited` note counts as drifted below this share of its code retained.
        "drift_below": 0.8,
    },
    "share": {
        # What `engram push` leaves out (docs/sharing.md): sessions of these harnesses, sessions
        # that read or edited a file matching one of these globs (repository-relative, fnmatch),
        # sessions that began more than max_age_days ago (0: any age).
        "exclude_harnesses": [],
        "exclude_paths": [],
        "max_age_days": 0,
        # The scope of a memory written without `--scope`: "team" travels with `engram push`,
        # "personal" never leaves this clone.
        "memory_scope": "team",
    },
    "index": {
        # Fingerprints present in more than this share of tapes are stop-listed: a query skips
        # them unless that leaves less than half of its span (then the least common are kept),
        # which bounds the postings an explain decodes when most sessions read the same code.
        # Measured with bench/scale.py (1 GB): 0.8 left 20 ms warm explains, 0.1 gives ~6 ms with
        # the same recall. Not applied below min_tapes tapes.
        "stoplist_share": 0.1,
        "stoplist_min_tapes": 50,
    },
}


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
    return base


def load_config(path: Path) -> dict[str, Any]:
    """Defaults overlaid with the file at `path` when it exists."""
    cfg = copy.deepcopy(DEFAULTS)
    if path.is_file():
        import tomllib  # noqa: PLC0415 - ~7 ms of start-up; most stores have no config file

        try:
            with path.open("rb") as f:
                raw = tomllib.load(f)
            _merge(cfg, copy.deepcopy(raw))
        except tomllib.TOMLDecodeError as exc:
            raise BadInput(f"{path}: not valid TOML ({exc}); fix or remove the file") from exc
        except UnicodeDecodeError as exc:
            raise BadInput(f"{path}: not UTF-8 text (byte {exc.start} is {exc.object[exc.start]:#04x}); "
                           "fix or remove the file") from exc
        _check(cfg, DEFAULTS, path)
        for name in unknown_settings(raw):
            log.warning("%s: %s is not an engram setting; ignored", path, name)
    return cfg


def unknown_settings(raw: dict[str, Any], defaults: dict[str, Any] = DEFAULTS, prefix: str = "") -> list[str]:
    """The settings (and tables) of a config file's `raw` tables that engram has no default for,
    each with the known one nearest its name: a misspelt `[explian]` or `budgt` changed nothing,
    without a word. Named, not refused: a newer engram's setting must not stop an older one."""
    import difflib  # noqa: PLC0415

    out = []
    for key, value in raw.items():
        name = prefix + key
        if key not in defaults:
            near = difflib.get_close_matches(key, [k for k in defaults], n=1, cutoff=0.6)
            out.append(f"`{name}`" + (f" (did you mean `{prefix}{near[0]}`?)" if near else ""))
        elif isinstance(value, dict) and isinstance(defaults[key], dict):
            out += unknown_settings(value, defaults[key], name + ".")
    return out


#: The largest whole number a setting, an option or a request's budget takes: past 64 bits one
#: reached SQLite as a traceback (cli.argtypes, memory.recall).
LARGEST = 2**31 - 1


def _check(cfg: dict[str, Any], defaults: dict[str, Any], path: Path, prefix: str = "") -> None:
    """Each setting the file overrides has its default's kind: a table stays a table, a whole
    number a whole number of 0 or more, and a fractional one (every one is a share) a number from
    0 to 1. A wrong value would otherwise surface later as a traceback, or as a window shifted
    past the event it should show; keys engram does not know are left alone."""
    for key, default in defaults.items():
        value, name = cfg.get(key), prefix + key
        if isinstance(default, dict):
            if not isinstance(value, dict):
                raise BadInput(f"{path}: [{name}] must be a table of settings, not {value!r}")
            _check(value, default, path, name + ".")
        elif isinstance(default, bool) or isinstance(value, bool):
            if type(value) is not type(default):
                raise BadInput(f"{path}: {name} = {value!r}: expected {type(default).__name__}")
        elif isinstance(default, int):
            if not isinstance(value, int) or value < 0:
                raise BadInput(f"{path}: {name} = {value!r}: must be a whole number, 0 or more")
            if value > LARGEST:
                raise BadInput(f"{path}: {name} = {value!r}: too large (at most {LARGEST:,})")
        elif isinstance(default, float):
            if not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise BadInput(f"{path}: {name} = {value!r}: must be a number from 0 to 1")
        elif isinstance(default, list) and not isinstance(value, list):
            raise BadInput(f"{path}: {name} must be a list, not {value!r}")
        elif name in CHOICES:
            try:
                choice(name, value)
            except BadInput as exc:
                raise BadInput(f"{path}: {exc}") from None


def choice(name: str, value: Any) -> str:
    """`value` if it is one of setting `name`'s CHOICES (from the settings file or a request)."""
    if value not in CHOICES[name]:
        raise BadInput(f"{name} = {value!r}: must be one of {', '.join(map(repr, CHOICES[name]))}")
    return str(value)
