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
import bisect
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

from engram.capture.redact import MARK, Redactor, Span, _walk, shannon_bits  # noqa: E402
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
    """gitleaks' rules, compiled once, run where one of a rule's keywords occurs.

    `engine` says what finds the keywords and the rules' matches: "re" (one alternation of the
    keywords, then each rule's regex in Python's `re`), "hyperscan" (the keywords as one literal
    database, the rules' regexes as a second; `re` extracts the secret group where hyperscan says a
    rule matches, and runs alone the rules hyperscan refuses) or "re2" (`re2.Set`s of the keywords
    and of the rules, per-rule re2 for the group). Entropy, secretGroup and allowlists are the same.
    """

    name = "gitleaks"

    def __init__(self, path: Path, engine: str = "re", without: frozenset[str] = frozenset()) -> None:
        cfg = tomllib.loads(path.read_text())
        self.engine = engine
        self.rules: list[tuple[str, Any, float, int, list[re.Pattern[str]], list[str]]] = []
        self.go: list[str] = []  # each kept rule's regex as gitleaks writes it (Go RE2 syntax)
        self.rule_keywords: list[list[str]] = []
        self.by_keyword: dict[str, list[int]] = {}
        self.failed: list[str] = []
        self.refused: list[str] = []  # rules the multi-pattern engine refused (run alone after the prefilter)
        glob = cfg.get("allowlist", {})
        self.allow = [re.compile(go_to_python(r)) for r in glob.get("regexes", [])]
        self.stop = [w.lower() for w in glob.get("stopwords", [])]
        for rule in cfg["rules"]:
            if "regex" not in rule or rule["id"] in without:
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
            self.go.append(rule["regex"])
            kws = [k.lower() for k in rule.get("keywords", []) or [""]]
            self.rule_keywords.append(kws)
            for kw in kws:
                self.by_keyword.setdefault(kw, []).append(idx)
        self.words = sorted((k for k in self.by_keyword if k), key=len, reverse=True)
        self.always = set(self.by_keyword.get("", []))
        self._always = sorted(self.always)
        self.keywords = re.compile("|".join(re.escape(k) for k in self.words))
        self.candidates = self._re_candidates
        self.prepared: dict[str, list[int]] = {}  # hyperscan: a tape's strings with a keyword -> their rules
        self.seen: set[str] = set()  # hyperscan: every string of the tape scanned by `prepare`
        if engine == "hyperscan":
            self._init_hyperscan()
        elif engine == "re2":
            self._init_re2()

    # --- the engines: which rules may match `s` (keyword found, and the engine's match)

    def _re_candidates(self, s: str) -> list[int]:
        found = {m.group(0) for m in self.keywords.finditer(s.lower())}
        if not found:
            return sorted(self.always)
        return sorted({i for k in found for i in self.by_keyword[k]} | self.always)

    def _init_hyperscan(self) -> None:
        import hyperscan  # noqa: PLC0415 - optional: only for --engine hyperscan

        self._hs = hyperscan
        self.kw_db = hyperscan.Database()
        self.kw_db.compile(expressions=[re.escape(k).encode() for k in self.words], ids=list(range(len(self.words))),
                           elements=len(self.words), flags=hyperscan.HS_FLAG_CASELESS | hyperscan.HS_FLAG_SINGLEMATCH)
        self.kw_all = hyperscan.Database()  # every occurrence: one scan of a whole tape's strings
        self.kw_all.compile(expressions=[re.escape(k).encode() for k in self.words], ids=list(range(len(self.words))),
                            elements=len(self.words), flags=hyperscan.HS_FLAG_CASELESS)
        flags = hyperscan.HS_FLAG_SINGLEMATCH
        ok: list[int] = []
        for i, rx in enumerate(self.go):
            try:
                hyperscan.Database().compile(expressions=[rx.encode()], ids=[i], elements=1, flags=flags)
                ok.append(i)
            except hyperscan.error as e:
                self.refused.append(f"{self.rules[i][0]} ({str(e).split(':')[-1].strip()[:40]})")
        self.alone = set(range(len(self.rules))) - set(ok)  # run in `re` after the prefilter
        self.rule_db = hyperscan.Database()
        self.rule_db.compile(expressions=[self.go[i].encode() for i in ok], ids=ok, elements=len(ok), flags=flags)
        self.candidates = self._hs_candidates

    def _hs_candidates(self, s: str) -> list[int]:
        data = s.encode("utf-8", "surrogatepass")
        found: list[int] = []
        self.kw_db.scan(data, match_event_handler=lambda i, a, b, f, c: found.append(i))
        if not found and not self.always:
            return []
        allowed = {r for k in found for r in self.by_keyword[self.words[k]]} | self.always
        hit: list[int] = []
        if allowed - self.alone:
            self.rule_db.scan(data, match_event_handler=lambda i, a, b, f, c: hit.append(i))
        return sorted((allowed & set(hit)) | (allowed & self.alone))

    def prepare(self, strings: list[str]) -> None:
        """hyperscan only: the keywords of all `strings` (a tape's) found in one scan of their
        joined text, then the rules' database run on the strings holding a keyword; `spans` then
        looks its string up instead of scanning it (one hyperscan call per string costs more
        than the scan itself)."""
        if self.engine != "hyperscan":
            return
        uniq = list(dict.fromkeys(strings))
        parts = [u.encode("utf-8", "surrogatepass") for u in uniq]
        starts: list[int] = []
        pos = 0
        for b in parts:
            starts.append(pos)
            pos += len(b) + 1
        ends: list[tuple[int, int]] = []
        self.kw_all.scan(b"\n".join(parts), match_event_handler=lambda i, a, b, f, c: ends.append((b, i)))
        found: dict[int, set[int]] = {}
        for end, k in ends:  # no keyword holds a newline: each lies inside one string
            found.setdefault(bisect.bisect_right(starts, end - 1) - 1, set()).add(k)
        self.prepared = {}
        for n, ks in found.items():
            allowed = {r for k in ks for r in self.by_keyword[self.words[k]]} | self.always
            hit: list[int] = []
            if allowed - self.alone:
                self.rule_db.scan(parts[n], match_event_handler=lambda i, a, b, f, c: hit.append(i))
            cands = sorted((allowed & set(hit)) | (allowed & self.alone))
            if cands:
                self.prepared[uniq[n]] = cands
        self.seen = set(uniq)

    def _init_re2(self) -> None:
        import re2  # noqa: PLC0415 - optional: only for --engine re2

        opts = re2.Options()
        opts.case_sensitive = False
        self.kw_set = re2.Set.SearchSet(opts)
        for k in self.words:
            self.kw_set.Add(re.escape(k))
        self.kw_set.Compile()
        big = re2.Options()
        big.max_mem = 1 << 30  # the default 8 MB is too little for the 221 rules as one Set
        self.rule_set = re2.Set.SearchSet(big)
        ids: list[int] = []
        rules = list(self.rules)
        for i, rx in enumerate(self.go):
            try:
                r2 = re2.compile(rx)
                self.rule_set.Add(rx)
            except Exception as e:  # noqa: BLE001 - re2.error, or a pattern the Set refuses
                self.refused.append(f"{self.rules[i][0]} ({str(e)[:40]})")
                continue
            ids.append(i)
            rules[i] = (rules[i][0], r2, *rules[i][2:])
        self.rules = rules
        self.set_ids = ids  # the Set's n-th pattern is rule ids[n]
        self.alone = set(range(len(self.rules))) - set(ids)
        self.rule_set.Compile()
        self.candidates = self._re2_candidates

    def _re2_candidates(self, s: str) -> list[int]:
        found = self.kw_set.Match(s) or []  # None: no match
        if not found and not self.always:
            return []
        allowed = {r for k in found for r in self.by_keyword[self.words[k]]} | self.always
        hit = {self.set_ids[n] for n in self.rule_set.Match(s) or []} if allowed - self.alone else set()
        return sorted((allowed & hit) | (allowed & self.alone))

    # --- the spans

    def spans(self, s: str) -> list[Span]:
        out: list[Span] = []
        if s in self.seen:
            todo = self.prepared.get(s, self._always)
        else:  # not prepared, or changed by the built-in rules
            todo = self.candidates(s)
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


class NoRule:
    """An extra rule that never matches: what running any extra rule on every string costs."""

    name = "none"

    def spans(self, s: str) -> list[Span]:
        return []


class PreparingRedactor(Redactor):
    """A Redactor whose `events` lets gitleaks' rules scan a whole tape's strings at once first."""

    gl: GitleaksRules | None = None

    def events(self, evs: list[Any]) -> list[Any]:
        if self.gl is not None and self.gl.engine == "hyperscan":
            leaves: list[str] = []
            for ev in evs:
                if isinstance(ev, (dict, list, tuple)):
                    _walk(ev, leaves, [], [])
            self.gl.prepare(leaves)
        return super().events(evs)


def redactor(gl: Any) -> Redactor:
    r = PreparingRedactor()
    if gl is not None:
        r.gl = gl if isinstance(gl, GitleaksRules) else None
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
    ap.add_argument("--engine", default="re", help="what runs gitleaks' rules, one or more of re,hyperscan,re2 "
                    "(comma-separated; hyperscan and re2 are the `hyperscan` and `google-re2` packages)")
    ap.add_argument("--without", default="", help="gitleaks rule ids to leave out, comma-separated "
                    "(e.g. generic-api-key, the one that redacts ordinary text)")
    ap.add_argument("--corpus", type=Path, help="a generated corpus (bench/gen_sessions.py) for the speed section")
    ap.add_argument("--mb", type=float, default=20.0, help="MB of the corpus to redact")
    ap.add_argument("--runs", type=int, default=2, help="alternating speed runs (best is kept)")
    ap.add_argument("--capture", action="store_true", help="also time capture itself (serial `ingest`, no index) "
                    "of the corpus's first --mb MB, with the built-in rules and with each engine's gitleaks rules")
    ap.add_argument("--fixtures", type=Path, action="append", default=[], help="more real transcripts")
    ap.add_argument("--baseline", type=Path, help="another redact.py (e.g. of an older commit, `git show "
                    "REV:engram/capture/redact.py`) timed against this one on the corpus, alternating")
    args = ap.parse_args()

    found = probe()
    print(f"probe: {len(kinds())} kinds x 5 places; leaks by kind: "
          + (", ".join(f"{k} in {sorted(v)}" for k, v in sorted(found.items())) or "none"))
    sets: list[tuple[str, GitleaksRules | None]] = [("built-in", None)]
    if args.gitleaks:
        for engine in args.engine.split(","):
            t = time.perf_counter()
            gl = GitleaksRules(args.gitleaks, engine, frozenset(filter(None, args.without.split(","))))
            print(f"gitleaks with {engine}: {len(gl.rules)} rules, {len(gl.failed)} refused by re"
                  f"{': ' + ', '.join(gl.failed) if gl.failed else ''}; {len(gl.refused)} refused by {engine}"
                  f"{': ' + ', '.join(gl.refused) if gl.refused else ''}; compiled in {time.perf_counter() - t:.1f} s")
            sets.append((f"built-in + gitleaks ({engine})", gl))
    print(f"\n| rules | probe kinds missed (of {len(kinds())}) | vendor kinds missed (of {len(vendor_kinds())}) |"
          "\n|---|---|---|")
    for label, g in sets:
        missed, vmissed = kinds_caught(g)
        print(f"| {label} | {len(missed)} {', '.join(missed)} | {len(vmissed)} {', '.join(vmissed)} |")

    strings = fixture_strings(args.fixtures)
    mb = sum(len(s) for s in strings) / 1e6
    print(f"\nfalse redactions: {len(strings):,} strings, {mb:.1f} MB of real transcripts (no live secret in them)")
    for label, g in sets:
        counts, examples = false_redactions(strings, g)
        print(f"- {label}: {sum(counts.values())} redactions: {dict(sorted(counts.items()))}")
        for cls, ex in sorted(examples.items()):
            for e in ex:
                print(f"    {cls}: …{e}…")

    if args.corpus:
        lines = corpus_lines(args.corpus, args.mb)
        speed_rows(lines, sets, args.runs)
        if args.capture:
            capture_rows(args.corpus, args.mb, sets, args.runs)
            tape_scan_rows(args.corpus, args.mb, sets, args.runs)
        if args.baseline:
            baseline_rows(lines, args.baseline, args.corpus, args.mb)
    return 0


def speed_rows(lines: list[bytes], sets: list[tuple[str, GitleaksRules | None]], runs: int) -> None:
    """Parse + redact, MB of JSONL per CPU second, each rule set in turn, `runs` alternating rounds."""
    mbs = sum(map(len, lines)) / 1e6
    times: dict[str, list[float]] = {"orjson.loads only (reference)": []}
    for _ in range(runs):
        times["orjson.loads only (reference)"].append(parse_speed(lines))
        for label, g in sets:
            times.setdefault(f"parse + {label}", []).append(speed(lines, g))
    noop = NoRule()
    for _ in range(runs):
        times.setdefault("parse + built-in + an extra rule that matches nothing (the extra-rule path's own cost)",
                         []).append(speed(lines, noop))  # type: ignore[arg-type]
    for label, g in sets[1:]:
        assert g is not None
        t = time.process_time()
        for line in lines:
            g.candidates(line.decode())
        times[f"{g.engine}: keyword prefilter + rule match alone, one call per line"] = [
            mbs / (time.process_time() - t)]
    for label, g in sets[1:]:
        if g is not None and g.engine == "hyperscan":  # the engine's own floor: no Python per string
            data = b"\n".join(lines)
            t = time.process_time()
            g.kw_all.scan(data, match_event_handler=lambda *a: None)
            g.rule_db.scan(data, match_event_handler=lambda *a: None)
            times["hyperscan alone: one scan of all the lines by the keywords, one by the rules"] = [
                mbs / (time.process_time() - t)]
    print(f"\nspeed: {mbs:.1f} MB of generated JSONL, MB per CPU second, {runs} alternating runs")
    print("| what | runs | best |\n|---|---|---|")
    for label, v in times.items():
        print(f"| {label} | {' '.join(f'{x:.1f}' for x in v)} | {max(v):.1f} |")


def capture_rows(corpus: Path, mb: float, sets: list[tuple[str, GitleaksRules | None]], runs: int) -> None:
    """Capture itself, in this process (one worker, no index): parse, redact, write the tapes of
    the corpus's first sessions (about `mb` MB), with the built-in rules and with gitleaks' rules
    added to the redactor capture makes (patched here only), alternating; MB per CPU second."""
    from engram.capture import pipeline  # noqa: PLC0415
    from engram.capture.discovery import jobs_from_paths  # noqa: PLC0415
    from engram.capture.stats import IngestStats  # noqa: PLC0415
    from engram.store.repo import Store  # noqa: PLC0415

    jobs: list[Any] = []
    raw = 0
    for job in jobs_from_paths([corpus], IngestStats()):
        jobs.append(job)
        raw += sum(src.path.stat().st_size for src in job.sources)
        if raw >= mb * 1e6:
            break
    plain = pipeline.Redactor
    times: dict[str, list[float]] = {}
    for _ in range(runs):
        for label, g in sets:
            class WithRules(PreparingRedactor):
                def __init__(self, *a: Any, _g: Any = g, **k: Any) -> None:
                    super().__init__(*a, **k)
                    if _g is not None:
                        self.gl = _g
                        self._extra = [*self._extra, _g]
            with tempfile.TemporaryDirectory(prefix="engram-redcap-") as tmp:
                subprocess.run(["git", "init", "-q"], cwd=tmp, check=True)
                subprocess.run([sys.executable, "-m", "engram.cli", "init"], cwd=tmp, check=True, capture_output=True)
                pipeline.Redactor = WithRules
                try:
                    t = time.process_time()
                    pipeline.ingest(Store(Path(tmp)), list(jobs), workers=1)
                    times.setdefault(label, []).append(raw / 1e6 / (time.process_time() - t))
                finally:
                    pipeline.Redactor = plain
    print(f"\ncapture (serial ingest, no index) of {raw / 1e6:.1f} MB, MB per CPU second, {runs} alternating runs")
    print("| rules | runs | best |\n|---|---|---|")
    for label, v in times.items():
        print(f"| {label} | {' '.join(f'{x:.1f}' for x in v)} | {max(v):.1f} |")


def tape_scan_rows(corpus: Path, mb: float, sets: list[tuple[str, GitleaksRules | None]], runs: int) -> None:
    """What hyperscan's rules would cost written into the redactor's tape-wide scan: on the events
    capture writes, tape by tape, `prepare` alone (keywords of all the tape's strings in one scan,
    rules on the strings holding one; the strings collected beforehand, as the redactor's own walk
    has them) against the built-in redaction of the same events; MB of transcript per CPU second."""
    gl = next((g for _, g in sets if g is not None and g.engine == "hyperscan"), None)
    if gl is None:
        return
    tapes, raw = capture_events(corpus, mb, with_raw=True)
    leaves: list[list[str]] = []
    for tape in tapes:
        got: list[str] = []
        for ev in tape:
            _walk(ev, got, [], [])
        leaves.append(got)
    times: dict[str, list[float]] = {"built-in redaction of the events": [], "hyperscan prepare alone": []}
    for _ in range(runs):
        r = Redactor()
        t = time.process_time()
        for tape in tapes:
            r.events(tape)
        times["built-in redaction of the events"].append(raw / 1e6 / (time.process_time() - t))
        t = time.process_time()
        for got in leaves:
            gl.prepare(got)
        times["hyperscan prepare alone"].append(raw / 1e6 / (time.process_time() - t))
    print(f"\ncapture's events of {raw / 1e6:.1f} MB of transcripts, tape by tape, MB of transcript per CPU second, "
          f"{runs} alternating runs\n| what | runs | best |\n|---|---|---|")
    for label, v in times.items():
        print(f"| {label} | {' '.join(f'{x:.1f}' for x in v)} | {max(v):.1f} |")


def capture_events(corpus: Path, mb: float, with_raw: bool = False) -> Any:
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
    return (tapes, raw) if with_raw else tapes


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
