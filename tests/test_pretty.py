"""`engram explain --pretty` answers the question (issue 46, point 2): per session, writer first, who
it was, the person's request, the agent's words around the edit and the edit as a diff, on a real
session's edit (spotter 4d5611e5 rewrote `visible_lines` in transcript_computers.ex at event #222);
the hover and the editors' explain document render the same story as markdown."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import SPOTTER_OTHER, build_spot_repo, run_engram

from engram.query.render import explain_markdown, explain_markdown_lines, explain_pretty

FILE = "lib/spotter_web/live/transcript_computers.ex"
JARGON = re.compile(r"via (direct|lineage)|confidence|touch\(es\)|session\(s\)|\d+ sessions? \(s\)|tool\.call|code\.edit")


@pytest.fixture(scope="module")
def spot(spotter: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pretty") / "repo"
    writers = build_spot_repo(spotter, root)
    assert writers[FILE] == SPOTTER_OTHER
    return root


def span(spot: Path) -> tuple[int, int]:
    lines = (spot / FILE).read_text().splitlines()
    at = next(i for i, line in enumerate(lines, 1) if "Enum.reject(rendered_lines, fn line ->" in line)
    return at - 2, at + 17


def test_pretty_tells_who_asked_what_and_shows_the_edit(spot: Path) -> None:
    a, b = span(spot)
    out = run_engram(spot, "explain", f"{FILE}:{a}-{b}", "--pretty", env={"NO_COLOR": "1"}).stdout
    assert "\x1b[" not in out  # NO_COLOR (and not a terminal): no colour
    lines = out.splitlines()
    assert lines[0] == f"Why {FILE}:{a}-{b}?  1 session"
    assert lines[2] == ("1. wrote these lines — Claude Code · claude-opus-4-6 · 2026-02-12 20:28 UTC · "
                        f"session {SPOTTER_OTHER[:8]}")
    text = "\n".join(lines)
    # The request that led to the edit: "continue", after the longer one that started the work.
    assert re.search(r"^   asked +Work on bead spotter-dov", text, re.M)
    assert re.search(r"^   then asked +continue$", text, re.M)
    assert re.search(r"^   before +Now I have the full picture\. Let me implement all the pieces", text, re.M)
    assert re.search(r"^   edit +lib/spotter_web/live/transcript_computers\.ex, event #222$", text, re.M)
    diff = [line.strip() for line in lines if line.startswith(" " * 14)]
    assert "@@ -39,4 +39,5 @@" in diff
    assert "-rendered_lines" in [d.replace(" ", "") for d in diff]  # what it replaced ...
    assert "+Enum.reject(rendered_lines, fn line ->" in [d[0] + d[1:].strip() for d in diff]  # ... with what
    assert re.search(r"^   after +Now update the shared transcript component", text, re.M)
    assert re.search(r"^   then +Bash ran: Compiling 76 files", text, re.M)
    assert re.search(r"^   see +engram view [0-9a-f]{12}@222 --full$", text, re.M)
    assert not JARGON.search(text), JARGON.search(text)


def test_colour_on_a_terminal_and_the_same_story_as_markdown(spot: Path) -> None:
    a, b = span(spot)
    doc = json.loads(run_engram(spot, "explain", f"{FILE}:{a}-{b}").stdout)
    coloured = explain_pretty(doc, color=True)
    assert "\x1b[32m+" in coloured and "\x1b[31m-" in coloured and "\x1b[1;32mwrote these lines" in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == explain_pretty(doc)
    md, targets = explain_markdown_lines(doc)
    text = "\n".join(md)
    assert md[0] == f"# Why `{FILE}:{a}-{b}`?" and "1 session." in md
    head = next(i for i, line in enumerate(md) if line.startswith("**1. "))
    assert md[head] == "**1. Wrote these lines** · Claude Code · claude-opus-4-6 · 2026-02-12 20:28 UTC"
    assert md[head + 2] == f"session `{SPOTTER_OTHER}`"  # whole: people resume the session with it
    assert targets[head][1] == 222  # an editor opens the transcript at the edit from the heading
    assert "**Asked:**\n> Work on bead spotter-dov" in text and "**Then asked:**\n> continue" in text
    assert "```diff\n@@ -39,4 +39,5 @@" in text and "+        Enum.reject(rendered_lines, fn line ->" in text
    assert not JARGON.search(text)
    links = explain_markdown(doc, link=lambda label, tape, off: f"[{label}](x:{off})", heading=False)
    assert "UTC · [open transcript at #222](x:222)" in links and "[whole transcript](x:-1)" in links
    assert not links.startswith("# Why")
    short = explain_markdown(doc, diff_lines=3)
    assert "+        Enum.reject(rendered_lines" not in short and "more diff lines" in short


def test_a_reader_is_one_line_per_file_and_plurals_are_right(spot: Path) -> None:
    lines = (spot / "lib/spotter_web/live/session_live.ex").read_text().splitlines()
    out = run_engram(spot, "explain", f"lib/spotter_web/live/session_live.ex:60-{min(79, len(lines))}", "--pretty",
                     "--no-color").stdout
    assert re.search(r"^Why \S+\?  \d+ sessions?(, \d+ of which wrote them)?$", out.splitlines()[0])
    reads = [line for line in out.splitlines() if "also" in line and "read lib/spotter_web/live/session_live.ex" in line]
    assert reads and all(re.search(r", \d+ times  #\d+$|  #\d+$", line) for line in reads)
    assert "1 times" not in out and "1 sessions" not in out
    assert not JARGON.search(out)


def test_a_whole_file_s_region_heads_do_not_contradict_the_sessions_under_them() -> None:
    """`engram explain FILE`: a region line by line blame gives no writer, but whose span explain
    matches, said "no recorded session" above "1. wrote these lines"; one line reads `line 194`,
    not `lines 194-194`."""
    from engram.query.render import explain_file_pretty

    session = {"tape": "ab" * 32, "session_id": "258c7280-ae70", "harness": "claude-code", "model": None,
               "touches": 1, "last_touch": "2026-02-11T21:04:10Z", "wrote": True, "fragments": []}
    doc = {"file": "a.ex", "regions": [
        {"lines": [1, 3], "session_id": None, "explain": {"span": {"file": "a.ex", "start": 1, "end": 3},
                                                           "sessions": [session], "widened": None}},
        {"lines": [4, 9], "session_id": "258c7280-ae70", "harness": "claude-code", "when": "2026-02-11T21:29:42Z",
         "request": "Add the button", "explain": None},
        {"lines": [10, 10], "session_id": None, "explain": {"span": {"file": "a.ex", "start": 10, "end": 10},
                                                             "sessions": [], "widened": None}}]}
    heads = [line for line in explain_file_pretty(doc).splitlines() if line.startswith("── ")]
    assert heads == ["── lines 1-3: no edit found line by line; the sessions that match",
                     '── lines 4-9: 258c7280 · Claude Code · 2026-02-11 21:29 UTC · "Add the button"',
                     "── line 10: no recorded session"]
