#!/usr/bin/env python3
"""The secrets probe, and what loading gitleaks' rule set would change: kinds caught, false
redactions on real transcripts, redaction speed.

    python bench/redaction.py --gitleaks /path/to/gitleaks.toml [--corpus bench/data/c30m] [--mb 30]

1. Probe (`tests/secret_kinds.py`): 50 kinds of secret, each planted in a prompt, a command's
   output, a written file and a stored object, captured by `engram ingest` into a fresh store;
   prints the kinds found afterwards in a tape, an object or the full-text index (target 0).
2. Kinds: each probe kind and 20 vendor formats no built-in rule names, redacted as one string by
   the built-in rules alone and with gitleaks' rules added (its `keywords` prefilter, `entropy`,
   `secretGroup`, global allowlist regexes and stopwords; Go's mid-pattern `(?i)` rewritten as a
   group, `\\z` as `\\Z`).
3. False redactions: every string of the real transcripts under tests/fixtures (and
   `--fixtures DIR`, e.g. /work/shared/fixtures/transcripts) redacted both ways; those sessions
   hold no live secret, so each redaction is a candidate false one (printed by class, with examples).
4. Speed: `Redactor.events` over every record of a generated corpus (bench/gen_sessions.py), as
   capture redacts a tape, MB of JSONL per second of CPU, both ways, against `orjson.loads` of
   the same lines (reference).
"""

from __future__ import annotations

import argparse
import re
import warnings
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import orjson  # noqa: E402
import zstandard  # noqa: E402

from engram.capture.redact import MARK, Redactor, Span, shannon_bits  # noqa: E402
from secret_kinds import kinds, leaks, probe_session, vendor_kinds  # noqa: E402

# ---------------------------------------------------------------- gitleaks' rules in Python's re

_MID_FLAG = re.compile(r"\(\?i\)")


warnings.filterwarnings("ignore", category=FutureWarning)  # gitleaks' `[[…]` classes: fine in re today


def go_to_python(rx: str) -> str:
    """Go RE2 syntax Python's `re` refuses: `(?i)` after the start (case-blind to the end of its
    group) becomes `(?i:…)`; `\\z` becomes `\\Z`."""
    rx = rx.replace(r"\z", r"\Z")
    while True:
        m = next((m for m in _MID_FLAG.finditer(rx) if m.start() > 0), None)
        if m is None:
            return rx
        depth, end = 0, len(rx)
        i = m.end()
        while i < len(rx):
            c = rx[i]
            if c == "\\":
                i += 2
                continue
            if c == "[":
                j = rx.find("]", i + 2)
                i = j + 1 if j > 0 else len(rx)
                continue
            if c == "(":
                depth += 1
            elif c == ")":
                if depth == 0:
                    end = i
                    break
                depth -= 1
            i += 1
        rx = rx[:m.start()] + "(?i:" + rx[m.end():end] + ")" + rx[end:]


class GitleaksRules:
    """gitleaks' rules, compiled once, run where one of a rule's keywords occurs."""

    name = "gitleaks"

    def __init__(self, path: Path) -> None:
        cfg = tomllib.loads(path.read_text())
        self.rules: list[tuple[str, re.Pattern[str], float, int, list[re.Pattern[str]], list[str]]] = []
        self.by_keyword: dict[str, list[int]] = {}
        self.failed: list[str] = []
        glob = cfg.get("allowlist", {})
        self.allow = [re.compile(go_to_python(r)) for r in glob.get("regexes", [])]
        self.stop = [w.lower() for w in glob.get("stopwords", [])]
        for rule in cfg["rules"]:
            if "regex" not in rule:
                continue
            try:
                rx = re.compile(go_to_python(rule["regex"]))
                allows = [re.compile(go_to_python(r)) for a in rule.get("allowlists", []) for r in a.get("regexes", [])]
            except re.error:
                self.failed.append(rule["id"])
                continue
            stops = [w.lower() for a in rule.get("allowlists", []) for w in a.get("stopwords", [])]
            idx = len(self.rules)
            self.rules.append((rule["id"], rx, float(rule.get("entropy", 0)), int(rule.get("secretGroup", 0)),
                               allows, stops))
            for kw in rule.get("keywords", []) or [""]:
                self.by_keyword.setdefault(kw.lower(), []).append(idx)
        words = sorted((k for k in self.by_keyword if k), key=len, reverse=True)
        self.keywords = re.compile("|".join(re.escape(k) for k in words))

    def spans(self, s: str) -> list[Span]:
        low = s.lower()
        found = {m.group(0) for m in self.keywords.finditer(low)}
        if not found and "" not in self.by_keyword:
            return []
        todo = sorted({i for k in found for i in self.by_keyword[k]} | set(self.by_keyword.get("", [])))
        out: list[Span] = []
        for i in todo:
            rid, rx, entropy, group, allows, stops = self.rules[i]
            for m in rx.finditer(s):
                g = group if group and group <= (rx.groups or 0) else (1 if rx.groups else 0)
                a, b = m.span(g)
                if a < 0 or a >= b:
                    continue
                v = s[a:b]
                if MARK in s[max(0, a - 10):b + 1] or (entropy and shannon_bits(v) < entropy):
                    continue
                if any(p.search(v) for p in self.allow) or any(p.search(m.group(0)) for p in allows):
                    continue
                lv = v.lower()
                if any(w in lv for w in self.stop) or any(w in lv for w in stops):
                    continue
                out.append(Span(a, b, f"gitleaks:{rid}"))
        return out


def redactor(gl: GitleaksRules | None) -> Redactor:
    r = Redactor()
    if gl is not None:
        r._extra = [gl]  # noqa: SLF001 - the extra-pattern path: every string, after the built-in rules
    return r


# ---------------------------------------------------------------- the four sections


def probe() -> dict[str, set[str]]:
    planted = kinds(seed=3)
    with tempfile.TemporaryDirectory(prefix="engram-secrets-") as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        engram = [sys.executable, "-m", "engram.cli"]
        subprocess.run([*engram, "init"], cwd=repo, check=True, capture_output=True)
        (repo / ".engram" / "config.toml").write_text("[ingest]\nobject_threshold = 4096\n")
        session = probe_session(Path(tmp) / "sessions", planted)
        subprocess.run([*engram, "ingest", str(session)], cwd=repo, check=True, capture_output=True)
        return leaks(repo / ".engram", planted)


def kinds_caught(gl: GitleaksRules | None) -> tuple[list[str], list[str]]:
    """(probe kinds left in the text, vendor kinds left in the text)."""
    def left(ks: list[tuple[str, str, list[str]]]) -> list[str]:
        out = []
        for kind, text, parts in ks:
            red = redactor(gl).text(text)
            if any(p in red for p in parts):
                out.append(kind)
        return out
    return left(kinds(seed=3)), left(vendor_kinds(seed=3))


def fixture_strings(extra: list[Path]) -> list[str]:
    """Every string of every record of the shipped real transcripts (and of `extra` folders)."""
    files: list[tuple[Path, bytes]] = []
    for base in [ROOT / "tests" / "fixtures", *extra]:
        for p in sorted(base.rglob("*.jsonl*")):
            data = p.read_bytes()
            if p.suffix == ".zst":
                data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
            files.append((p, data))
    out: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    for _, data in files:
        for line in data.splitlines():
            try:
                walk(orjson.loads(line))
            except orjson.JSONDecodeError:
                continue
    return out


def false_redactions(strings: list[str], gl: GitleaksRules | None) -> tuple[Counter[str], dict[str, list[str]]]:
    r = redactor(gl)
    examples: dict[str, list[str]] = {}
    for s in strings:
        before = Counter(r.counts)
        out = r.text(s)
        for cls in (r.counts - before):
            if len(examples.setdefault(cls, [])) < 3:
                i = out.find(f"[REDACTED:{cls}]")
                examples[cls].append(out[max(0, i - 60):i + 40].replace("\n", " "))
    return r.counts, examples


def redact_all(r: Any, records: list[Any]) -> None:
    """Redact `records` as capture redacts a tape's events: all at once where the redactor can
    (`Redactor.events`), else one by one (an older redact.py given to --baseline)."""
    if hasattr(r, "events"):
        r.events(records)
    else:
        for rec in records:
            r.event(rec)


def speed(lines: list[bytes], gl: GitleaksRules | None) -> float:
    """MB of JSONL per CPU second: parse + redact the records, as capture redacts a tape."""
    r = redactor(gl)
    t = time.process_time()
    redact_all(r, [orjson.loads(line) for line in lines])
    return sum(map(len, lines)) / 1e6 / (time.process_time() - t)


def parse_speed(lines: list[bytes]) -> float:
    t = time.process_time()
    for line in lines:
        orjson.loads(line)
    return sum(map(len, lines)) / 1e6 / (time.process_time() - t)


def corpus_lines(corpus: Path, mb: float) -> list[bytes]:
    lines: list[bytes] = []
    total = 0
    for p in sorted(corpus.rglob("*.jsonl")):
        for line in p.read_bytes().splitlines():
            lines.append(line)
            total += len(line)
            if total >= mb * 1e6:
                return lines
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gitleaks", type=Path, help="gitleaks.toml (config/gitleaks.toml of gitleaks/gitleaks)")
    ap.add_argument("--corpus", type=Path, help="a generated corpus (bench/gen_sessions.py) for the speed section")
    ap.add_argument("--mb", type=float, default=20.0, help="MB of the corpus to redact")
    ap.add_argument("--fixtures", type=Path, action="append", default=[], help="more real transcripts")
    ap.add_argument("--baseline", type=Path, help="another redact.py (e.g. of an older commit, `git show "
                    "REV:engram/capture/redact.py`) timed against this one on the corpus, alternating")
    args = ap.parse_args()

    found = probe()
    print(f"probe: {len(kinds())} kinds x 5 places; leaks by kind: "
          + (", ".join(f"{k} in {sorted(v)}" for k, v in sorted(found.items())) or "none"))
    gl = GitleaksRules(args.gitleaks) if args.gitleaks else None
    if gl is not None:
        print(f"gitleaks: {len(gl.rules)} rules compiled, {len(gl.failed)} refused by re: {', '.join(gl.failed)}")
    rows = []
    for label, g in (("built-in", None), ("built-in + gitleaks", gl)):
        if label != "built-in" and g is None:
            continue
        t0 = time.process_time()
        missed, vmissed = kinds_caught(g)
        rows.append((label, missed, vmissed, time.process_time() - t0))
    print(f"\n| rules | probe kinds missed (of {len(kinds())}) | vendor kinds missed (of {len(vendor_kinds())}) |"
          "\n|---|---|---|")
    for label, missed, vmissed, _ in rows:
        print(f"| {label} | {len(missed)} {', '.join(missed)} | {len(vmissed)} {', '.join(vmissed)} |")

    strings = fixture_strings(args.fixtures)
    mb = sum(len(s) for s in strings) / 1e6
    print(f"\nfalse redactions: {len(strings):,} strings, {mb:.1f} MB of real transcripts (no live secret in them)")
    for label, g in (("built-in", None), ("built-in + gitleaks", gl)):
        if label != "built-in" and g is None:
            continue
        counts, examples = false_redactions(strings, g)
        print(f"- {label}: {sum(counts.values())} redactions: {dict(sorted(counts.items()))}")
        for cls, ex in sorted(examples.items()):
            for e in ex:
                print(f"    {cls}: …{e}…")

    if args.corpus:
        lines = corpus_lines(args.corpus, args.mb)
        mbs = sum(map(len, lines)) / 1e6
        print(f"\nspeed: {mbs:.1f} MB of generated JSONL, MB per CPU second (best of 2)")
        print("| what | MB/s |\n|---|---|")
        print(f"| orjson.loads only (reference) | {max(parse_speed(lines) for _ in range(2)):.1f} |")
        print(f"| parse + built-in redaction | {max(speed(lines, None) for _ in range(2)):.1f} |")
        if gl is not None:
            print(f"| parse + built-in + gitleaks | {max(speed(lines, gl) for _ in range(2)):.1f} |")
            t = time.process_time()
            for line in lines:
                gl.keywords.search(line.decode().lower())
            print(f"| gitleaks' keyword prefilter alone, one search per line | {mbs / (time.process_time() - t):.1f} |")
        if args.baseline:
            baseline_rows(lines, args.baseline, args.corpus, args.mb)
    return 0


def capture_events(corpus: Path, mb: float) -> list[list[Any]]:
    """The events capture writes for the corpus's first sessions (about `mb` MB of transcripts):
    the adapters' output, one list per session, as `Redactor.events` gets a tape's."""
    from engram.capture.discovery import jobs_from_paths  # noqa: PLC0415
    from engram.capture.pipeline import parse_job  # noqa: PLC0415
    from engram.capture.stats import IngestStats  # noqa: PLC0415

    tapes: list[list[Any]] = []
    raw = 0
    with tempfile.TemporaryDirectory(prefix="engram-redaction-") as root:
        for job in jobs_from_paths([corpus], IngestStats()):
            tapes.append(parse_job(job, Path(root), [], 32 << 20).events)
            raw += sum(src.path.stat().st_size for src in job.sources)
            if raw >= mb * 1e6:
                break
    return tapes


def baseline_rows(lines: list[bytes], path: Path, corpus: Path, mb: float, runs: int = 4) -> None:
    """Redaction alone (parsed beforehand), this redact.py against `path`, alternating runs: on the
    transcripts' records, and on the events capture writes for the same sessions, tape by tape."""
    import importlib.util  # noqa: PLC0415

    spec = importlib.util.spec_from_file_location("redact_baseline", path)
    assert spec is not None and spec.loader is not None
    base = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(base)
    from engram.capture import redact as current  # noqa: PLC0415

    inputs = {"records": [[orjson.loads(line) for line in lines]], "capture's events": capture_events(corpus, mb)}
    for what, tapes in inputs.items():
        mbs = sum(len(orjson.dumps(ev)) for tape in tapes for ev in tape) / 1e6
        times: dict[str, list[float]] = {"baseline": [], "this": []}
        for _ in range(runs):
            for label, mod in (("baseline", base), ("this", current)):
                r = mod.Redactor()
                t = time.process_time()
                for tape in tapes:
                    redact_all(r, tape)
                times[label].append(mbs / (time.process_time() - t))
        print(f"\nredaction alone of {what} ({mbs:.1f} MB as JSON), {runs} alternating runs, MB per CPU second "
              f"(baseline: {path})")
        for label, v in times.items():
            print(f"| {label} | {' '.join(f'{x:.1f}' for x in v)} | best {max(v):.1f} |")


if __name__ == "__main__":
    sys.exit(main())
