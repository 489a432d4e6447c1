"""A bounded explain (issue 46, point 1): windows clipped to the span's lines, an answer within its
token budget that says what it left out and pages on, on the real spotter sessions."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from conftest import SPOTTER_MAIN, build_spot_repo, created_by, run_engram

from engram.query.budget import TOKEN_BYTES, Unit, page
from engram.query.clip import SpanWords, clip_code, clip_message


@pytest.fixture(scope="module")
def spot(spotter: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bounded") / "repo"
    build_spot_repo(spotter, root)
    return root


def spans_20(spotter: Path, root: Path) -> list[tuple[str, int, int]]:
    """20-line spans in the middle of the files the main session created (and nobody changed)."""
    out = []
    for rel, content in sorted(created_by(spotter, SPOTTER_MAIN).items()):
        lines = content.splitlines()
        if (root / rel).read_text() == content and len(lines) >= 30:
            a = len(lines) // 2 - 10
            out.append((rel, a, a + 19))
    return out


def explain(root: Path, *args: str) -> tuple[dict[str, Any], int]:
    out = run_engram(root, "explain", *args).stdout
    return json.loads(out), len(out.encode())


def test_answers_stay_within_the_budget_and_keep_the_writer_first(spotter: Path, spot: Path) -> None:
    spans = spans_20(spotter, spot)
    assert len(spans) >= 5
    for rel, a, b in spans:
        doc, size = explain(spot, f"{rel}:{a}-{b}")
        full, full_size = explain(spot, f"{rel}:{a}-{b}", "--budget", "0", "--full")
        assert doc["budget"]["tokens"] == 4000 and doc["budget"]["used"] <= 4000, rel
        assert size <= 4000 * TOKEN_BYTES + 1, (rel, size)  # compact JSON when stdout is not a terminal
        assert doc["sessions"][0]["session_id"] == full["sessions"][0]["session_id"] == SPOTTER_MAIN, rel
        assert full_size > size, rel


def test_a_read_is_clipped_to_the_span_and_the_event_names_how_to_see_it_whole(spotter: Path, spot: Path) -> None:
    rel, a, b = max(spans_20(spotter, spot), key=lambda s: len((spot / s[0]).read_text()))
    doc, _ = explain(spot, f"{rel}:{a}-{b}", "--budget", "0")
    events = [e for s in doc["sessions"] for f in s["fragments"] for e in f.get("window", [])]
    clipped = [e for e in events if e.get("full")]
    assert clipped, "a whole-file text in the windows was clipped"
    e = next(e for e in clipped if e["kind"] in ("code.read", "code.edit", "tool.call"))
    text = e.get("text") or e.get("after_text") or e["input"].get("content") or e["input"].get("new_string")
    assert "⋯ line" in text and "cut ⋯" in text
    span_line = (spot / rel).read_text().splitlines()[a + 4].strip()
    assert span_line in text, "the span's own lines are what is kept"
    assert e["full"].startswith("engram view ") and e["full"].endswith(f"@{e['offset']} --full")
    assert "id" not in e and "parent" not in e  # identifiers and hashes are left out of a clipped window
    whole = json.loads(run_engram(spot, *shlex.split(e["full"])[1:]).stdout)
    assert [x["offset"] for x in whole["events"]] == [e["offset"]]
    assert len(json.dumps(whole["events"][0])) > 2 * len(json.dumps(e))


def test_truncated_says_what_was_left_and_the_next_pages_show_it(spotter: Path, spot: Path) -> None:
    rel, a, b = spans_20(spotter, spot)[0]
    full, _ = explain(spot, f"{rel}:{a}-{b}", "--budget", "0")
    everything = {(s["session_id"], f["offset"], f["kind"], tuple(f["lines"] or ())) for s in full["sessions"]
                  for f in s["fragments"]}
    doc, size = explain(spot, f"{rel}:{a}-{b}", "--budget", "700")
    assert size <= 700 * TOKEN_BYTES + 1
    t = doc["truncated"]
    assert t["left_out"] and set(t["left_out"]) <= {"sessions", "stories", "fragments", "windows"}
    assert t["next"] == f"engram explain {rel}:{a}-{b} --budget 700 --page 2"
    assert doc["sessions"][0]["session_id"] == SPOTTER_MAIN and doc["sessions"][0]["wrote"]
    first = doc["sessions"][0]
    assert first["story"]["edit"]["diff"]  # the writer's edit and request are what is kept first
    assert not any(f.get("window") for s in doc["sessions"][1:] for f in s["fragments"])  # readers' come later
    seen: set[tuple[Any, ...]] = set()
    windows: set[tuple[Any, ...]] = set()
    pages = 0
    while True:
        pages += 1
        for s in doc["sessions"]:
            for f in s["fragments"]:
                key = (s["session_id"], f["offset"], f["kind"], tuple(f["lines"] or ()))
                seen.add(key)
                if f.get("window"):
                    windows.add(key)
        if not doc["truncated"]:
            break
        assert pages < 40
        nxt = shlex.split(doc["truncated"]["next"])
        assert nxt[:2] == ["engram", "explain"] and nxt[-2:] == ["--page", str(pages + 1)]
        doc, size = explain(spot, *nxt[2:])
        assert doc["page"] == pages + 1 and (size <= 700 * TOKEN_BYTES + 1 or doc["budget"].get("over"))
    assert pages > 1 and seen == everything
    assert {k[:2] for k in windows} == {k[:2] for k in everything}  # every touch's window, on some page
    # the page after the last is an error, not an empty answer that reads as "no session" (a whole file too)
    past = run_engram(spot, "explain", f"{rel}:{a}-{b}", "--budget", "700", "--page", str(pages + 1), "--json",
                      check=False)
    assert past.returncode == 1 and f"page {pages + 1}: past the end of this answer" in past.stderr, past.stdout
    past = run_engram(spot, "explain", rel, "--json", "--page", "99", check=False)
    assert past.returncode == 1 and "page 99: past the end of this answer" in past.stderr, past.stdout


def test_clip_finds_an_edited_copy_of_the_span_and_keeps_a_head_without_it() -> None:
    body = [f"    value_{i} = compute_{i}(alpha_{i}, beta_{i})" for i in range(300)]
    span = "\n".join(body[150:160]) + "\n"
    edited = body[:150] + [line.replace("beta", "gamma") for line in body[150:160]] + body[160:]
    text, cut = clip_code("\n".join(edited), SpanWords(span))
    kept = text.split("\n")
    assert cut and kept[0] == "⋯ lines 1-147 cut ⋯" and kept[-1] == "⋯ lines 164-300 cut ⋯"
    assert kept[1:-1] == edited[147:163]  # the span's 10 lines and 3 on each side
    other, cut = clip_code("\n".join(f"unrelated {i} words here" for i in range(100)), SpanWords(span))
    assert cut and other.split("\n")[-1] == "⋯ lines 7-100 cut ⋯" and len(other.split("\n")) == 7
    short, cut = clip_code("a\nb\nc\n", SpanWords(span))
    assert (short, cut) == ("a\nb\nc\n", False)


def test_a_long_message_is_trimmed_around_what_it_says_of_the_span() -> None:
    span = "def parse_header(stream, limit):\n    return stream.read(limit)\n"
    msg = "x " * 800 + "I changed parse_header so that stream.read gets the limit. " + "y " * 800
    out, cut = clip_message(msg, SpanWords(span))
    assert cut and "parse_header" in out and out.startswith("⋯ ") and out.endswith(" characters cut ⋯")
    assert len(out) < 1200
    head, cut = clip_message("z " * 800, SpanWords(span))
    assert cut and head.startswith("z z") and head.endswith("characters cut ⋯")


def test_pages_show_every_unit_once_in_order_of_weight() -> None:
    sizes = {"s0": 50, "story0": 100, "f0": 30, "w0": 400, "s1": 50, "f1": 30, "w1": 300}
    needs = {"story0": "s0", "f0": "s0", "w0": "f0", "f1": "s1", "w1": "f1"}
    units = [Unit(k, k.rstrip("01"), needs.get(k), lambda k=k: sizes[k]) for k in sizes]
    shown: list[str] = []
    n = 1
    while True:
        p = page(units, 500, n)
        assert sum(sizes[k] for k in p.shown) == p.used and (p.used <= 500 or p.over)
        assert all(needs.get(k) is None or needs[k] in p.shown for k in p.shown)  # each page reads on its own
        shown += [str(k) for k in p.new]
        if not p.left:
            break
        n += 1
    assert sorted(shown) == sorted(sizes) and len(shown) == len(set(shown))
    assert page(units, 500, 1).new == ["s0", "story0", "f0", "s1", "f1"]  # the windows did not fit beside them
    assert page(units, 100, 1).over is False and page(units, 10, 1).over  # nothing fits: the first unit anyway


def test_text_for_people_keeps_to_the_budget_and_says_how_to_see_the_rest(spotter: Path, spot: Path) -> None:
    """A terminal does not prove a person reads the answer (an agent's shell may be a
    pseudo-terminal): explain's text keeps to the budget too, in whole lines, and its last line
    says how much it left out and the command that prints all of it."""
    rel = max(created_by(spotter, SPOTTER_MAIN), key=lambda r: len((spot / r).read_text()))
    whole = run_engram(spot, "explain", rel, "--pretty", "--budget", "0").stdout
    assert len(whole.encode()) > 300 * TOKEN_BYTES
    cut = run_engram(spot, "explain", rel, "--pretty", "--budget", "300").stdout
    lines = cut.splitlines()
    assert len("\n".join(lines[:-1]).encode()) <= 300 * TOKEN_BYTES
    assert whole.startswith("\n".join(lines[:-1]))  # whole lines, the first ones
    left = len(whole.splitlines()) - (len(lines) - 1)
    assert lines[-1] == (f"… {left} more lines (~{lines[-1].split('~')[1].split()[0]} tokens) left out of the "
                         f"300-token budget: engram explain {shlex.quote(rel)} --pretty --budget 0 (all of it); "
                         "--page 2: the next page")


def test_text_for_people_is_read_page_by_page_as_the_hint_says(spotter: Path, spot: Path) -> None:
    """`--page N` with `--pretty` prints the Nth page of the text (it printed page 1 again, whatever
    N was): the pages, in order, are the whole text, each within the budget; a page past the last
    is one error line."""
    rel = max(created_by(spotter, SPOTTER_MAIN), key=lambda r: len((spot / r).read_text()))
    whole = run_engram(spot, "explain", rel, "--pretty", "--budget", "0").stdout.splitlines()
    shown: list[str] = []
    for n in range(1, 200):
        lines = run_engram(spot, "explain", rel, "--pretty", "--budget", "300", "--page", str(n)).stdout.splitlines()
        last = lines and lines[-1].startswith("… ") and lines[-1].endswith(f"; --page {n + 1}: the next page")
        body = lines[:-1] if last else lines
        assert len("\n".join(body).encode()) <= 300 * TOKEN_BYTES and body
        shown += body
        if not last:
            break
    assert n > 2 and shown == whole
    past = run_engram(spot, "explain", rel, "--pretty", "--budget", "300", "--page", str(n + 1), check=False)
    assert past.returncode == 1 and past.stdout == ""
    assert past.stderr.strip() == f"engram: --page {n + 1}: the answer has {n} pages at a 300-token budget"
