"""engram explain end to end on the real sessions, plus reindex equivalence and errors."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import SPOTTER_MAIN, SPOTTER_OTHER, build_spot_repo, created_by, git, run_engram, session_cwd


@pytest.fixture(scope="module")
def spot_repo(spotter: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("explain") / "repo"
    return root, build_spot_repo(spotter, root)


def created_by_main(spotter: Path) -> dict[str, str]:
    return created_by(spotter, SPOTTER_MAIN)


def explain(root: Path, *args: str) -> dict:
    return json.loads(run_engram(root, "explain", *args).stdout)


def spans_of_main(spotter: Path, root: Path, writer: dict[str, str], size: int = 10) -> list[tuple[str, int, int]]:
    spans = []
    for rel, content in sorted(created_by_main(spotter).items()):
        if writer.get(rel) != SPOTTER_MAIN or (root / rel).read_text() != content:
            continue
        lines = content.splitlines()
        if len(lines) >= size + 4:
            start = len(lines) // 2 - size // 2
            spans.append((rel, start, start + size - 1))
    return spans


def test_the_writing_session_comes_first(spotter: Path, spot_repo: tuple[Path, dict[str, str]]) -> None:
    root, writer = spot_repo
    spans = spans_of_main(spotter, root, writer)
    assert len(spans) >= 3
    for rel, a, b in spans:
        doc = explain(root, f"{rel}:{a}-{b}")
        assert doc["version"] == 1 and doc["span"] == {"file": rel, "start": a, "end": b}
        first = doc["sessions"][0]
        assert first["session_id"] == SPOTTER_MAIN and first["harness"] == "claude-code", rel
        kinds = {f["kind"] for f in first["fragments"]}
        assert "code.edit" in kinds
        frag = next(f for f in first["fragments"] if f["kind"] == "code.edit")
        window_offsets = [e["offset"] for e in frag["window"]]
        assert frag["offset"] in window_offsets and len(window_offsets) == 7  # default 3 before, 3 after
        touches = [s["touches"] for s in doc["sessions"]]
        assert touches == sorted(touches, reverse=True)


def _mutate_tokens(lines: list[str], share: float, rng: random.Random) -> list[str]:
    """Replace `share` of each line's identifiers with fresh ones: every line changes."""
    out = []
    for line in lines:
        words = list(re.finditer(r"[A-Za-z_][A-Za-z0-9_]*", line))
        if not words:
            out.append(line)
            continue
        n = max(1, round(len(words) * share))
        chosen = sorted(rng.sample(range(len(words)), min(n, len(words))), reverse=True)
        for i in chosen:
            m = words[i]
            line = line[: m.start()] + f"zq{rng.randrange(10**6)}" + line[m.end():]
        out.append(line)
    return out


def test_still_first_after_a_line_shift_and_a_20_percent_edit(spotter: Path, spot_repo: tuple[Path, dict[str, str]],
                                                              tmp_path: Path) -> None:
    root, writer = spot_repo
    rng = random.Random(7)
    for rel, a, b in spans_of_main(spotter, root, writer)[:4]:
        path = root / rel
        original = path.read_text()
        try:
            lines = original.splitlines()
            shifted = ["# inserted by a person"] * 7 + lines
            path.write_text("\n".join(shifted) + "\n")
            doc = explain(root, f"{rel}:{a + 7}-{b + 7}", "--brief")
            assert doc["sessions"][0]["session_id"] == SPOTTER_MAIN, f"shift {rel}"
            edited = lines[: a - 1] + _mutate_tokens(lines[a - 1:b], 0.2, rng) + lines[b:]
            assert all(x != y for x, y in zip(edited[a - 1:b], lines[a - 1:b]) if re.search(r"[A-Za-z_]", y))
            path.write_text("\n".join(edited) + "\n")
            doc = explain(root, f"{rel}:{a}-{b}", "--brief")
            assert doc["sessions"] and doc["sessions"][0]["session_id"] == SPOTTER_MAIN, f"20% edit {rel}"
        finally:
            path.write_text(original)


def test_text_on_stdin_and_pretty(spotter: Path, spot_repo: tuple[Path, dict[str, str]]) -> None:
    root, writer = spot_repo
    rel, a, b = spans_of_main(spotter, root, writer)[0]
    text = "\n".join((root / rel).read_text().splitlines()[a - 1:b]) + "\n"
    doc = json.loads(run_engram(root, "explain", "--text", "-", "--brief", input=text.encode()).stdout)
    assert doc["sessions"][0]["session_id"] == SPOTTER_MAIN
    pretty = run_engram(root, "explain", f"{rel}:{a}-{b}", "--pretty").stdout
    assert f"Why {rel}:{a}-{b}?" in pretty and f"session {SPOTTER_MAIN[:8]}" in pretty
    assert "1. wrote these lines — Claude Code" in pretty
    given = run_engram(root, "explain", "--text", "-", "--pretty", input=text.encode()).stdout
    assert given.startswith(f"Why the given text ({b - a + 1} lines)?"), given[:80]  # (it said "Why -:1-13?")


def test_text_that_is_empty_or_not_utf8(spotter: Path, spot_repo: tuple[Path, dict[str, str]]) -> None:
    """`--text -` with nothing on stdin (a forgotten pipe) says so; a stray non-UTF-8 byte is
    replaced, whatever the locale makes of stdin (a strict one used to raise a traceback)."""
    root, writer = spot_repo
    proc = run_engram(root, "explain", "--text", "-", input=b"  \n", check=False)
    assert proc.returncode == 1 and "stdin is empty" in proc.stderr and "Traceback" not in proc.stderr
    rel, a, b = spans_of_main(spotter, root, writer)[0]
    text = ("\n".join((root / rel).read_text().splitlines()[a - 1:b]) + "\n").encode()
    proc = subprocess.run([sys.executable, "-m", "engram.cli", "explain", "--text", "-", "--brief"], cwd=root,
                          input=b"# caf\xe9\n" + text, capture_output=True, timeout=600,
                          env={**os.environ, "PYTHONIOENCODING": "utf-8:strict"})
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout)["sessions"][0]["session_id"] == SPOTTER_MAIN


def test_expand_until_reports_the_final_span(spot_repo: tuple[Path, dict[str, str]]) -> None:
    root, _ = spot_repo
    rel = "assets/js/app.js"
    n = len((root / rel).read_text().splitlines())
    doc = explain(root, f"{rel}:5-6", "--brief", "--expand-until", "1")
    span = doc["span"]
    assert len(doc["sessions"]) <= 1 or (span["start"], span["end"]) == (1, n)
    assert span["start"] <= 5 and span["end"] >= 6


def test_a_span_too_short_to_fingerprint_takes_in_its_neighbours(spotter: Path,
                                                                 spot_repo: tuple[Path, dict[str, str]]) -> None:
    """A lone `end` (one token) has no fingerprint: explain answers for the nearest lines around
    it that have k + w - 1 tokens, says so in `span`, and still finds the session that wrote them."""
    from engram.anchor import DEFAULT_K, DEFAULT_W, tokenize

    root, writer = spot_repo
    rel, a, _ = spans_of_main(spotter, root, writer)[0]
    lines = (root / rel).read_text().splitlines()
    short = next(i for i in range(a, len(lines)) if lines[i - 1].strip() == "end")
    doc = explain(root, f"{rel}:{short}-{short}", "--brief")
    start, end = doc["span"]["start"], doc["span"]["end"]
    assert start < short < end and short - start == end - short  # grown a line each side at a time
    need = DEFAULT_K + DEFAULT_W - 1
    assert len(tokenize("\n".join(lines[start - 1:end]) + "\n")) >= need
    assert len(tokenize("\n".join(lines[start:end - 1]) + "\n")) < need  # no wider than it must be
    # Two or three lines are rarely unique (here `|> Ash.load!(…)` and `end` are in other files
    # too), so the writer need not come first; its edit of this very file must be in the answer.
    writers = [s for s in doc["sessions"] if s["session_id"] == SPOTTER_MAIN]
    assert writers and any(f["kind"] == "code.edit" and f["file"] == rel for f in writers[0]["fragments"])
    assert doc["widened"] == {"asked": {"file": rel, "start": short, "end": short}, "why": "few-tokens"}

    # A span that has enough tokens is answered as asked.
    long_line = next(i for i in range(a, len(lines)) if len(tokenize(lines[i - 1])) >= need)
    doc = explain(root, f"{rel}:{long_line}-{long_line}", "--brief")
    assert (doc["span"]["start"], doc["span"]["end"]) == (long_line, long_line) and doc["widened"] is None


def _rewritten(lines: list[str], rng: random.Random) -> list[str]:
    """Each line rewritten into six fresh tokens at its own indent: nothing of it left to match."""
    return [re.match(r"\s*", ln).group(0) + " ".join(f"zq{rng.randrange(10**9)}" for _ in range(6)) for ln in lines]


def test_lines_rewritten_past_recognition_are_answered_by_their_neighbours(
        spotter: Path, spot_repo: tuple[Path, dict[str, str]]) -> None:
    """Three lines a person rewrote token by token keep nothing of what the agent wrote, and the
    answer was empty (or made of chance matches of a k-gram or two). The code around them still
    is the agent's: explain takes in a line above and below at a time (at most three), answers for
    that span, and says so. `--text -` has no neighbours (no answer), nor does a file no session
    ever saw."""
    from engram.anchor import tokenize

    root, writer = spot_repo
    rng = random.Random(5)
    for rel, a, _ in spans_of_main(spotter, root, writer):
        lines = (root / rel).read_text().splitlines()
        if all(len(tokenize(lines[i])) >= 6 for i in (a - 2, a + 3)):  # lines a-1 and a+4: substantive
            break
    else:
        pytest.fail("no span of main with substantive neighbours")
    original = (root / rel).read_text()
    fresh = _rewritten(lines[a - 1:a + 2], rng)
    try:
        (root / rel).write_text("\n".join(lines[:a - 1] + fresh + lines[a + 2:]) + "\n")
        doc = explain(root, f"{rel}:{a}-{a + 2}", "--brief")
        assert doc["widened"] == {"asked": {"file": rel, "start": a, "end": a + 2}, "why": "no-evidence"}
        span = doc["span"]
        assert a - 3 <= span["start"] < a and a + 2 < span["end"] <= a + 5
        assert doc["sessions"][0]["session_id"] == SPOTTER_MAIN
        pretty = run_engram(root, "explain", f"{rel}:{a}-{a + 2}", "--brief", "--pretty").stdout
        assert f"lines {a}-{a + 2} widened to {span['start']}-{span['end']}" in pretty

        stdin = run_engram(root, "explain", "--text", "-", "--brief", input=("\n".join(fresh) + "\n").encode())
        assert json.loads(stdin.stdout)["sessions"] == [] and json.loads(stdin.stdout)["widened"] is None

        # Rewritten into common Elixir, the lines match a k-gram or two of other code (`(conn,
        # args)`), weakly: that is not evidence enough either, and the neighbours answer.
        common = ["  # rewritten by hand", "  def fetch_it(conn, args), do: MyHelper.go(conn, args, :fast)",
                  "  # end of hand edit"]
        stdin = run_engram(root, "explain", "--text", "-", "--brief", input=("\n".join(common) + "\n").encode())
        weak = json.loads(stdin.stdout)["sessions"]
        assert weak and all(f["confidence"] < 0.3 for s in weak for f in s["fragments"])
        (root / rel).write_text("\n".join(lines[:a - 1] + common + lines[a + 2:]) + "\n")
        doc = explain(root, f"{rel}:{a}-{a + 2}", "--brief")
        assert doc["widened"] == {"asked": {"file": rel, "start": a, "end": a + 2}, "why": "weak-evidence"}
        assert doc["sessions"][0]["session_id"] == SPOTTER_MAIN
        assert max(f["confidence"] for f in doc["sessions"][0]["fragments"]) >= 0.3
    finally:
        (root / rel).write_text(original)
    alien = root / "alien.txt"
    alien.write_text("\n".join(" ".join(f"qx{rng.randrange(10**9)}" for _ in range(6)) for _ in range(9)) + "\n")
    try:
        doc = explain(root, "alien.txt:4-6", "--brief")
        assert doc["sessions"] == [] and doc["widened"] is None and doc["span"]["start"] == 4
    finally:
        alien.unlink()


def test_a_chance_match_one_line_out_does_not_stop_the_widening(spotter: Path,
                                                                 spot_repo: tuple[Path, dict[str, str]]) -> None:
    """Three rewritten lines whose line above was replaced by a short line of another session's
    code (a comment, a `def` head): one line out, the only evidence is that line, weakly, and the
    answer named the other session alone. Explain goes on widening to the strongest evidence
    around the span, the writer's code, and answers for that span."""
    from engram.anchor import tokenize

    root, writer = spot_repo
    rng = random.Random(11)
    others = sorted({ln.strip() for rel, w in writer.items() if w == SPOTTER_OTHER
                     for ln in (root / rel).read_text().splitlines() if 6 <= len(tokenize(ln)) <= 9})
    for rel in sorted(created_by_main(spotter)):
        if writer.get(rel) != SPOTTER_MAIN:
            continue
        lines = (root / rel).read_text().splitlines()
        # the span a..a+2 and the line after it are rewritten; three lines a side beyond are the writer's
        at = [a for a in range(5, len(lines) - 6)
              if all(len(tokenize(lines[i - 1])) >= 6 for i in (a - 3, a - 2, a + 4, a + 5, a + 6))]
        if at:
            a = at[len(at) // 2]
            break
    else:
        pytest.fail("no file of main with substantive lines around a span")
    original = (root / rel).read_text()
    fresh = _rewritten(lines[a - 1:a + 3], rng)
    for other_line in others[::max(1, len(others) // 12)]:
        # One line out holds nothing of main and a weak match of the other session only.
        near = [other_line, *fresh]
        one_out = json.loads(run_engram(root, "explain", "--text", "-", "--brief",
                                        input=("\n".join(near) + "\n").encode()).stdout)["sessions"]
        if one_out and {s["session_id"] for s in one_out} == {SPOTTER_OTHER} and all(
                f["confidence"] < 0.3 for s in one_out for f in s["fragments"]):
            break
    else:
        pytest.fail("no line of the other session matches it weakly on its own")
    try:
        (root / rel).write_text("\n".join(lines[:a - 2] + near + lines[a + 3:]) + "\n")
        doc = explain(root, f"{rel}:{a}-{a + 2}", "--brief")
    finally:
        (root / rel).write_text(original)
    assert doc["widened"] == {"asked": {"file": rel, "start": a, "end": a + 2}, "why": "no-evidence"}
    assert doc["span"]["start"] < a - 1 and doc["span"]["end"] > a + 3  # past the chance match
    assert doc["sessions"][0]["session_id"] == SPOTTER_MAIN
    assert any(f["kind"] == "code.edit" and f["file"] == rel for f in doc["sessions"][0]["fragments"])


def test_view_walks_a_transcript_from_a_fragment(spotter: Path, spot_repo: tuple[Path, dict[str, str]]) -> None:
    root, writer = spot_repo
    rel, a, b = spans_of_main(spotter, root, writer)[0]
    frag = explain(root, f"{rel}:{a}-{b}", "--brief")["sessions"][0]["fragments"][0]
    view = json.loads(run_engram(root, "view", frag["tape"][:10], "--at", str(frag["offset"]),
                                 "--before", "2", "--after", "4").stdout)
    assert [e["offset"] for e in view["events"]] == list(range(frag["offset"] - 2, frag["offset"] + 5))
    assert view["session_id"] == SPOTTER_MAIN
    bad = run_engram(root, "view", frag["tape"], "--at", "999999", check=False)
    assert bad.returncode == 1 and "has events 0-" in bad.stderr


def test_search_finds_the_users_request(spot_repo: tuple[Path, dict[str, str]]) -> None:
    root, _ = spot_repo
    doc = json.loads(run_engram(root, "search", "Implement spotter-gqc").stdout)
    assert doc["hits"] and doc["hits"][0]["session_id"] == SPOTTER_MAIN
    assert "Implement spotter-gqc" in doc["hits"][0]["excerpt"]


def test_search_says_when_it_showed_only_the_first_hits(spot_repo: tuple[Path, dict[str, str]]) -> None:
    """`engram search the` printed its first 20 hits (the default limit) and nothing else: a person
    took them for all there is. The text ends saying more matched and the command that shows more;
    the JSON names that command (`more`); an answer that holds every hit says nothing of the kind."""
    root, _ = spot_repo
    every = json.loads(run_engram(root, "search", "the", "--limit", "1000").stdout)["hits"]
    assert len(every) > 25 and "more" not in json.loads(run_engram(root, "search", "the", "--limit", "1000").stdout)
    text = run_engram(root, "search", "the", "--pretty").stdout.splitlines()
    assert len(text) == 21 and text[-1] == "… more messages and tool calls match: engram search the --limit 40"
    doc = json.loads(run_engram(root, "search", "the", "--limit", "5").stdout)
    assert len(doc["hits"]) == 5 and doc["more"] == "engram search the --limit 10"
    exact = run_engram(root, "search", "the", "--limit", str(len(every)), "--pretty").stdout.splitlines()
    assert len(exact) == len(every) and not exact[-1].startswith("…")


def test_show_with_a_limit_says_what_it_left_out(spot_repo: tuple[Path, dict[str, str]]) -> None:
    """`engram show TAPE --limit 5` printed 5 events and stopped, as if the tape ended there; its
    last line says how many events follow and how to read on."""
    root, _ = spot_repo
    tape = json.loads(run_engram(root, "tapes", "--json").stdout)[0]
    lines = run_engram(root, "show", tape["id"][:12], "--limit", "5").stdout.splitlines()
    assert len(lines) == 1 + 5 + 1
    assert lines[-1] == (f"… {tape['events'] - 5} more events: engram view {tape['id'][:12]}@5 --before 0 --after 40, "
                         f"or engram show {tape['id'][:12]} without --limit")
    whole = run_engram(root, "show", tape["id"][:12]).stdout.splitlines()
    assert len(whole) == 1 + tape["events"] and not whole[-1].startswith("…")


def test_search_says_when_nothing_matches_and_refuses_an_empty_query(spot_repo: tuple[Path, dict[str, str]]) -> None:
    """A person's search that finds nothing says so (it printed nothing at all, exit 0); an empty
    query is a mistake, one line and exit 1 (it answered no hits)."""
    root, _ = spot_repo
    none = run_engram(root, "search", "zzqqxxnothing", "--pretty")
    assert none.stdout == "" and none.stderr.strip() == "no message or tool call matches 'zzqqxxnothing'"
    assert json.loads(run_engram(root, "search", "zzqqxxnothing").stdout) == {"query": "zzqqxxnothing", "hits": []}
    for blank in ("", "  "):
        bad = run_engram(root, "search", blank, check=False)
        assert bad.returncode == 1 and bad.stdout == ""
        assert bad.stderr.strip() == "engram: what to search for? give words: engram search 'retry backoff'"


def test_search_fills_its_page_when_a_session_was_resumed_many_times(repo: Path, tmp_path: Path) -> None:
    """Each resume of a session copies its records, and search leaves the copies out: a chain of
    four resumes must still give a full page of the first session's own messages, and never a
    copy in their place (copies rank as their record does; the messages differ in length, so in
    rank, and the first rows read hold five copies of each)."""
    from test_lineage import tape  # noqa: PLC0415

    asked = [{"kind": "msg.in", "ts": f"2026-01-01T00:00:{i:02d}Z", "text": "please tune the zebra parser" + ", again" * i}
             for i in range(8)]
    resumes = []
    for n in range(1, 5):
        own = {"kind": "msg.out", "ts": f"2026-01-0{n + 1}T00:00:00Z", "text": "resumed", "block": "text"}
        resumes.append(tape(tmp_path, f"resume-{n}", "2026-01-01T00:00:00Z", [*asked, own]))
    run_engram(repo, "ingest", *map(str, resumes))  # the copies are indexed first, as may happen
    run_engram(repo, "ingest", str(tape(tmp_path, "first", "2026-01-01T00:00:00Z", asked)))
    hits = json.loads(run_engram(repo, "search", "zebra", "--limit", "8").stdout)["hits"]
    assert len(hits) == 8 and {h["session_id"] for h in hits} == {"first"}
    assert sorted(h["timestamp"] for h in hits) == [e["ts"] for e in asked]


def test_a_query_ends_without_teardown_yet_delivers_everything(spotter: Path,
                                                               spot_repo: tuple[Path, dict[str, str]]) -> None:
    """Queries leave with os._exit (engram.cli.main.exit_process): an answer far larger than a pipe's
    buffer and one small enough to sit in the stream's buffer both arrive whole, the exit status
    and message of an error survive, and the index is left closed (no -wal file for the next
    process to recover)."""
    root, writer = spot_repo
    rel, a, b = spans_of_main(spotter, root, writer)[0]
    proc = run_engram(root, "explain", f"{rel}:{a}-{b}", "--before", "40", "--after", "40", "--budget", "0", "--full")
    assert len(proc.stdout) > 2 * 65536  # more than a pipe holds: the rest is written at the exit
    doc = json.loads(proc.stdout)
    assert doc["sessions"][0]["session_id"] == SPOTTER_MAIN
    assert not (root / ".engram" / "index.sqlite-wal").exists()
    buffered = {"PYTHONUNBUFFERED": ""}  # as a user's shell has it (this machine sets it)
    brief = run_engram(root, "explain", f"{rel}:{a}-{b}", "--brief", env=buffered)
    assert len(brief.stdout) < 8192  # small enough to sit in the stream's buffer until the exit
    assert json.loads(brief.stdout)["sessions"][0]["session_id"] == SPOTTER_MAIN
    missing = run_engram(root, "explain", "no/such/file.py:1-2", check=False)
    assert missing.returncode == 1 and "no such file" in missing.stderr


def test_reindex_gives_identical_answers(spotter: Path, spot_repo: tuple[Path, dict[str, str]]) -> None:
    root, writer = spot_repo
    spans = spans_of_main(spotter, root, writer)[:3] + [("assets/js/app.js", 10, 30)]
    before = [run_engram(root, "explain", f"{r}:{a}-{b}").stdout for r, a, b in spans]
    tapes_before = run_engram(root, "tapes", "--json").stdout
    out = run_engram(root, "reindex").stdout
    assert "stop-listed" in out
    after = [run_engram(root, "explain", f"{r}:{a}-{b}").stdout for r, a, b in spans]
    assert before == after
    assert run_engram(root, "tapes", "--json").stdout == tapes_before


@pytest.mark.parametrize("args,message", [
    (["nope.py:1-2"], "no such file"),
    (["assets/js/app.js:1-99999"], "past the end of the file"),
    (["../outside.py:1-2"], "outside the repository"),
    (["assets/js/app.js:9-3"], "START must not exceed END"),
    (["assets/js/app.js:ten-20"], "lines must be numbers"),
    (["--text", "missing.txt"], "--text missing.txt: cannot read it (No such file or directory)"),
    (["--text", "assets"], "--text assets: cannot read it"),
    (["assets"], "assets: a directory; name a file in it"),  # (was "no such file", as if mistyped)
    (["assets/js:1-2"], "assets/js: a directory; name a file in it"),
])
def test_explain_errors_are_clear(spot_repo: tuple[Path, dict[str, str]], args: list[str], message: str) -> None:
    root, _ = spot_repo
    (root.parent / "outside.py").write_text("x = 1\ny = 2\n")
    proc = run_engram(root, "explain", *args, check=False)
    assert proc.returncode == 1 and message in proc.stderr and "Traceback" not in proc.stderr


def test_an_argument_that_reads_two_ways_is_read_as_a_user_means_it(spotter: Path,
                                                                    spot_repo: tuple[Path, dict[str, str]]) -> None:
    """`FILE:LINE:COL` pasted from a compiler's or a linter's message was 'FILE:LINE: no such file';
    a file whose name ends in `:3` beside a directory of the name before it was 'a directory'; and
    when both `n` and `n:2` are files, `n:2` is line 2 of `n`, and the answer says so."""
    root, writer = spot_repo
    rel, a, b = spans_of_main(spotter, root, writer)[0]
    doc = explain(root, f"{rel}:{a}:7", "--brief")
    assert doc["sessions"][0]["session_id"] == SPOTTER_MAIN
    assert doc["read_as"] == f"{rel}:{a}:7 read as line {a} of {rel} (column 7 ignored)"
    made = [root / "12", root / "12:3", root / "n", root / "n:2"]
    try:
        made[0].mkdir()
        (made[0] / "x.txt").write_text("x\n")
        made[1].write_text("one\ntwo\nthree\n")
        whole = json.loads(run_engram(root, "explain", "12:3", "--json").stdout)
        assert whole["file"] == "12:3", "the file named 12:3, whole: 12 is a directory"
        made[2].write_text("alpha beta gamma\ndelta epsilon zeta\n")
        made[3].write_text("other\n")
        both = explain(root, "n:2", "--brief")
        text = run_engram(root, "explain", "n:2", "--pretty").stdout
    finally:
        for p in reversed(made):
            subprocess.run(["rm", "-rf", str(p)], check=True)
    assert both["span"]["file"] == "n" and both["read_as"] == \
        "n:2 read as line 2 of n; a file named n:2 is there too: `engram explain n:2:1-1` for its lines"
    assert "(n:2 read as line 2 of n; a file named n:2 is there too" in text


def test_a_link_out_of_the_repository_is_named_as_a_link(spot_repo: tuple[Path, dict[str, str]]) -> None:
    """A symbolic link in the working tree that leads out of it is refused, and was called
    'outside the repository' though `ls` shows it right there: the answer says it is a link."""
    root, _ = spot_repo
    (root.parent / "elsewhere.py").write_text("x = 1\ny = 2\n")
    link = root / "outlink.py"
    link.symlink_to(root.parent / "elsewhere.py")
    try:
        for args in (["explain", "outlink.py:1-2"], ["blame", "outlink.py"], ["remember", "x", "--at", "outlink.py:1-1"],
                     ["recall", "--at", "outlink.py"]):
            proc = run_engram(root, *args, check=False)
            assert proc.returncode == 1 and proc.stdout == "", args
            assert "outlink.py: a symbolic link that leads outside the repository" in proc.stderr, (args, proc.stderr)
    finally:
        link.unlink()


def test_a_file_name_that_is_not_utf8_is_one_clear_line(spot_repo: tuple[Path, dict[str, str]]) -> None:
    """A file named in Latin-1 (`caf\\xe9.py`, an old repository's) was a traceback from explain,
    recall --at and remember --at (surrogates not allowed): paths are kept as UTF-8 text. It is
    one line naming the file and what to do, exit 1, and nothing is written."""
    root, _ = spot_repo
    name = os.fsdecode(b"caf\xe9.py")
    (root / name).write_text("def settle_invoice_period():\n    return close_ledger_period()\n")
    try:
        for args in (["explain", f"{name}:1-2"], ["explain", name], ["blame", name], ["recall", "--at", name],
                     ["remember", "a note", "--at", f"{name}:1-2"], ["memory", "list", "--at", name]):
            proc = run_engram(root, *args, check=False)
            assert proc.returncode == 1 and "Traceback" not in proc.stderr, (args, proc.stderr[-600:])
            assert proc.stderr == "engram: caf\ufffd.py: the file's name is not UTF-8; engram keeps paths as UTF-8 " \
                                  "text: rename it (convmv -f latin1 -t utf8 FILE)\n", (args, proc.stderr)
    finally:
        (root / name).unlink()
    assert "a note" not in run_engram(root, "memory", "list").stdout


def test_init_with_repo_option_creates_the_store_there(tmp_path: Path) -> None:
    """`engram -C DIR init` (as every other command) acts on DIR, not on the directory it was
    started in: it once created .engram/ in the current directory instead."""
    repo = tmp_path / "proj"
    (repo / "src").mkdir(parents=True)
    git(repo, "init", "-q")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = run_engram(elsewhere, "--repo", str(repo / "src"), "init")
    assert (repo / ".engram").is_dir()
    assert not (elsewhere / ".engram").exists() and not (repo / "src" / ".engram").exists()
    assert str(repo / ".engram") in proc.stdout


@pytest.mark.parametrize("args,message", [
    (["explain", "assets/js/app.js:1-9", "--before", "-1"], "argument --before: '-1': must be 0 or more"),
    (["explain", "assets/js/app.js:1-9", "--expand-until", "0"], "argument --expand-until: '0': must be 1 or more"),
    (["explain", "assets/js/app.js:1-9", "--min-confidence", "2"], "argument --min-confidence: '2': must be between 0 and 1"),
    (["view", "x", "--at", "3", "--before", "-2"], "argument --before: '-2': must be 0 or more"),
    (["search", "x", "--limit", "0"], "argument --limit: '0': must be 1 or more"),
    (["tapes", "--limit", "-3"], "argument --limit: '-3': must be 1 or more"),
    # past 64 bits these reached SQLite as a traceback ("int too big to convert")
    (["tapes", "--limit", "9" * 20], f"argument --limit: '{'9' * 20}': too large (at most 2,147,483,647)"),
    (["search", "x", "--limit", "9" * 20], "too large (at most 2,147,483,647)"),
    (["explain", "assets/js/app.js:1-9", "--budget", "9" * 20], "argument --budget: '" + "9" * 20 + "': too large"),
    (["resume", "--budget", "9" * 20], "argument --budget: '" + "9" * 20 + "': too large"),
])
def test_bad_option_values_are_refused(spot_repo: tuple[Path, dict[str, str]], args: list[str], message: str) -> None:
    """A negative window once shifted the transcript past the event it was centred on; now
    argparse refuses it (its usage status, 2) before any work."""
    root, _ = spot_repo
    proc = run_engram(root, *args, check=False)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("toml,message", [
    ("[explain.window]\nbefore = -1\n", "explain.window.before = -1: must be a whole number, 0 or more"),
    ("[explain.window]\nafter = \"three\"\n", "explain.window.after = 'three': must be a whole number"),
    ("[explain]\nmin_confidence = 5\n", "explain.min_confidence = 5: must be a number from 0 to 1"),
    ("explain = 3\n", "[explain] must be a table of settings"),
    ("[redact]\npatterns = \"x\"\n", "redact.patterns must be a list"),
    ("[explain]\nbudget = 99999999999999999999\n", "explain.budget = 99999999999999999999: too large (at most 2,147,483,647)"),
])
def test_bad_settings_name_the_key(spot_repo: tuple[Path, dict[str, str]], toml: str, message: str) -> None:
    root, _ = spot_repo
    config = root / ".engram" / "config.toml"
    config.write_text(toml)
    try:
        proc = run_engram(root, "explain", "assets/js/app.js:1-9", "--brief", check=False)
        assert proc.returncode == 1 and message in proc.stderr and "Traceback" not in proc.stderr
        config.write_text("[explain.window]\nbefore = 0\nafter = 1\n[mcp]\nunknown_to_engram = true\n")
        doc = explain(root, "assets/js/app.js:1-9")
        frags = [f for s in doc["sessions"] for f in s["fragments"]]
        # Settings engram knows are applied (no event before, one after); others are left alone.
        assert frags and all([e["offset"] for e in f["window"]] in ([f["offset"], f["offset"] + 1], [f["offset"]])
                             for f in frags)
    finally:
        config.unlink()


def test_a_misspelt_setting_is_named_with_the_nearest_known_one(spot_repo: tuple[Path, dict[str, str]]) -> None:
    """`[explian]` or `budgt` changed nothing and said nothing: the user believed the setting applied."""
    root, _ = spot_repo
    config = root / ".engram" / "config.toml"
    config.write_text("[explian]\nbudget = 3\n[explain]\nbudgt = 5\nwindow = { before = 1, aftr = 2 }\n")
    try:
        proc = run_engram(root, "explain", "assets/js/app.js:1-9", "--brief")  # still answers: a warning only
        assert json.loads(proc.stdout)["version"] == 1
        for name, near in [("explian", "explain"), ("explain.budgt", "explain.budget"),
                           ("explain.window.aftr", "explain.window.after")]:
            assert f"`{name}` (did you mean `{near}`?) is not an engram setting; ignored" in proc.stderr, proc.stderr
        checks = json.loads(run_engram(root, "doctor", "--json", check=False).stdout)["checks"]
        warned = [c for c in checks if c["area"] == "config"]
        assert len(warned) == 1 and warned[0]["status"] == "warn" and "`explain.budgt`" in warned[0]["detail"]
        config.write_text("[explain]\nbudget = 5000\n")
        assert "not an engram setting" not in run_engram(root, "explain", "assets/js/app.js:1-9", "--brief").stderr
    finally:
        config.unlink()


def test_tapes_of_an_unknown_harness_say_so(spot_repo: tuple[Path, dict[str, str]]) -> None:
    root, _ = spot_repo
    proc = run_engram(root, "tapes", "--harness", "nope")
    assert "no tapes from harness 'nope'; the store holds claude-code" in proc.stderr  # (what to ask for instead)


def test_empty_and_missing_store(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    proc = run_engram(root, "explain", "a.py:1-1", check=False)
    assert proc.returncode == 1 and "engram init" in proc.stderr
    git(root, "init", "-q")
    run_engram(root, "init")
    proc = run_engram(root, "explain", "a.py:1-1", check=False)
    assert proc.returncode == 1 and "engram ingest" in proc.stderr


def test_explain_while_another_process_ingests(spotter: Path, tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q")
    run_engram(root, "init")
    run_engram(root, "ingest", str(spotter / f"{SPOTTER_MAIN}.jsonl"))
    (root / "q.ex").write_text((spotter / f"{SPOTTER_MAIN}.jsonl").read_text()[:0] + "\n".join(
        created_by_main(spotter)["lib/spotter/transcripts/annotation_message_ref.ex"].splitlines()[:20]) + "\n")
    ref = json.loads(run_engram(root, "explain", "q.ex:3-18", "--brief").stdout)
    assert ref["sessions"][0]["session_id"] == SPOTTER_MAIN
    writer = subprocess.Popen([sys.executable, "-m", "engram.cli", "ingest", str(spotter)], cwd=root,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    answers = 0
    while writer.poll() is None or answers < 3:
        doc = json.loads(run_engram(root, "explain", "q.ex:3-18", "--brief").stdout)
        assert doc["sessions"][0]["session_id"] == SPOTTER_MAIN
        answers += 1
    out, err = writer.communicate()
    assert writer.returncode == 0, err
    assert "database is locked" not in err


def direct_both(root: Path, texts: list[str],
                files: list[str] | None = None) -> list[tuple[dict[int, float], dict[int, float]]]:
    """Direct hits of each text matched in plain Python and with numpy, on the store of `root`
    (`files`: the file each text is a span of, which lets a session's edits be joined); the
    writer test's hunks taken together (`Writes`) must be the same from both too."""
    from engram.anchor import definition, tokenize  # noqa: PLC0415
    from engram.index import snapshot  # noqa: PLC0415
    from engram.index.db import open_db  # noqa: PLC0415
    from engram.query.direct import direct_hits  # noqa: PLC0415
    from engram.query.ranking import Writes  # noqa: PLC0415
    from engram.store.repo import Store  # noqa: PLC0415

    db = open_db(Store.discover(root), readonly=True)
    try:
        snap = snapshot.read(db)
        out = []
        for t, f in zip(texts, files or [None] * len(texts)):
            small, vec = Writes(), Writes()
            out.append((direct_hits(db, t, tokens=definition.token_hashes(t), snap=snap, file=f, writes=small),
                        direct_hits(db, t, tokens=tokenize(t), snap=snap, file=f, writes=vec)))
            assert small.by_session == vec.by_session
        return out
    finally:
        db.close()


def test_plain_python_and_numpy_matching_give_the_same_answer(spotter: Path, spot_repo: tuple[Path, dict[str, str]],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A command-line explain of a short span matches it without numpy (engram.query.direct); the
    language server and the MCP endpoint match with numpy. Same fragments, same confidences, same
    order (lineage is walked in that order), for spans of 1 to 40 lines, edited or not, with and
    without their file (edits are joined only with it), and when more fragments qualify than
    are kept."""
    from engram.query import direct, direct_np  # noqa: PLC0415

    root, writer = spot_repo
    rng = random.Random(11)
    texts, files = [], []
    for rel in sorted(created_by_main(spotter)):
        lines = (root / rel).read_text().splitlines()
        for size in (1, 3, 10, 40):
            if len(lines) > size:
                a = rng.randrange(len(lines) - size)
                texts.append("\n".join(lines[a:a + size]) + "\n")
                texts.append("\n".join(_mutate_tokens(lines[a:a + size], 0.3, rng)) + "\n")
                files += [rel, rel]
    whole = (root / JOINED_FILE).read_text()
    joined_span = whole.splitlines(keepends=True)[JOINED_LINES[0] - 1:JOINED_LINES[1]]
    texts += ["".join(joined_span), whole]  # two edits; many small ones (no edit passes)
    files += [JOINED_FILE, JOINED_FILE]
    pairs = direct_both(root, texts)
    assert sum(1 for small, _ in pairs if small) >= len(pairs) // 2  # most spans are found at all
    assert all(list(small.items()) == list(vec.items()) for small, vec in pairs)
    with_files = direct_both(root, texts, files)
    assert all(list(small.items()) == list(vec.items()) for small, vec in with_files)
    for (joined, _), (alone, _) in zip(with_files[-2:], pairs[-2:]):
        assert len(joined) > len(alone), "the span's writing edits are joined in both"
    monkeypatch.setattr(direct, "MAX_CANDIDATES", 3)  # the cut to the most-matched candidates
    monkeypatch.setattr(direct_np, "MAX_CANDIDATES", 3)
    cut = direct_both(root, texts[:40])
    assert any(len(vec) == 3 for _, vec in cut)
    assert all(list(small.items()) == list(vec.items()) for small, vec in cut)
    cut = direct_both(root, texts[-2:] + texts[:20], files[-2:] + files[:20])
    assert all(list(small.items()) == list(vec.items()) for small, vec in cut)


# Lines 1-16 of this file were written by two edits of SPOTTER_MAIN: its Write (#260, lines 1-123)
# and an Edit of lines 4-6 into 4-9 (#505), after which the session read the file whole (#510).
JOINED_FILE = "lib/spotter_web/live/project_review_live.ex"
JOINED_LINES = (1, 16)


def test_a_span_written_by_two_edits_shows_both(spot_repo: tuple[Path, dict[str, str]]) -> None:
    """Neither edit holds the whole span, the later read of the file does: explain used to show
    only that read. The session's edits of the file together hold the span, so both are shown,
    each with its own confidence, and the read still is."""
    root, _ = spot_repo
    doc = explain(root, f"{JOINED_FILE}:{JOINED_LINES[0]}-{JOINED_LINES[1]}", "--brief")
    main = next(s for s in doc["sessions"] if s["session_id"] == SPOTTER_MAIN)
    kinds = [(f["kind"], f["offset"]) for f in main["fragments"]]
    edits = [f for f in main["fragments"] if f["kind"] == "code.edit"]
    assert len({f["offset"] for f in edits}) == 2, kinds  # (the Edit changed two regions: a fragment each)
    assert all(0.05 <= f["confidence"] < 0.8 for f in edits), edits
    assert main["touches"] == 3, "two edits and the reads of the file: three touches"
    assert ("code.read", max(o for _, o in kinds)) in kinds, "the read that holds the span whole is still shown"


def test_a_whole_file_written_in_many_edits_shows_them(spot_repo: tuple[Path, dict[str, str]]) -> None:
    """The whole of JOINED_FILE: a Write of its first 123 lines and later edits, each a small part
    of the 194 lines, then reads of the file. With no edit passing on its own, the session's edits
    of the file holding at least a twentieth of it each are shown, the Write first among them."""
    root, _ = spot_repo
    n = len((root / JOINED_FILE).read_text().splitlines())
    doc = explain(root, f"{JOINED_FILE}:1-{n}", "--brief")
    main = next(s for s in doc["sessions"] if s["session_id"] == SPOTTER_MAIN)
    edits = [f for f in main["fragments"] if f["kind"] == "code.edit" and f["via"] == "direct"]
    assert len(edits) >= 3, [(f["kind"], f["offset"], f["confidence"]) for f in main["fragments"]]
    assert max(edits, key=lambda f: f["confidence"])["lines"][0] == 1  # the Write that created the file
    assert all(f["file"] == JOINED_FILE and f["confidence"] >= 0.05 for f in edits)


def test_a_reader_does_not_hide_the_session_that_wrote_a_span_in_two_edits(repo: Path, tmp_path: Path) -> None:
    """One session writes a file in two edits; a later one reads it whole. For a span across
    the two edits, the read held it all and each edit half: the writer was not returned at all.
    Now it is, first (two touches to one). Joining needs the span's file: the same lines
    elsewhere, or as text on stdin, match the read alone."""
    lines = [f"def step_{i}(value):\n    return transform_{i}(value, limit={i * 7})\n" for i in range(30)]
    first, second = "".join(lines[:15]), "".join(lines[15:])
    (repo / "app.py").write_text(first + second)
    (repo / "elsewhere.py").write_text("".join(lines[10:20]))
    from test_lineage import tape  # noqa: PLC0415

    writer = tape(tmp_path, "writer", "2026-01-01T00:00:00Z", [
        {"kind": "code.edit", "ts": "2026-01-01T00:00:01Z", "file": "app.py", "op": "create",
         "before_range": None, "after_range": [1, 30], "before_text": "", "after_text": first},
        {"kind": "code.edit", "ts": "2026-01-01T00:00:02Z", "file": "app.py", "op": "update",
         "before_range": [31, 30], "after_range": [31, 60], "before_text": "", "after_text": second}])
    reader = tape(tmp_path, "reader", "2026-01-02T00:00:00Z", [
        {"kind": "code.read", "ts": "2026-01-02T00:00:01Z", "file": "app.py", "range": [1, 60],
         "text": first + second}])
    run_engram(repo, "ingest", str(writer), str(reader))
    doc = explain(repo, "app.py:21-40", "--brief")
    assert [s["session_id"] for s in doc["sessions"]] == ["writer", "reader"]
    assert [f["offset"] for f in doc["sessions"][0]["fragments"]] == [1, 2]
    assert [s["session_id"] for s in explain(repo, "elsewhere.py:1-20", "--brief")["sessions"]] == ["reader"]
    stdin = run_engram(repo, "explain", "--text", "-", "--brief", input="".join(lines[10:20]).encode())
    assert [s["session_id"] for s in json.loads(stdin.stdout)["sessions"]] == ["reader"]


IMPORTS = 'import (\n\t"context"\n\t"fmt"\n\t"os/exec"\n\t"strings"\n)\n'


def test_the_same_lines_in_another_live_file_are_not_evidence(repo: Path, tmp_path: Path) -> None:
    """An import block reads alike in many files. The session that wrote app.go is the answer
    for it; one that wrote and read lib.go, which holds the same block, is not evidence for
    app.go's, and, later, used to come first on touches. Once lib.go is gone from the
    working tree it may be where app.go's lines came from (a rename), so it counts again."""
    app = "package app\n\n" + IMPORTS + "\nfunc Run(name string) error {\n\treturn exec.Command(name).Run()\n}\n"
    lib = "package app\n\n" + IMPORTS + "\nfunc Split(line string) []string {\n\treturn strings.Fields(line)\n}\n"
    (repo / "app.go").write_text(app)
    (repo / "lib.go").write_text(lib)
    from test_lineage import tape  # noqa: PLC0415

    writer = tape(tmp_path, "writer", "2026-01-01T00:00:00Z", [
        {"kind": "code.edit", "ts": "2026-01-01T00:00:01Z", "file": "app.go", "op": "create",
         "before_range": None, "after_range": [1, 12], "before_text": "", "after_text": app}])
    other = tape(tmp_path, "other", "2026-01-02T00:00:00Z", [
        {"kind": "tool.call", "ts": "2026-01-02T00:00:01Z", "call_id": "c1", "name": "Write",
         "input": {"file_path": "lib.go", "content": lib}},
        {"kind": "code.edit", "ts": "2026-01-02T00:00:01Z", "file": "lib.go", "op": "create",
         "before_range": None, "after_range": [1, 12], "before_text": "", "after_text": lib},
        {"kind": "code.read", "ts": "2026-01-02T00:00:02Z", "file": "lib.go", "range": [1, 12], "text": lib}])
    run_engram(repo, "ingest", str(writer), str(other))
    assert [s["session_id"] for s in explain(repo, "app.go:3-8", "--brief")["sessions"]] == ["writer"]
    assert [s["session_id"] for s in explain(repo, "lib.go:3-8", "--brief")["sessions"]] == ["other"]
    stdin = run_engram(repo, "explain", "--text", "-", "--brief", input=IMPORTS.encode())
    assert {s["session_id"] for s in json.loads(stdin.stdout)["sessions"]} == {"writer", "other"}
    (repo / "lib.go").unlink()
    assert {s["session_id"] for s in explain(repo, "app.go:3-8", "--brief")["sessions"]} == {"writer", "other"}


SET_UP = ['    with patch.dict("os.environ", {"AUDIO_DIR": str(tmp_path)}, clear=False):',
          '        request = SynthesisRequest(text="hello", voice="joanna", rate=90)',
          "        result = synthesize(request, output_dir=tmp_path)",
          "        assert result.path.parent == tmp_path",
          '        assert result.path.suffix == ".mp3"']


def explain_rank(repo: Path, span: str, rank: str) -> list[str]:
    return [s["session_id"] for s in explain(repo, span, "--brief", "--rank", rank)["sessions"]]


def test_another_file_that_holds_a_little_more_of_a_span_does_not_outrank_its_writer(repo: Path,
                                                                                     tmp_path: Path) -> None:
    """Test set-up reads alike across a suite. A session wrote test_output.py; a person then
    changed one of the span's lines, and a later session read two other test modules holding
    the same set-up with another line changed. Each read held a little more of the span than
    the writer's edit: matching the span no better than its own file's edit was not enough to
    drop them, so the reader (two touches, more recent) came first (punt-labs/langlearn-tts,
    `tests/test_output.py:19-21` edited on every line). Now another live file's match counts
    only when better than the own file's by more than the floor's band."""
    from test_lineage import tape

    rng = random.Random(3)
    names = ["voice", "rate", "pitch", "speed", "audio", "output", "engine", "cache", "region", "codec"]

    def filler(tag: str, n: int) -> list[str]:
        return [f"    {a}_{tag}{i} = configure_{b}({c}_{i}, limit={i * 3 + 1})"
                for i, (a, b, c) in enumerate(rng.sample(names, 3) for _ in range(n))]

    def module(head: list[str], changed: dict[int, str], tail: list[str]) -> str:
        return "\n".join(head + [changed.get(i, ln) for i, ln in enumerate(SET_UP)] + tail) + "\n"

    head, tail = filler("h", 8), filler("t", 8)
    now = module(head, {}, tail)
    written = module(head, {1: '        request = Request(text="hello", voice="amy", rate=90)'}, tail)
    others = {f"test_{x}.py": module(filler(x, 6), {4: '        assert result.path.suffix == ".wav"'}, filler(x, 4))
              for x in "ab"}
    (repo / "test_output.py").write_text(now)
    for name, text in others.items():
        (repo / name).write_text(text)
    writer = tape(tmp_path, "writer", "2026-01-01T00:00:00Z", [
        {"kind": "tool.call", "ts": "2026-01-01T00:00:01Z", "call_id": "w1", "name": "Write",
         "input": {"file_path": "test_output.py", "content": written}},
        {"kind": "code.edit", "ts": "2026-01-01T00:00:01Z", "file": "test_output.py", "op": "create",
         "call_id": "w1", "before_range": None, "after_range": [1, 21], "before_text": "", "after_text": written}])
    reader = tape(tmp_path, "reader", "2026-01-02T00:00:00Z", [
        ev for j, (name, text) in enumerate(others.items()) for ev in (
            {"kind": "tool.call", "ts": f"2026-01-02T00:00:0{2 * j + 1}Z", "call_id": f"r{j}", "name": "Read",
             "input": {"file_path": name}},
            {"kind": "code.read", "ts": f"2026-01-02T00:00:0{2 * j + 2}Z", "file": name, "range": [1, 15],
             "text": text, "call_id": f"r{j}"})])
    run_engram(repo, "ingest", str(writer), str(reader))

    def answer() -> dict[str, dict[str, float]]:
        doc = explain(repo, "test_output.py:9-13", "--brief")
        return {s["session_id"]: {f"{f['kind']} {f.get('file')}": f["confidence"] for f in s["fragments"]}
                for s in doc["sessions"]}

    assert list(answer()) == ["writer"]
    for name in others:  # gone from the tree, the modules may be where the lines came from: they count
        (repo / name).unlink()
    found = answer()
    assert list(found) == ["writer", "reader"]  # the writer first; by touches (two each) the later came first
    assert explain_rank(repo, "test_output.py:9-13", "touches") == ["reader", "writer"]
    edit = found["writer"]["code.edit test_output.py"]
    reads = [found["reader"][f"code.read {name}"] for name in others]
    assert all(edit < r <= edit / 0.8 for r in reads), (edit, reads)  # the case: better, within the band


def test_a_command_line_explain_answers_without_importing_numpy(spotter: Path,
                                                                spot_repo: tuple[Path, dict[str, str]]) -> None:
    """numpy's import is most of a command-line explain's time (50-100 ms here): a short span is
    answered without it, with the writing session first; a long one still uses it."""
    root, writer = spot_repo
    rel, a, b = spans_of_main(spotter, root, writer)[0]
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "engram.cli", "explain", f"{rel}:{a}-{b}"],
                          cwd=root, capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(proc.stdout)["sessions"][0]["session_id"] == SPOTTER_MAIN
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "engram.query.direct" in imported and "numpy" not in imported
    long_file = "lib/spotter_web/live/session_live.ex"
    n = len((root / long_file).read_text().splitlines())
    assert len((root / long_file).read_text()) > 16_384  # direct.SMALL_TEXT
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "engram.cli", "explain", f"{long_file}:1-{n}",
                           "--brief"], cwd=root, capture_output=True, text=True, timeout=120, check=True)
    assert "numpy" in {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
    assert json.loads(proc.stdout)["sessions"]


def test_a_damaged_tape_is_left_out_then_captured_again(spotter: Path, tmp_path: Path) -> None:
    """A tape file cut short on disk: explain says what to do; reindex moves that tape to the quarantine and
    keeps every other; the next ingest writes the tape again (it used to keep the damaged file,
    whose name it already had) and the session is explained again."""
    root = tmp_path / "repo"
    writer = build_spot_repo(spotter, root)
    rel, a, b = spans_of_main(spotter, root, writer)[0]
    other = next(r for r, s in sorted(writer.items()) if s != SPOTTER_MAIN and len((root / r).read_text()) > 400)
    tape = json.loads(run_engram(root, "tapes", "--json").stdout)
    main_tape = next(t["id"] for t in tape if t["session_id"] == SPOTTER_MAIN)
    path = next((root / ".engram" / "tapes").glob(f"{main_tape}*"))
    data = path.read_bytes()
    path.chmod(0o644)
    path.write_bytes(data[: len(data) // 2])

    proc = run_engram(root, "explain", f"{rel}:{a}-{b}", check=False)
    assert proc.returncode == 1 and "the tape is damaged: `engram reindex` moves it to .engram/quarantine/" in proc.stderr
    proc = run_engram(root, "reindex")
    assert f"moved 1 damaged tape to .engram/quarantine/ ({main_tape[:12]}): run `engram ingest`" in proc.stderr
    assert (root / ".engram" / "quarantine" / path.name).exists()
    assert SPOTTER_MAIN not in run_engram(root, "tapes").stdout
    n = len((root / other).read_text().splitlines())
    assert explain(root, f"{other}:1-{n}", "--brief")["sessions"][0]["session_id"] == SPOTTER_OTHER

    run_engram(root, "ingest", str(spotter))
    assert path.read_bytes() == data
    assert explain(root, f"{rel}:{a}-{b}")["sessions"][0]["session_id"] == SPOTTER_MAIN


def test_a_lost_or_damaged_index_is_rebuilt_from_the_tapes(spotter: Path, tmp_path: Path) -> None:
    """index.sqlite is a projection of the tapes: removed, explain says to rebuild it (not that
    the store is empty); overwritten with junk, explain says it is damaged (it raised
    NotADBError) and reindex sets it aside and rebuilds it."""
    root = tmp_path / "repo"
    writer = build_spot_repo(spotter, root)
    rel, a, b = spans_of_main(spotter, root, writer)[0]
    before = explain(root, f"{rel}:{a}-{b}", "--brief")
    index = root / ".engram" / "index.sqlite"
    for p in root.joinpath(".engram").glob("index.sqlite*"):
        p.unlink()
    proc = run_engram(root, "explain", f"{rel}:{a}-{b}", check=False)
    assert proc.returncode == 1 and "run `engram reindex` to rebuild it" in proc.stderr
    run_engram(root, "reindex")
    assert explain(root, f"{rel}:{a}-{b}", "--brief") == before

    junk = bytes(range(256)) * 64
    index.write_bytes(junk)
    for p in root.joinpath(".engram").glob("index.sqlite-*"):
        p.unlink()
    proc = run_engram(root, "explain", f"{rel}:{a}-{b}", check=False)
    assert proc.returncode == 1 and "is damaged" in proc.stderr and "Traceback" not in proc.stderr
    run_engram(root, "reindex")
    assert (root / ".engram" / "index.sqlite.damaged").read_bytes() == junk
    assert explain(root, f"{rel}:{a}-{b}", "--brief") == before


def _writer_and_reader(repo: Path, tmp_path: Path, reader_events: list[dict[str, Any]]) -> str:
    """`writer` wrote app.py (its Write call and the edit: two touches); `reader`, a day later,
    has the given events. Returns the code."""
    from test_lineage import tape

    code = "".join(f"def handler_{i}(request, context):\n    return dispatch(request, 'route_{i}', context)\n"
                   for i in range(4))
    (repo / "app.py").write_text(code)
    writer = tape(tmp_path, "writer", "2026-01-01T00:00:00Z", [
        {"kind": "tool.call", "ts": "2026-01-01T00:00:01Z", "call_id": "c1", "name": "Write",
         "input": {"file_path": "app.py", "content": code}},
        {"kind": "code.edit", "ts": "2026-01-01T00:00:01Z", "file": "app.py", "op": "create",
         "before_range": None, "after_range": [1, 8], "before_text": "", "after_text": code}])
    reader = tape(tmp_path, "reader", "2026-01-02T00:00:00Z",
                  [{**e, "text": code} if e["kind"] == "code.read" else e for e in reader_events])
    run_engram(repo, "ingest", str(writer), str(reader))
    return code


def test_a_session_that_read_a_file_again_and_again_touched_it_once(repo: Path, tmp_path: Path) -> None:
    """Agents re-read files all the time. Counted per read, a session that read the code three
    times came before the one that wrote it (two touches: its Write call and the edit), as on
    entire-bmad's planning documents; its reads of one file are one touch, all of them shown."""
    _writer_and_reader(repo, tmp_path, [
        {"kind": "code.read", "ts": f"2026-01-02T00:00:0{i}Z", "file": "app.py", "range": [1, 8]}
        for i in range(1, 4)])
    doc = explain(repo, "app.py:3-6", "--brief")
    assert [(s["session_id"], s["touches"], len(s["fragments"])) for s in doc["sessions"]] == [
        ("writer", 2, 2), ("reader", 1, 3)]


def test_rank_by_evidence_puts_the_writer_above_a_later_reader(repo: Path, tmp_path: Path) -> None:
    """By touches, then recency (the specification's order, `--rank touches`), a session that read the code in three
    files (two of them gone from the tree since) after another wrote it comes first.
    `--rank evidence` (or `explain.rank` in the settings) puts the strongest match first, and
    among equals the session that edited it."""
    _writer_and_reader(repo, tmp_path, [
        {"kind": "code.read", "ts": f"2026-01-02T00:00:0{i}Z", "file": f, "range": [1, 8]}
        for i, f in enumerate(["app.py", "old/app.py", "legacy/app.py"], 1)])

    def order(*args: str) -> list[tuple[str, int]]:
        doc = explain(repo, "app.py:3-6", "--brief", *args)
        return [(s["session_id"], s["touches"]) for s in doc["sessions"]]

    assert order() == [("writer", 2), ("reader", 3)]  # the writer first (the default rank)
    assert order("--rank", "touches") == [("reader", 3), ("writer", 2)]
    assert order("--rank", "evidence") == [("writer", 2), ("reader", 3)]
    assert explain(repo, "app.py:3-6", "--brief", "--rank", "evidence")["rank"] == "evidence"
    (repo / ".engram" / "config.toml").write_text('[explain]\nrank = "evidence"\n')
    assert order() == [("writer", 2), ("reader", 3)]
    assert order("--rank", "touches") == [("reader", 3), ("writer", 2)]
    (repo / ".engram" / "config.toml").write_text('[explain]\nrank = "best"\n')
    proc = run_engram(repo, "explain", "app.py:3-6", check=False)
    assert proc.returncode == 1 and "explain.rank = 'best': must be one of 'writer', 'touches', 'evidence'" in proc.stderr


def test_a_span_whose_own_fingerprints_are_all_stop_listed_is_not_given_to_a_chance_match(
        repo: Path, tmp_path: Path) -> None:
    """Two lines of common code (`let timer = null;` twice) whose winnowed fingerprints every
    session holding them shares, so the stop-list drops them all. What is left to search are
    k-grams a tape keeps only when the text around it happens to make the winnowing pick them:
    here a reader of another file kept one, and the writer none. One such k-gram is no whole
    match: the reader must not take the answer, and the lines are answered by their neighbours,
    which the writer wrote (found in planetfall-seed-signalkit's sessions, bench/README.md) — or,
    since no edit of app.js held any of them searched, by the writer's own edit of the file counted
    on the stop-listed ones (`ranking.own_file_share`)."""
    from test_lineage import tape

    from engram.anchor import definition

    common = "  let tutorialTimer = null;\n  let msgTimer = null;\n"
    words = "alpha beta gamma delta render frame panel score queue timer state scene input".split()

    def around(seed: int) -> str:
        r = random.Random(seed)
        def name() -> str:
            return f"{r.choice(words)}{r.randrange(999)}"

        pre = "".join(f"  {name()} = {name()}({name()}) + {name()}\n" for _ in range(3))
        post = "".join(f"  {name()}({name()}, {r.randrange(99)});\n" for _ in range(3))
        return pre + common + post

    def kept(text: str) -> set[int]:
        return definition.winnowed(definition.kgram_values(definition.token_hashes(text)))

    grams = definition.kgram_values(definition.token_hashes(common))
    by_chance = set(grams) - definition.winnowed(grams)
    reader_text = next(around(i) for i in range(1000) if kept(around(i)) & by_chance)
    plain = [t for t in map(around, range(1000, 2000)) if not kept(t) & by_chance][:3]
    writer_text = plain[0]

    (repo / ".engram" / "config.toml").write_text("[index]\nstoplist_share = 0.2\nstoplist_min_tapes = 3\n")
    (repo / "app.js").write_text(writer_text)
    ts = "2026-01-01T00:00:01Z"
    paths = [tape(tmp_path, "writer", "2026-01-01T00:00:00Z", [
        {"kind": "code.edit", "ts": ts, "file": "app.js", "op": "create", "before_range": None,
         "after_range": [1, 8], "before_text": "", "after_text": writer_text}])]
    for name, text in [("chance-reader", reader_text), ("reader-b", plain[1]), ("reader-c", plain[2])]:
        paths.append(tape(tmp_path, name, "2026-01-02T00:00:00Z", [
            {"kind": "code.read", "ts": "2026-01-02T00:00:01Z", "file": f"{name}.js", "range": [1, 8], "text": text}]))
    for i in range(10):
        other = "".join(f"def helper_{i}_{j}(value):\n    return value * {i + j}\n" for j in range(4))
        paths.append(tape(tmp_path, f"other-{i}", "2026-01-03T00:00:00Z", [
            {"kind": "code.read", "ts": "2026-01-03T00:00:01Z", "file": f"lib/h{i}.py", "range": [1, 8], "text": other}]))
    run_engram(repo, "ingest", *map(str, paths))

    doc = explain(repo, "app.js:4-5", "--brief")
    assert [s["session_id"] for s in doc["sessions"]][:1] == ["writer"], doc["sessions"]
    assert doc["sessions"][0]["wrote"] and {f["kind"] for f in doc["sessions"][0]["fragments"]} == {"code.edit"}
    assert all(s["session_id"] != "chance-reader" or max(f["confidence"] for f in s["fragments"]) < 0.5
               for s in doc["sessions"])


def test_a_span_edited_on_every_line_is_found_through_its_stop_listed_fingerprints(repo: Path,
                                                                                  tmp_path: Path) -> None:
    """A block of config that a third of the sessions read (a reviewer is sent the whole file) is
    stop-listed on a small store. Edited on every line, the span's own k-grams are mostly new and
    find nothing, and what is left of its writer's text is stop-listed: the span was answered by
    nobody (chikachow/cyspbot's token policy). Its winnowed k-grams finding nothing tells it is
    edited, and the stop-listed ones are then looked up after all — in plain Python (this
    command-line explain) and with numpy alike."""
    from test_lineage import db, tape

    from engram.anchor import definition
    from engram.index import layout

    rng = random.Random(5)
    words = ["permissions", "contents", "pull_requests", "principalRef", "principalRepository", "resource"]
    block = "".join(f'    {rng.choice(words)}_{i}: "{rng.choice(words)}/{rng.choice(words)}/{i}",\n' for i in range(10))
    edited = "".join(line + "\n" for line in _mutate_tokens(block.splitlines(), 0.3, rng))
    (repo / ".engram" / "config.toml").write_text("[index]\nstoplist_share = 0.2\nstoplist_min_tapes = 3\n")
    (repo / "policy.ts").write_text(edited)
    paths = [tape(tmp_path, "writer", "2026-01-01T00:00:00Z", [
        {"kind": "code.edit", "ts": "2026-01-01T00:00:01Z", "file": "policy.ts", "op": "create",
         "before_range": None, "after_range": [1, 10], "before_text": "", "after_text": block},
        {"kind": "code.read", "ts": "2026-01-01T00:00:02Z", "file": "policy.ts", "range": [1, 10], "text": block}])]
    for i in range(4):
        paths.append(tape(tmp_path, f"reviewer-{i}", "2026-01-02T00:00:00Z", [
            {"kind": "code.read", "ts": "2026-01-02T00:00:01Z", "file": "policy.ts", "range": [1, 10], "text": block}]))
    for i in range(10):
        other = "".join(f"def helper_{i}_{j}(value):\n    return value * {i + j}\n" for j in range(4))
        paths.append(tape(tmp_path, f"other-{i}", "2026-01-03T00:00:00Z", [
            {"kind": "code.read", "ts": "2026-01-03T00:00:01Z", "file": f"lib/h{i}.py", "range": [1, 8], "text": other}]))
    run_engram(repo, "ingest", *map(str, paths))
    own = {layout.key(fp) for fp in definition.winnowed(definition.kgram_values(definition.token_hashes(block)))}
    listed = {fp for (fp,) in db(repo).execute("SELECT fp FROM stoplist")}
    assert len(own & listed) > len(own) // 2  # most of the block is stop-listed

    doc = explain(repo, "policy.ts:1-10", "--brief")
    assert [s["session_id"] for s in doc["sessions"]][:1] == ["writer"], doc["sessions"]
    assert {f["kind"] for f in doc["sessions"][0]["fragments"]} == {"code.edit", "code.read"}
    (small, vec), = direct_both(repo, [edited], ["policy.ts"])
    assert small and list(small.items()) == list(vec.items())


def test_the_writer_of_a_span_changed_since_comes_before_the_sessions_that_read_it_later(repo: Path,
                                                                                          tmp_path: Path) -> None:
    """A session wrote a file (its Write call and the edit); a person then changed three of its
    lines, and three later sessions read the file as it is now. Their reads hold the whole span,
    the writer's edit a little less. The writer's call, holding what its edit holds, used to fall
    under the floor (0.8 of the reads) at a tool call's old weight, 0.85: the writer was left one
    touch like each reader, and came last, being the oldest (bids-standard/bids-utils,
    `src/bids_utils/migrate.py:40-60`, named its writer sixth of six)."""
    from test_lineage import tape

    rng = random.Random(7)
    names = ["load", "save", "merge", "split", "index", "lookup", "flush", "close"]
    lines: list[str] = []
    for i in range(8):
        a, b = rng.sample(names, 2)
        lines += [f"def {a}_{i}(store, key, limit={i + 2}):", f"    rows = store.{b}(key)[:limit]",
                  f"    return [row.{a} for row in rows if row.size > {i}]", ""]
    written = "\n".join(lines) + "\n"
    for n in (9, 13, 17):  # three helpers made to use the instance's store
        lines[n] = lines[n].replace("rows = store", "rows = self.store")
    now = "\n".join(lines) + "\n"
    (repo / "rows.py").write_text(now)
    paths = [tape(tmp_path, "writer", "2026-01-01T00:00:00Z", [
        {"kind": "tool.call", "ts": "2026-01-01T00:00:01Z", "call_id": "w1", "name": "Write",
         "input": {"file_path": "rows.py", "content": written}},
        {"kind": "code.edit", "ts": "2026-01-01T00:00:01Z", "file": "rows.py", "op": "create", "call_id": "w1",
         "before_range": None, "after_range": [1, 32], "before_text": "", "after_text": written}])]
    for i in range(3):
        paths.append(tape(tmp_path, f"reader-{i}", f"2026-01-0{i + 2}T00:00:00Z", [
            {"kind": "tool.call", "ts": f"2026-01-0{i + 2}T00:00:01Z", "call_id": f"r{i}", "name": "Read",
             "input": {"file_path": "rows.py"}},
            {"kind": "code.read", "ts": f"2026-01-0{i + 2}T00:00:02Z", "file": "rows.py", "range": [1, 32],
             "text": now, "call_id": f"r{i}"}]))
    run_engram(repo, "ingest", *map(str, paths))

    doc = explain(repo, "rows.py:5-24", "--brief")
    order = [s["session_id"] for s in doc["sessions"]]
    assert sorted(order) == ["reader-0", "reader-1", "reader-2", "writer"]
    best = {s["session_id"]: {f["kind"]: f["confidence"] for f in s["fragments"]} for s in doc["sessions"]}
    assert all(best[f"reader-{i}"] == {"code.read": 1.0} for i in range(3))
    edit = best["writer"]["code.edit"]
    assert 0.8 / 0.9 <= edit < 0.8 / 0.85  # the case: its call passes the floor at 0.9, not at 0.85
    assert order[0] == "writer" and doc["sessions"][0]["touches"] == 2
    assert best["writer"]["tool.call"] == pytest.approx(0.9 * edit, abs=1e-3)
    assert order[1:] == ["reader-2", "reader-1", "reader-0"]  # then the most recent touch
    (small, vec), = direct_both(repo, ["".join(f"{ln}\n" for ln in lines[4:24])], ["rows.py"])
    assert small and list(small.items()) == list(vec.items())


def test_a_resumed_session_does_not_take_the_work_it_copied(spotter: Path, tmp_path: Path) -> None:
    """`claude --resume` starts a new session file under a new id holding every record of the
    session it resumes. The work is the first session's: the resumed one must not be answered
    for it (it was, with the same touches, and first, being the more recent), but what it does
    after resuming is its own."""
    root = tmp_path / "repo"
    writer = build_spot_repo(spotter, root)
    rel, a, b = spans_of_main(spotter, root, writer)[0]
    resumed_id = "0f0f0f0f-aaaa-4bbb-8ccc-1234567890ab"
    src = (spotter / f"{SPOTTER_MAIN}.jsonl").read_text().splitlines()
    copy = [json.dumps({**json.loads(ln), "sessionId": resumed_id}) for ln in src if ln.strip()]
    last = json.loads(src[-1])
    path = session_cwd(spotter / f"{SPOTTER_MAIN}.jsonl") + rel
    text = (root / rel).read_text()
    base = {"sessionId": resumed_id, "cwd": last.get("cwd"), "version": last.get("version")}
    call = {**base, "type": "assistant", "uuid": "0f0f0f0f-0000-4000-8000-000000000001",
            "parentUuid": last.get("uuid"), "timestamp": "2026-03-01T10:00:00.000Z",
            "message": {"role": "assistant", "model": "claude-opus-4-6", "content": [
                {"type": "tool_use", "id": "toolu_resumed_read", "name": "Read", "input": {"file_path": path}}]}}
    result = {**base, "type": "user", "uuid": "0f0f0f0f-0000-4000-8000-000000000002",
              "parentUuid": call["uuid"], "timestamp": "2026-03-01T10:00:01.000Z",
              "message": {"role": "user", "content": [
                  {"type": "tool_result", "tool_use_id": "toolu_resumed_read", "content": text}]},
              "toolUseResult": {"type": "text", "file": {"filePath": path, "content": text, "numLines":
                                len(text.splitlines()), "startLine": 1, "totalLines": len(text.splitlines())}}}
    resumed = tmp_path / "resumed" / f"{resumed_id}.jsonl"
    resumed.parent.mkdir()
    resumed.write_text("\n".join([*copy, json.dumps(call), json.dumps(result)]) + "\n")
    run_engram(root, "ingest", str(resumed))

    doc = explain(root, f"{rel}:{a}-{b}", "--brief")
    by_id = {s["session_id"]: s for s in doc["sessions"]}
    assert doc["sessions"][0]["session_id"] == SPOTTER_MAIN
    assert any(f["kind"] == "code.edit" for f in by_id[SPOTTER_MAIN]["fragments"])
    own = by_id[resumed_id]["fragments"]  # only what it did after resuming: its read of the file
    assert {f["timestamp"] for f in own} <= {call["timestamp"], result["timestamp"]}
    assert "code.read" in {f["kind"] for f in own}

    # a text search finds the request once, in the session that made it
    hits = json.loads(run_engram(root, "search", "Implement spotter-gqc").stdout)["hits"]
    assert hits and {h["session_id"] for h in hits} == {SPOTTER_MAIN}

    # the editor's lenses count the same way: the resumed session touched the file once
    from engram.index.db import open_db
    from engram.query.regions import evidence_regions
    from engram.store.repo import Store

    db = open_db(Store(root))
    regions = [r for r in evidence_regions(db, text) if r.start <= a - 1 and r.end >= b - 1]
    db.close()
    assert regions
    for r in regions:
        order = [s.session_id for s in r.sessions]
        assert order.index(SPOTTER_MAIN) < order.index(resumed_id)
        assert [s.touches for s in r.sessions if s.session_id == resumed_id] == [1]


def test_debug_lists_the_ranking_rules_that_changed_the_answer(repo: Path, tmp_path: Path) -> None:
    """`--debug` adds `ranking`: the rules of engram.query.ranking that changed the answer, here
    own-file-first dropping lib.go's copy of app.go's import block; the document is otherwise the
    default one, which has no such field (agents and the editors read it as it is)."""
    app = "package app\n\n" + IMPORTS + "\nfunc Run(name string) error {\n\treturn exec.Command(name).Run()\n}\n"
    lib = "package app\n\n" + IMPORTS + "\nfunc Split(line string) []string {\n\treturn strings.Fields(line)\n}\n"
    (repo / "app.go").write_text(app)
    (repo / "lib.go").write_text(lib)
    from test_lineage import tape  # noqa: PLC0415

    writer = tape(tmp_path, "writer", "2026-01-01T00:00:00Z", [
        {"kind": "code.edit", "ts": "2026-01-01T00:00:01Z", "file": "app.go", "op": "create",
         "before_range": None, "after_range": [1, 12], "before_text": "", "after_text": app}])
    other = tape(tmp_path, "other", "2026-01-02T00:00:00Z", [
        {"kind": "code.edit", "ts": "2026-01-02T00:00:01Z", "file": "lib.go", "op": "create",
         "before_range": None, "after_range": [1, 12], "before_text": "", "after_text": lib}])
    run_engram(repo, "ingest", str(writer), str(other))

    plain = run_engram(repo, "explain", "app.go:3-8", "--brief").stdout
    default = json.loads(plain)
    assert "ranking" not in default and [s["session_id"] for s in default["sessions"]] == ["writer"]
    debug = explain(repo, "app.go:3-8", "--brief", "--debug")
    rules = {r["rule"]: r["effect"] for r in debug.pop("ranking")}
    assert "lib.go" in rules["own_file_first"] and "app.go" not in rules["own_file_first"]
    assert json.dumps(debug, indent=2) == json.dumps(default, indent=2)  # the same document, keys in order

    (repo / "lib.go").unlink()  # gone from the tree, lib.go may be where the lines came from: no rule drops it
    debug = explain(repo, "app.go:3-8", "--brief", "--debug")
    assert {s["session_id"] for s in debug["sessions"]} == {"writer", "other"}
    assert "own_file_first" not in {r["rule"] for r in debug["ranking"]}
    assert "writer_first" in {r["rule"] for r in debug["ranking"]}  # app.go's writer, then lib.go's by touches
    assert [s["session_id"] for s in debug["sessions"]] == ["writer", "other"]


def test_debug_names_a_resumed_sessions_copy_as_dropped(repo: Path, tmp_path: Path) -> None:
    """A session holding another's edit as a copy (same kind, time, file and lines; `claude
    --resume`) is answered only for what it did itself, and `--debug` says the copy was left out."""
    text = "".join(f"def step_{i}(value):\n    return transform_{i}(value) + offset_{i}\n" for i in range(6))
    (repo / "steps.py").write_text(text)
    from test_lineage import tape  # noqa: PLC0415

    edit = {"kind": "code.edit", "ts": "2026-01-01T00:00:01Z", "file": "steps.py", "op": "create",
            "before_range": None, "after_range": [1, 12], "before_text": "", "after_text": text}
    first = tape(tmp_path, "first", "2026-01-01T00:00:00Z", [edit])
    resumed = tape(tmp_path, "resumed", "2026-01-01T00:00:00Z", [
        edit, {"kind": "code.read", "ts": "2026-01-03T00:00:00Z", "file": "steps.py", "range": [1, 12], "text": text}])
    run_engram(repo, "ingest", str(first), str(resumed))

    doc = explain(repo, "steps.py:3-8", "--brief", "--debug")
    kinds = {s["session_id"]: [f["kind"] for f in s["fragments"]] for s in doc["sessions"]}
    assert kinds == {"first": ["code.edit"], "resumed": ["code.read"]}
    rules = {r["rule"]: r["effect"] for r in doc["ranking"]}
    assert rules["drop_copies"].startswith("1 fragment held only as a copy")
    assert "ranking" not in explain(repo, "steps.py:3-8", "--brief")


def test_debug_notes_are_the_same_in_plain_python_and_with_numpy(spotter: Path,
                                                                spot_repo: tuple[Path, dict[str, str]]) -> None:
    """The match's rules are noted from the same figures whichever way it runs (direct.py,
    direct_np.py), edited spans (weak evidence, the stop-list's rules) included."""
    from engram.anchor import definition, tokenize  # noqa: PLC0415
    from engram.index import snapshot  # noqa: PLC0415
    from engram.index.db import open_db  # noqa: PLC0415
    from engram.query.direct import direct_hits  # noqa: PLC0415
    from engram.query.ranking import Trace  # noqa: PLC0415
    from engram.store.repo import Store  # noqa: PLC0415

    root, _ = spot_repo
    rng = random.Random(5)
    spans = []
    for rel in sorted(created_by_main(spotter))[:12]:
        lines = (root / rel).read_text().splitlines()
        for size in (3, 30):
            if len(lines) > size:
                a = rng.randrange(len(lines) - size)
                spans += [("\n".join(lines[a:a + size]) + "\n", rel),
                          ("\n".join(_mutate_tokens(lines[a:a + size], 0.3, rng)) + "\n", rel)]
    db = open_db(Store.discover(root), readonly=True)
    try:
        snap = snapshot.read(db)
        fired = set()
        for text, rel in spans:
            small, vec = Trace(), Trace()
            direct_hits(db, text, tokens=definition.token_hashes(text), snap=snap, file=rel, trace=small)
            direct_hits(db, text, tokens=tokenize(text), snap=snap, file=rel, trace=vec)
            assert small.fired == vec.fired, text
            fired.update(r["rule"] for r in small.fired)
    finally:
        db.close()
    assert {"kind_weight", "floor_of", "winnowed_only"} <= fired


def test_explaining_a_moved_files_lines_finds_the_move_as_an_edit(tmp_path: Path) -> None:
    """A Codex patch that moves a file (`*** Move to:`) and rewrites part of it: explaining the
    rewritten lines at the new path finds the session through its edit of that path, not only
    through the patch's text in the call."""
    from test_codex import Rollout, custom_ok, patch  # noqa: PLC0415

    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    old = "".join(f"def legacy_{i}(rows):\n    return [r for r in rows if r.ok_{i}]\n" for i in range(8))
    (root / "src" / "legacy.py").write_text(old)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "base")
    head = git(root, "rev-parse", "HEAD").strip()
    scoring = [ln for i in range(4) for ln in (f"def score_{i}(rows, weight={i + 2}):",
                                                f"    total = sum(r.value_{i} * weight for r in rows)",
                                                f"    return round(total / max(len(rows), 1), {i % 3})")]
    body = [f"-{ln}" for ln in old.splitlines()[-4:]] + [f"+{ln}" for ln in scoring]
    rewrite = patch("*** Update File: src/legacy.py", "*** Move to: src/engine.py", "@@", *body)
    r = Rollout().meta(root, head).turn(root).message("user", "move legacy.py to engine.py and add scoring")
    r.custom("mv", rewrite, custom_ok("src/engine.py"))
    rollout = r.write(tmp_path / "sessions" / "rollout-2025-11-22T20-00-00-019a0000-0000-7000-8000-0000000000aa.jsonl")
    after = old.splitlines()[:-4] + [ln[1:] for ln in body if ln.startswith("+")]
    (root / "src" / "legacy.py").unlink()
    (root / "src" / "engine.py").write_text("\n".join(after) + "\n")
    run_engram(root, "init")
    run_engram(root, "ingest", str(rollout))
    start = len(old.splitlines()) - 4 + 1
    doc = explain(root, f"src/engine.py:{start}-{start + 7}", "--brief")
    first = doc["sessions"][0]
    assert first["session_id"] == "019a0000-0000-7000-8000-0000000000aa"
    edits = [f for f in first["fragments"] if f["kind"] == "code.edit"]
    assert edits and edits[0]["file"] == "src/engine.py", first["fragments"]


def test_a_session_that_rewrote_a_file_and_kept_most_of_it_wrote_only_what_it_changed(repo: Path,
                                                                                     tmp_path: Path) -> None:
    """One session wrote app.py; a day later another rewrote it whole with a Write that changed
    three of its lines. The rewrite held every line, but a kept line is not its writing: it is
    answered there without an edit (its lines were `code.carried`, as read), and the writer's
    edit is there; on a line it changed, the rewrite is the edit."""
    from claude_shapes import Session, code_lines, joined

    cwd = Path("/home/u/proj")
    lines = ["def run(config):", *code_lines("m", 28), "    return config"]
    writer = Session(cwd, "aaaaaaaa-1111-4111-8111-000000000001", day="2026-03-01")
    writer.prompt("write app.py")
    writer.write("app.py", joined(lines))
    rewriter = Session(cwd, "bbbbbbbb-2222-4222-8222-000000000002", day="2026-03-02", files=dict(writer.files))
    new = [*lines]
    new[4] = "    limit = clamp_limit(config.limit, floor=10, ceiling=config.ceiling)"
    new[25:27] = ["    total = accumulate_totals(config.values, start=config.offset)"]
    rewriter.prompt("tidy app.py")
    rewriter.write("app.py", joined(new))
    (repo / "app.py").write_text(joined(new))
    run_engram(repo, "ingest", "--map", f"{cwd}={repo}", str(writer.save(tmp_path / "t")),
               str(rewriter.save(tmp_path / "t")))

    def kinds(span: str) -> dict[str, set[str]]:
        doc = explain(repo, span, "--brief")
        return {s["session_id"][:1]: {f["kind"] for f in s["fragments"]} for s in doc["sessions"]}

    kept = kinds("app.py:12-16")
    assert "code.edit" in kept["a"]
    assert "code.edit" not in kept["b"] and "code.carried" in kept["b"]
    changed = kinds("app.py:5-5")
    assert "code.edit" in changed["b"] and "code.edit" not in changed.get("a", set())


def _fixture_test(name: str, tool: str, path: str) -> list[str]:
    """A test of the shape real TypeScript suites are full of: short lines, most of them
    punctuation and a key or two."""
    return [f'\tit("{name}", async () => {{', "\t\tconst transcript = renderTranscript([",
            "\t\t\tJSON.stringify({", '\t\t\t\ttype: "assistant",', "\t\t\t\tmessage: {", "\t\t\t\t\tcontent: [",
            "\t\t\t\t\t\t{", '\t\t\t\t\t\t\ttype: "tool_use",', f'\t\t\t\t\t\t\tname: "{tool}",',
            f'\t\t\t\t\t\t\tinput: {{ path: "{path}" }},', "\t\t\t\t\t\t},", "\t\t\t\t\t],", "\t\t\t\t},",
            "\t\t\t}),", "\t\t]);", f'\t\texpect(transcript.calls).toEqual(["{tool}"]);', "\t});", ""]


def test_a_renamed_span_is_answered_in_its_own_file_before_another_files_copy(repo: Path, tmp_path: Path) -> None:
    """One session wrote a test file, a second added a test to it and changed two of its lines, four
    later sessions read the file; a fifth wrote another test file in a native format (`kind`,
    `args`). A person then renamed keys on five short lines of the added test to the native names.
    What is left of the five lines matches the native test's edit better than anything of their own
    file, and that session alone was the answer, the writer nowhere (savekirk/session-bridge,
    `src/test/checkpoints/transcript.test.ts`, 20% of tokens renamed). The span's own evidence is
    what its own file's edits and reads hold of it: weak, so explain takes in the lines around it,
    and the writer's edit holds the wider span as well as the reads do."""
    from claude_shapes import Session, joined

    cwd = Path("/home/u/ext")
    head = ['import { describe, expect, it } from "vitest";', 'import { renderTranscript } from "../transcript";',
            "", 'describe("renderTranscript", () => {']
    first = [*head, *_fixture_test("lists a read", "Read", "src/a.ts"),
             *_fixture_test("lists a search", "Grep", "src/b.ts"), "});"]
    author = Session(cwd, "aaaaaaaa-1111-4111-8111-000000000001", day="2026-03-01")
    author.prompt("write tests for renderTranscript")
    author.write("src/transcript.test.ts", joined(first))
    writer = Session(cwd, "bbbbbbbb-2222-4222-8222-000000000002", day="2026-03-02", files=dict(author.files))
    writer.prompt("cover ReadFile calls too")
    added = _fixture_test("lists a ReadFile call", "ReadFile", "src/checkpoints/store.ts")
    writer.edit("src/transcript.test.ts", "\t});\n\n});\n", "\t});\n\n" + joined(added) + "});\n")
    writer.prompt("the store moved")
    writer.edit("src/transcript.test.ts",
                'type: "tool_use",\n\t\t\t\t\t\t\tname: "ReadFile",\n\t\t\t\t\t\t\tinput: { path: "src/checkpoints/store.ts" },',
                'type: "function_call",\n\t\t\t\t\t\t\tname: "ReadFile",\n\t\t\t\t\t\t\tinput: { path: "src/checkpoints/store/index.ts" },')
    transcripts = [author.save(tmp_path / "t"), writer.save(tmp_path / "t")]
    for i in range(4):
        reader = Session(cwd, f"cccccccc-3333-4333-8333-00000000000{i}", day=f"2026-03-0{i + 3}",
                         files=dict(writer.files))
        reader.prompt("what does the transcript test check?")
        reader.read("src/transcript.test.ts")
        transcripts.append(reader.save(tmp_path / "t"))
    native = Session(cwd, "dddddddd-4444-4444-8444-000000000004", day="2026-03-09")
    native.prompt("test the native transcript parser")
    native.write("src/nativeTranscript.test.ts", joined([
        'import { expect, it } from "vitest";', 'import { parseNative } from "../nativeTranscript";', "",
        'it("parses a native call", () => {', "\tconst calls = parseNative([", "\t\t{", '\t\t\tkind: "function_call",',
        '\t\t\tname: "readFile",', '\t\t\targs: { path: "src/native/index.ts" },', "\t\t},",
        "\t]);", '\texpect(calls[0].name).toBe("readFile");', "});"]))
    transcripts.append(native.save(tmp_path / "t"))
    now = writer.files["src/transcript.test.ts"].splitlines()
    a = now.index('\t\t\t\t\t\t\ttype: "function_call",')  # the added test's span: 5 short lines
    now[a - 1:a + 4] = ["\t\t\t\t\t\t{", '\t\t\t\t\t\t\tkind: "function_call",', '\t\t\t\t\t\t\tname: "readFile",',
                        '\t\t\t\t\t\t\targs: { path: "src/checkpoints/stores/index.ts" },', "\t\t\t\t\t\t},"]
    (repo / "src").mkdir()
    (repo / "src/transcript.test.ts").write_text(joined(now))
    run_engram(repo, "ingest", "--map", f"{cwd}={repo}", *map(str, transcripts))

    doc = explain(repo, f"src/transcript.test.ts:{a}-{a + 4}", "--brief")
    top = doc["sessions"][0]
    assert top["session_id"] == writer.session_id
    assert any(f["kind"] == "code.edit" and f["file"] == "src/transcript.test.ts" for f in top["fragments"])
    assert doc["widened"]["why"] == "weak-evidence"
    span = doc["span"]
    assert a - 3 <= span["start"] < a and a + 4 < span["end"] <= a + 7
    assert native.session_id in {s["session_id"] for s in doc["sessions"]}  # still listed, after the writer
    pretty = run_engram(repo, "explain", f"src/transcript.test.ts:{a}-{a + 4}", "--brief", "--pretty").stdout
    assert f"lines {a}-{a + 4} widened to {span['start']}-{span['end']}" in pretty


def test_a_one_line_edit_is_not_widened_away_from_its_session(repo: Path, tmp_path: Path) -> None:
    """One session wrote a parser module; a later session added one clause to it with an Edit. The
    Edit's call holds the new line and the one it kept, so it outranks the one-line code.edit and
    sets a floor the edit falls just under. Judged on what passed the floor, the span had no
    evidence in its own file: explain took in a line above, where the first session's Write holds
    more, and the session that added the clause came second (marot/spotter's parser, resumed in
    tests/test_session_identity.py). An edit of the file that changed a line of the span is its
    own evidence: the span is answered as asked, the clause's author first."""
    from claude_shapes import Session

    cwd = Path("/home/u/spotter")
    parser = ("defmodule Spotter.Transcripts.Parser do\n  @moduledoc \"Reads session files line by line.\"\n\n"
              "  def parse(path) do\n    path\n    |> File.stream!()\n    |> Stream.map(&Jason.decode!/1)\n"
              "    |> Enum.reject(&progress?/1)\n  end\n\n  defp progress?(%{\"type\" => \"progress\"}), do: true\n"
              "  defp progress?(_), do: false\nend\n")
    author = Session(cwd, "aaaaaaaa-1111-4111-8111-000000000001", day="2026-02-11")
    author.prompt("Write a parser for session files")
    author.write("lib/parser.ex", parser)
    clause = Session(cwd, "bbbbbbbb-2222-4222-8222-000000000002", day="2026-02-12", files=dict(author.files))
    clause.prompt("Also skip file-history-snapshot records")
    clause.edit("lib/parser.ex", "  defp progress?(_), do: false",
                "  defp progress?(%{\"type\" => \"file-history-snapshot\"}), do: true\n  defp progress?(_), do: false")
    (repo / "lib").mkdir()
    (repo / "lib/parser.ex").write_text(clause.files["lib/parser.ex"])
    run_engram(repo, "ingest", "--map", f"{cwd}={repo}", str(author.save(tmp_path / "t")), str(clause.save(tmp_path / "t")))

    doc = explain(repo, "lib/parser.ex:12-14", "--brief")
    assert doc["widened"] is None and (doc["span"]["start"], doc["span"]["end"]) == (12, 14)
    assert doc["sessions"][0]["session_id"] == clause.session_id
    assert explain(repo, "lib/parser.ex:1-9", "--brief")["sessions"][0]["session_id"] == author.session_id


def _release_steps() -> list[str]:
    """A release workflow's checks, as GitHub Actions files repeat them from job to job."""
    return ["      - name: Check the tag", "        run: |", '          if [ -z "$RELEASE_TAG" ]; then',
            '            echo "::error::RELEASE_TAG is not set"', "            exit 1", "          fi",
            '          if ! git tag --points-at HEAD | grep -qx "$RELEASE_TAG"; then',
            '            echo "::error::Publish checkout must point at $RELEASE_TAG; tags at HEAD are:"',
            "            git tag --points-at HEAD || true", "            exit 1", "          fi",
            "      - name: Set up Node", "        uses: actions/setup-node@v4", "        with:",
            "          node-version: 22", "          registry-url: https://registry.npmjs.org"]


def test_a_copy_added_elsewhere_in_the_file_does_not_take_the_lines_it_copied(repo: Path, tmp_path: Path) -> None:
    """One session wrote a publish workflow; a later one put a verify job above it, made of a copy
    of the publish job's checks and their neighbours, and changed the publish job's last step in the
    same Edit, keeping its checks. The later session's edit holds the original checks as fully as
    the writer's does, and their neighbours too, and it is the latest: it came first for lines it
    never changed (EntityProcess/agentv, `.github/workflows/publish.yml`, Codex). Where its added
    lines landed tells them apart: its hunk lies over the copy, which the file still holds there,
    and the original lines are lines that edit kept."""
    from claude_shapes import Session, joined

    cwd = Path("/home/u/rel")
    head = ["name: publish", "on:", "  push:", "    tags: ['v*']", "jobs:"]
    job = ["  publish:", "    runs-on: ubuntu-latest", "    steps:", "      - uses: actions/checkout@v4",
           *_release_steps(), "      - run: npm ci", "      - run: npm publish --provenance"]
    writer = Session(cwd, "aaaaaaaa-1111-4111-8111-000000000001", day="2026-03-01")
    writer.prompt("add a publish workflow")
    writer.write(".github/workflows/publish.yml", joined([*head, *job]))
    copier = Session(cwd, "bbbbbbbb-2222-4222-8222-000000000002", day="2026-03-02", files=dict(writer.files))
    copier.prompt("verify the tag in a job of its own before publishing")
    verify = ["  verify:", "    runs-on: ubuntu-latest", "    steps:", "      - uses: actions/checkout@v4",
              *_release_steps()]
    published = [*job[:-1], "      - run: npm publish --provenance --access public"]
    copier.edit(".github/workflows/publish.yml", joined(["jobs:", *job]), joined(["jobs:", *verify, *published]))
    now = copier.files[".github/workflows/publish.yml"]
    (repo / ".github/workflows").mkdir(parents=True)
    (repo / ".github/workflows/publish.yml").write_text(now)
    run_engram(repo, "ingest", "--map", f"{cwd}={repo}", str(writer.save(tmp_path / "t")),
               str(copier.save(tmp_path / "t")))

    lines = now.splitlines()
    at = [i + 1 for i, line in enumerate(lines) if "Publish checkout must point" in line]
    assert len(at) == 2  # the copy, then the original
    for start in (at[1] - 2, at[1]):
        doc = explain(repo, f".github/workflows/publish.yml:{start}-{start + 4}", "--brief")
        assert [s["session_id"] for s in doc["sessions"]][:2] == [writer.session_id, copier.session_id], start
    copy = explain(repo, f".github/workflows/publish.yml:{at[0] - 2}-{at[0] + 2}", "--brief")
    assert copy["sessions"][0]["session_id"] == copier.session_id


def test_the_writer_of_a_file_many_sessions_read_is_found_though_its_text_is_stop_listed(repo: Path,
                                                                                        tmp_path: Path) -> None:
    """One session created stats.go with a Write; a later one changed a line next to a struct
    (an Edit whose context holds the struct's first line), and five more read the file whole. The
    file's text is then in more tapes than the stop-list allows, and a 5-line span of the struct
    held no searched fingerprint of its writer's Write: the answer was the readers and the
    carrier, the writer absent (entireio/git-sync, 99 sessions: stats.go, auth.go, incremental.go,
    read by 16-38 sessions each). An edit of the span's own file counts its stop-listed
    fingerprints too: the writer comes first, in plain Python and with numpy alike."""
    from claude_shapes import Session, joined

    from engram.anchor import definition
    from engram.index import layout
    from test_lineage import db

    cwd = Path("/home/u/proj")
    struct = ["// ServiceStats tracks transfer statistics for a single service.", "type ServiceStats struct {",
              '\tName          string `json:"name"`', '\tRequests      int    `json:"requests"`',
              '\tBytes         int64  `json:"bytes"`', "}"]
    lines = ["package syncer", "", 'import "sync"', "", *struct, "",
             "func (s *ServiceStats) Add(n int64) {", "\ts.Requests++", "\ts.Bytes += n", "}"]
    (repo / ".engram" / "config.toml").write_text("[index]\nstoplist_share = 0.2\nstoplist_min_tapes = 3\n")
    writer = Session(cwd, "aaaaaaaa-1111-4111-8111-000000000001", day="2026-04-11")
    writer.prompt("add per-service transfer statistics")
    writer.write("stats.go", joined(lines))
    carrier = Session(cwd, "bbbbbbbb-2222-4222-8222-000000000002", day="2026-04-12", files=dict(writer.files))
    carrier.prompt("import sync/atomic")
    carrier.edit("stats.go", 'import "sync"\n', 'import (\n\t"sync"\n\t"sync/atomic"\n)\n')
    sessions = [writer, carrier]
    for i in range(5):
        reader = Session(cwd, f"cccccccc-3333-4333-8333-00000000000{i}", day=f"2026-04-2{i}",
                         files=dict(carrier.files))
        reader.prompt("how are transfers counted?")
        reader.read("stats.go")
        sessions.append(reader)
    (repo / "stats.go").write_text(carrier.files["stats.go"])
    run_engram(repo, "ingest", "--map", f"{cwd}={repo}", *(str(s.save(tmp_path / "t")) for s in sessions))
    span = joined(carrier.files["stats.go"].splitlines()[7:12])  # lines 8-12: the comment to Bytes
    keys = {layout.key(fp) for fp in definition.kgram_values(definition.token_hashes(span))}
    listed = {fp for (fp,) in db(repo).execute("SELECT fp FROM stoplist")}
    assert len(keys & listed) > len(keys) // 2  # most of the span is stop-listed

    doc = explain(repo, "stats.go:8-12", "--brief")
    assert [s["session_id"][:1] for s in doc["sessions"]][:1] == ["a"], doc["sessions"]
    assert doc["sessions"][0]["wrote"]
    (small, vec), = direct_both(repo, [span], ["stats.go"])
    assert small and list(small.items()) == list(vec.items())
