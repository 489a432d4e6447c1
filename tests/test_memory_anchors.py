"""Anchors against real edits of real files in a git repository: what `resolve` says after the
code shifted, moved, was reformatted, edited or deleted, and what `capture` refuses."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import git, run_engram
from test_lineage import db, edit, ingest, tape

from engram.anchor.definition import token_hashes
from engram.errors import BadInput
from engram.memory.anchors import Anchor, capture, git_head, resolve, split_lines, tracked_files

PARSER = '''\
import re


def parse_header(raw_line):
    """Split an HTTP header line into its name and value."""
    name, sep, value = raw_line.partition(":")
    if not sep:
        raise ValueError(f"not a header: {raw_line!r}")
    return name.strip().lower(), value.strip()


def merge_headers(first, second):
    """Headers of `second` override those of `first`, names compared without case."""
    merged = {key.lower(): val for key, val in first.items()}
    for key, val in second.items():
        merged[key.lower()] = val
    return merged


def retry_delay(attempt, base_delay=0.5, ceiling=30.0):
    """Exponential backoff with a ceiling, for the transport's retries."""
    if attempt < 0:
        raise ValueError("attempt must be non-negative")
    delay = base_delay * (2 ** attempt)
    jitter = (attempt * 7919) % 13 / 100.0
    return min(ceiling, delay + jitter)


def content_length(headers):
    """The body's length from the headers, or None when absent or malformed."""
    value = headers.get("content-length")
    if value is None or not value.isdigit():
        return None
    return int(value)
'''


def lines_of(text: str, start: int, end: int) -> str:
    return "".join(line + "\n" for line in split_lines(text)[start - 1:end])


def find(text: str, needle: str) -> int:
    """1-based line of the first line holding `needle`."""
    return next(i for i, line in enumerate(split_lines(text), 1) if needle in line)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "http.py").write_text(PARSER)
    (root / "pkg" / "util.py").write_text("def unrelated_helper(x):\n    return x * 2\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "parser")
    return root


def retry_span(root: Path) -> Anchor:
    start = find(PARSER, "def retry_delay")
    return capture(root, "pkg/http.py", start, start + 6)


def test_capture_keeps_place_text_fingerprints_and_head(repo: Path) -> None:
    a = retry_span(repo)
    assert (a.file, a.end - a.start) == ("pkg/http.py", 6)
    assert a.text.startswith("def retry_delay(") and a.text.endswith("return min(ceiling, delay + jitter)\n")
    assert a.text_hash.startswith("sha256:") and len(a.fingerprints) > 5
    assert a.head == git(repo, "rev-parse", "HEAD").strip() == git_head(repo)


def test_to_json_round_trips_through_a_json_log_line(repo: Path) -> None:
    a = retry_span(repo)
    line = json.dumps(a.to_json())
    assert Anchor.from_json(json.loads(line)) == a
    doc = json.loads(line)
    assert doc["v"] == 1 and isinstance(doc["fingerprints"], str), "no int64 that a JSON reader would round"
    with pytest.raises(BadInput, match="'start' must be a int"):
        Anchor.from_json({**doc, "start": "7"})
    with pytest.raises(BadInput, match="newer than this engram"):
        Anchor.from_json({**doc, "v": 99})


def test_unchanged_code_is_intact_in_place(repo: Path) -> None:
    a = retry_span(repo)
    r = resolve(repo, a)
    assert (r.state, r.file, r.start, r.end, r.retained) == ("intact", a.file, a.start, a.end, 1.0)


def test_lines_added_above_shift_an_intact_span(repo: Path) -> None:
    a = retry_span(repo)
    path = repo / "pkg" / "http.py"
    path.write_text("import logging\nlog = logging.getLogger(__name__)\n\n" + PARSER)
    r = resolve(repo, a)
    assert (r.state, r.start, r.end) == ("intact", a.start + 3, a.end + 3)
    assert lines_of(path.read_text(), r.start, r.end) == a.text


def test_code_moved_within_its_file_is_moved(repo: Path) -> None:
    a = retry_span(repo)
    text = PARSER
    block = lines_of(text, a.start, a.end + 2)  # the function and the two blank lines after it
    moved = text.replace(block, "")
    moved = moved.replace("import re\n\n\n", "import re\n\n\n" + block)  # now the first function
    (repo / "pkg" / "http.py").write_text(moved)
    r = resolve(repo, a)
    assert r.state == "moved" and r.file == a.file
    assert (r.start, r.end) == (4, 10) and lines_of(moved, r.start, r.end) == a.text


def test_code_moved_to_another_file_is_found_there(repo: Path) -> None:
    a = retry_span(repo)
    block = lines_of(PARSER, a.start, a.end)
    (repo / "pkg" / "http.py").write_text(PARSER.replace(block, ""))
    backoff = "\"\"\"Retry policies.\"\"\"\n\nMAX_ATTEMPTS = 5\n\n\n" + block
    (repo / "pkg" / "backoff.py").write_text(backoff)
    git(repo, "add", "pkg/backoff.py")  # tracked: the cross-file search looks at git's index
    r = resolve(repo, a)
    assert (r.state, r.file, r.start, r.end) == ("moved", "pkg/backoff.py", 6, 12)


LICENCE = """\
# Copyright 2026 The Example Authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS.
"""


def test_a_deleted_files_licence_header_is_not_moved_to_the_files_sharing_it(repo: Path) -> None:
    for name in ("client", "server", "proxy"):
        (repo / "pkg" / f"{name}.py").write_text(LICENCE + f"\n\ndef {name}_main():\n    return '{name}'\n")
    git(repo, "add", "pkg")
    a = capture(repo, "pkg/client.py", 1, 10)
    (repo / "pkg" / "client.py").unlink()
    git(repo, "rm", "-q", "--cached", "pkg/client.py")
    r = resolve(repo, a)
    assert (r.state, r.start) == ("vanished", None), "text every file has says nothing of where this code went"
    assert r.best_partial is not None and r.best_partial["file"] in ("pkg/server.py", "pkg/proxy.py")
    assert r.best_partial["retained"] == 1.0


@pytest.mark.parametrize(("edit", "state"), [("one name", "edited"), ("a fifth of the tokens", "vanished")])
def test_code_moved_to_another_file_must_keep_most_of_its_tokens_there(repo: Path, edit: str, state: str) -> None:
    a = retry_span(repo)
    block = lines_of(PARSER, a.start, a.end)
    (repo / "pkg" / "http.py").write_text(PARSER.replace(block, ""))
    moved = block.replace("jitter", "spread") if edit == "one name" else twenty_percent_edit(block)
    (repo / "pkg" / "backoff.py").write_text("\"\"\"Retry policies.\"\"\"\n\nMAX_ATTEMPTS = 5\n\n\n" + moved)
    git(repo, "add", "pkg/backoff.py")
    r = resolve(repo, a)
    assert r.state == state
    if state == "edited":
        assert (r.file, r.start, r.end) == ("pkg/backoff.py", 6, 12) and 0.85 <= r.retained < 1.0
    else:  # no old place or neighbours vouch for a match in another file: 0.8 of the tokens is too little
        assert r.best_partial == {"file": "pkg/backoff.py", "start": 6, "end": 12, "retained": 0.8}


def test_reindented_and_rewrapped_code_is_intact(repo: Path) -> None:
    a = retry_span(repo)
    body = lines_of(PARSER, a.start, a.end)
    wrapped = body.replace("def retry_delay(attempt, base_delay=0.5, ceiling=30.0):",
                           "def retry_delay(\n        attempt,\n        base_delay=0.5,\n        ceiling=30.0):")
    reindented = "class Transport:\n" + "".join("    " + line + "\n" if line else "\n"
                                                  for line in split_lines(wrapped))
    (repo / "pkg" / "http.py").write_text(PARSER.replace(body, reindented))
    r = resolve(repo, a)
    assert r.state == "intact" and r.retained == 1.0
    new = (repo / "pkg" / "http.py").read_text()
    assert "def retry_delay(" in split_lines(new)[r.start - 1] and "return min(" in split_lines(new)[r.end - 1]


def test_a_fifth_of_the_tokens_edited_is_edited_with_the_share_retained(repo: Path) -> None:
    a = retry_span(repo)
    body = lines_of(PARSER, a.start, a.end)
    edited = twenty_percent_edit(body)
    old, new = token_hashes(body), token_hashes(edited)
    assert len(old) == len(new) and sum(x != y for x, y in zip(old, new)) / len(old) == 0.2, "a fifth of the tokens"
    (repo / "pkg" / "http.py").write_text(PARSER.replace(body, edited))
    r = resolve(repo, a)
    assert r.state == "edited" and (r.file, r.start, r.end) == (a.file, a.start, a.end)
    assert r.retained == 0.8, "every line changed, four tokens in five are still there"


REWRITTEN = '''def retry_delay(attempt, base_delay=0.5, ceiling=30.0, jitter=True):
    """Exponential backoff with a ceiling and optional jitter, for the transport's retries."""
    if attempt < 0 or base_delay <= 0:
        raise ValueError("attempt must be non-negative and base_delay positive")
    delay = min(ceiling, base_delay * (2 ** attempt))
    return delay + (attempt * 7919) % 13 / 100.0 if jitter else delay
'''
ONE_LINE = '''def retry_delay(attempt, base_delay=0.5, ceiling=30.0):
    """Exponential backoff with a ceiling, for the transport's retries."""
    if attempt < 0:
        raise ValueError(f"attempt must be non-negative, not {attempt}")
    delay = base_delay * (2 ** attempt)
    jitter = (attempt * 7919) % 13 / 100.0
    return min(ceiling, delay + jitter)
'''


def test_code_rewritten_on_every_line_vanishes_naming_what_is_left_of_it(repo: Path) -> None:
    """Git's line tracking calls a span whose lines were all rewritten dead, even when most of
    its words are still there: the note is about code that is gone, so it says vanished, and
    names the rewrite (its place, the share of tokens and of lines kept) for the reader to judge."""
    a = retry_span(repo)
    (repo / "pkg" / "http.py").write_text(PARSER.replace(a.text, REWRITTEN))
    r = resolve(repo, a)
    assert (r.state, r.start) == ("vanished", None)
    assert r.best_partial is not None and (r.best_partial["file"], r.best_partial["start"]) == (a.file, a.start)
    assert r.best_partial["retained"] > 0.8, "most tokens are still there: not what decides"
    assert r.best_partial["lines_kept"] == 0.0


def test_a_light_edit_stays_edited(repo: Path) -> None:
    """One line of seven changed, or a fifth of the tokens renamed on every line (the test above):
    the code is still there, edited."""
    a = retry_span(repo)
    (repo / "pkg" / "http.py").write_text(PARSER.replace(a.text, ONE_LINE))
    r = resolve(repo, a)
    assert (r.state, r.file, r.start, r.end, r.best_partial) == ("edited", a.file, a.start, a.end, None)
    (repo / "pkg" / "http.py").write_text(PARSER.replace(a.text, twenty_percent_edit(a.text)))
    assert resolve(repo, a).state == "edited", "every line changed, but by renames"
    (repo / "pkg" / "http.py").write_text(PARSER)
    signature = capture(repo, "pkg/http.py", a.start, a.start)
    (repo / "pkg" / "http.py").write_text(PARSER.replace("base_delay=0.5", "base_delay=0.25"))
    r = resolve(repo, signature)
    assert (r.state, r.start) == ("edited", a.start), "a note on one line: a default value changed"


def test_deleted_code_vanishes(repo: Path) -> None:
    a = retry_span(repo)
    (repo / "pkg" / "http.py").write_text(PARSER.replace(lines_of(PARSER, a.start, a.end), ""))
    r = resolve(repo, a)
    assert (r.state, r.file, r.start, r.end) == ("vanished", a.file, None, None)
    assert r.retained < 0.5


def test_a_deleted_file_vanishes_without_error(repo: Path) -> None:
    a = retry_span(repo)
    (repo / "pkg" / "http.py").unlink()
    assert resolve(repo, a).state == "vanished"


def test_an_unsaved_buffer_is_read_instead_of_the_disk(repo: Path) -> None:
    a = retry_span(repo)
    buffer = "# a comment typed, not saved\n" + PARSER
    r = resolve(repo, a, buffers={"pkg/http.py": buffer})
    assert (r.state, r.start) == ("intact", a.start + 1)
    gone = resolve(repo, a, buffers={"pkg/http.py": PARSER.replace(a.text, "")})
    assert gone.state == "vanished", "the buffer wins even though the disk still holds the code"
    b = capture(repo, "pkg/http.py", 1, 1, text=buffer)
    assert b.text == "# a comment typed, not saved\n"


def test_a_long_buffer_being_typed_in_finds_its_notes_near_their_place_as_a_whole_search_does(repo: Path) -> None:
    """The language server resolves a touched note of a long buffer near its place first
    (`nearby`): the answer must be the whole search's, and code moved far away is still found."""
    filler = "".join(f"value_{i} = compute_{i % 97}(value_{i - 1}, {i})\n" for i in range(1, 3001))
    text = filler + PARSER + filler.replace("value_", "other_")
    (repo / "pkg" / "http.py").write_text(text)
    start = find(text, "def retry_delay")
    a = capture(repo, "pkg/http.py", start, start + 6)
    body = lines_of(text, a.start, a.end)
    typed = {"pkg/http.py": "x = 1\n" + text.replace(body, twenty_percent_edit(body))}
    near, whole = (resolve(repo, a, buffers=typed, nearby=flag) for flag in (True, False))
    assert near == whole and (near.state, near.start, near.end, near.retained) == ("edited", a.start + 1, a.end + 1, 0.8)
    far = {"pkg/http.py": text.replace(body, "") + twenty_percent_edit(body)}
    near, whole = (resolve(repo, a, buffers=far, nearby=flag) for flag in (True, False))
    assert near == whole and near.state == "edited" and near.start > 6000, "moved beyond the window: the whole text"


def test_refused_paths_and_ranges_say_what_to_do(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.py"
    outside.write_text("password = 'x'\n")
    with pytest.raises(BadInput, match="outside the repository"):
        capture(repo, str(outside), 1, 1)
    with pytest.raises(BadInput, match="outside the repository"):
        capture(repo, "../secret.py", 1, 1)
    os.symlink(outside, repo / "pkg" / "link.py")
    with pytest.raises(BadInput, match="symbolic link that leads out"):
        capture(repo, "pkg/link.py", 1, 1)
    n = len(split_lines(PARSER))
    with pytest.raises(BadInput, match=rf"past the end of the file \({n} lines\); anchor lines within 1-{n}"):
        capture(repo, "pkg/http.py", n - 1, n + 5)
    with pytest.raises(BadInput, match="an empty range"):
        capture(repo, "pkg/http.py", 9, 4)
    with pytest.raises(BadInput, match="no such file in the working tree"):
        capture(repo, "pkg/missing.py", 1, 2)
    with pytest.raises(BadInput, match="only blank lines"):
        capture(repo, "pkg/http.py", 2, 3)
    (repo / "blob.bin").write_bytes(b"\x00\x01binary\n")
    with pytest.raises(BadInput, match="a binary file"):
        capture(repo, "blob.bin", 1, 1)


def test_resolve_never_reads_through_a_link_out_of_the_repository(repo: Path, tmp_path: Path) -> None:
    a = retry_span(repo)
    outside = tmp_path / "elsewhere.py"
    outside.write_text(PARSER)
    (repo / "pkg" / "http.py").unlink()
    os.symlink(outside, repo / "pkg" / "http.py")
    forged = Anchor.from_json({**a.to_json(), "file": "../elsewhere.py"})
    assert resolve(repo, a).state == "vanished"
    assert resolve(repo, forged).state == "vanished"


@pytest.mark.parametrize("version", ["2", "3", "4"])
def test_tracked_files_read_from_each_index_version(repo: Path, version: str) -> None:
    (repo / "pkg" / "deep").mkdir()
    (repo / "pkg" / "deep" / "name with spaces.py").write_text("x = 1\n")
    git(repo, "add", "-N", "pkg/deep/name with spaces.py")  # intent-to-add sets an extended flag (v3)
    git(repo, "update-index", "--index-version", version)
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=repo, capture_output=True, check=True).stdout
    assert tracked_files(repo) == [p.decode() for p in listed.split(b"\0") if p]


def twenty_percent_edit(body: str) -> str:
    return (body.replace("base_delay", "initial").replace("ValueError", "RuntimeError").replace("7919", "104729")
            .replace("jitter", "spread").replace("attempt", "tries").replace("ceiling", "cap")
            .replace("0.5", "0.25").replace("100.0", "1000.0"))


def test_with_the_index_the_session_whose_edit_changed_the_code_is_named(repo: Path, tmp_path: Path) -> None:
    run_engram(repo, "init")
    a = retry_span(repo)
    old = split_lines(a.text)
    new = split_lines(twenty_percent_edit(a.text))
    ingest(repo, tape(tmp_path, "writer", "2026-01-01T00:00:00Z",
                      [edit("pkg/http.py", [], split_lines(PARSER), "2026-01-01T00:00:01Z", op="create")]),
           tape(tmp_path, "fixer", "2026-01-02T00:00:00Z",
                [edit("pkg/http.py", old, new, "2026-01-02T00:00:01Z", line=a.start)]))
    (repo / "pkg" / "http.py").write_text(PARSER.replace(a.text, twenty_percent_edit(a.text)))
    index = db(repo)
    r = resolve(repo, a, db=index)
    assert (r.state, r.session) == ("edited", "fixer")
    assert r.edit is not None and r.edit["timestamp"] == "2026-01-02T00:00:01Z"
    assert resolve(repo, retry_span(repo), db=index).session is None, "intact: nothing to explain"


def test_an_edit_older_than_the_note_is_not_named_as_what_changed_its_code(repo: Path, tmp_path: Path) -> None:
    """A session that wrote the code's earlier form months before the note was taken is history
    the note already saw: when the code is put back to that form by hand afterwards, that session
    did not change it (it was named, with its old edit, as if it had)."""
    run_engram(repo, "init")
    a = retry_span(repo)
    earlier = twenty_percent_edit(a.text)
    ingest(repo, tape(tmp_path, "writer", "2026-01-01T00:00:00Z",
                      [edit("pkg/http.py", [], split_lines(PARSER.replace(a.text, earlier)), "2026-01-01T00:00:01Z",
                            op="create"),
                       edit("pkg/http.py", split_lines(earlier), split_lines(a.text), "2026-01-01T00:00:02Z",
                            line=a.start)]))
    nid = json.loads(run_engram(repo, "remember", "retry delays are capped", "--at",
                                f"pkg/http.py:{a.start}-{a.end}", "--json").stdout)["id"]
    (repo / "pkg" / "http.py").write_text(PARSER.replace(a.text, earlier))  # by hand, after the note
    place = json.loads(run_engram(repo, "memory", "show", nid, "--json").stdout)["anchors"][0]
    assert place["state"] == "edited" and place.get("session") is None, place
    assert resolve(repo, a, db=db(repo)).session == "writer", "without the note's time, the old edit is all there is"


def test_with_the_index_a_move_and_a_deletion_name_their_sessions(repo: Path, tmp_path: Path) -> None:
    run_engram(repo, "init")
    a = retry_span(repo)
    body = split_lines(a.text)
    backoff = ["MAX_ATTEMPTS = 5", "", "", *body]
    ingest(repo, tape(tmp_path, "writer", "2026-01-01T00:00:00Z",
                      [edit("pkg/http.py", [], split_lines(PARSER), "2026-01-01T00:00:01Z", op="create")]),
           tape(tmp_path, "mover", "2026-01-02T00:00:00Z",
                [edit("pkg/http.py", body, [], "2026-01-02T00:00:01Z", line=a.start),
                 edit("pkg/backoff.py", [], backoff, "2026-01-02T00:00:02Z", op="create")]))
    (repo / "pkg" / "http.py").write_text(PARSER.replace(a.text, ""))
    (repo / "pkg" / "backoff.py").write_text("".join(line + "\n" for line in backoff))
    index = db(repo)
    moved = resolve(repo, a, db=index)  # backoff.py is untracked: found through the index's sessions
    assert (moved.state, moved.file, moved.start, moved.session) == ("moved", "pkg/backoff.py", 4, "mover")
    (repo / "pkg" / "backoff.py").unlink()
    ingest(repo, tape(tmp_path, "remover", "2026-01-03T00:00:00Z",
                      [edit("pkg/backoff.py", backoff, [], "2026-01-03T00:00:01Z")]))
    gone = resolve(repo, a, db=index)
    assert (gone.state, gone.session) == ("vanished", "remover"), "the last edit that deleted it"


def test_a_renamed_file_is_followed(repo: Path) -> None:
    a = retry_span(repo)
    git(repo, "mv", "pkg/http.py", "pkg/transport.py")
    r = resolve(repo, a)
    assert (r.state, r.file, r.start, r.end) == ("moved", "pkg/transport.py", a.start, a.end)


def test_a_crlf_checkout_keeps_its_anchors_intact(repo: Path) -> None:
    a = retry_span(repo)
    (repo / "pkg" / "http.py").write_bytes(PARSER.replace("\n", "\r\n").encode())
    assert (resolve(repo, a).state, resolve(repo, a).start) == ("intact", a.start)


def test_an_anchor_whose_text_was_purged_still_resolves_by_its_fingerprints(repo: Path) -> None:
    a = retry_span(repo)
    purged = Anchor.from_json({**a.to_json(), "text": ""})
    (repo / "pkg" / "http.py").write_text("# one more line\n" + PARSER)
    r = resolve(repo, purged)
    assert (r.state, r.start, r.end) == ("intact", a.start + 1, a.end + 1)
    (repo / "pkg" / "http.py").write_text(PARSER.replace(a.text, ""))
    assert resolve(repo, purged).state == "vanished"


def test_recall_at_code_finds_the_memories_on_the_code_its_lineage_came_from(repo: Path, tmp_path: Path) -> None:
    """A person copied retry_delay into backoff.py and a session rewrote it there: the index's
    lineage links that edit to the session that wrote the original in http.py, so a memory
    anchored on the original comes back for the copy (and one on unrelated code does not)."""
    run_engram(repo, "init")
    a = retry_span(repo)
    body = split_lines(a.text)
    header = ['"""Retry policies."""', "", "MAX_ATTEMPTS = 5", "", ""]
    ingest(repo, tape(tmp_path, "writer", "2026-01-01T00:00:00Z",
                      [edit("pkg/http.py", [], split_lines(PARSER), "2026-01-01T00:00:01Z", op="create")]),
           tape(tmp_path, "fixer", "2026-01-02T00:00:00Z",
                [edit("pkg/backoff.py", body, split_lines(twenty_percent_edit(a.text)), "2026-01-02T00:00:01Z",
                      line=len(header) + 1)]))
    (repo / "pkg" / "backoff.py").write_text("".join(line + "\n" for line in header) + twenty_percent_edit(a.text))
    about = json.loads(run_engram(repo, "remember", "retry delays stay under the transport's 30 s timeout",
                                  "--at", f"pkg/http.py:{a.start}-{a.end}", "--json").stdout)["id"]
    other = json.loads(run_engram(repo, "remember", "the helper doubles its argument",
                                  "--at", "pkg/util.py:1-2", "--json").stdout)["id"]
    at = f"pkg/backoff.py:{len(header) + 1}-{len(header) + len(body)}"
    found = [m["id"] for m in json.loads(run_engram(repo, "recall", "", "--at", at, "--json").stdout)["memories"]]
    assert found == [about] and other not in found


SETTINGS_HEAD = "import os\n\nfrom .pool import Backoff, ConnectionPool, Retry, RetryPolicy, Timeout\n\n"
SETTINGS_TAIL = "\n\ndef settings():\n    return {k: v for k, v in globals().items() if k.isupper()}\n"
SETTINGS = ("DEFAULT_TIMEOUT = Timeout(connect=3.05, read=30)\n\n"
            "DEFAULT_RETRIES = Retry(total=3, status_forcelist=(502, 503))\n\n"
            "DEFAULT_BACKOFF = Backoff(factor=0.5, maximum=120)\n\n"
            "DEFAULT_POOL = ConnectionPool(maxsize=10, block=False)\n")
PACKED = ("DEFAULT_TIMEOUT = Timeout(connect=3.05, read=30)\n"
          "RETRY_POLICY = RetryPolicy(total=5, backoff=Backoff.EXPONENTIAL)\n"
          "POOL = ConnectionPool(maxsize=os.cpu_count())\n"
          "DEFAULT_POOL = ConnectionPool(maxsize=10, block=False)\n")


def test_blank_lines_of_deleted_code_are_not_counted_kept(tmp_path: Path) -> None:
    """Half a span's lines blank, the code between them deleted and the rest packed together (jq's
    deleted struct): the blank lines went with the code (git's line tracking calls the span dead),
    so the note says vanished; a blank line counts as kept only where the match has one too."""
    (tmp_path / "pkg").mkdir()
    config = tmp_path / "pkg" / "config.py"
    config.write_text(SETTINGS_HEAD + SETTINGS + SETTINGS_TAIL)
    a = capture(tmp_path, "pkg/config.py", 5, 11)
    assert a.text == SETTINGS
    config.write_text(SETTINGS_HEAD + PACKED + SETTINGS_TAIL)
    r = resolve(tmp_path, a)
    assert (r.state, r.start) == ("vanished", None), "2 of 7 lines left: 2 lines of code, no blank line"
    assert r.best_partial is not None and r.best_partial["lines_kept"] < 0.5
    config.write_text(SETTINGS_HEAD + SETTINGS.replace("maximum=120", "maximum=60") + SETTINGS_TAIL)
    assert resolve(tmp_path, a).state == "edited", "one value changed: the blank lines are still there"


SPEC = '''describe Rack::Protection::SessionHijacking do
  it_behaves_like "any rack application"

  it "accepts a session without changes to tracked parameters" do
    session = {:foo => :bar}
    get '/', {}, 'rack.session' => session
    get '/', {}, 'rack.session' => session
    expect(session[:foo]).to eq(:bar)
  end

  it "accepts requests with the same Accept-Language header" do
    session = {:foo => :bar}
    get '/', {}, 'rack.session' => session, 'HTTP_ACCEPT_LANGUAGE' => 'a'
    get '/', {}, 'rack.session' => session, 'HTTP_ACCEPT_LANGUAGE' => 'a'
    expect(session).not_to be_empty
  end

  it "ignores a different HTTP version between two requests" do
    session = {:foo => :bar}
    get '/', {}, 'rack.session' => session, 'HTTP_VERSION' => '1.0'
    get '/', {}, 'rack.session' => session, 'HTTP_VERSION' => '1.1'
    expect(session[:foo]).to eq(:bar)
  end
end
'''


def test_a_deleted_test_is_not_found_in_its_siblings_boilerplate(tmp_path: Path) -> None:
    """A test deleted from a spec (sinatra's session_hijacking_spec.rb): the lines of it still
    found are the ones every sibling test has (`end`, the session set-up), so the note vanishes;
    an edit of the test itself, keeping its own `it` line, stays edited."""
    (tmp_path / "spec").mkdir()
    spec = tmp_path / "spec" / "session_hijacking_spec.rb"
    spec.write_text(SPEC)
    a = capture(tmp_path, "spec/session_hijacking_spec.rb", 9, 13)
    assert a.text.splitlines()[2] == '  it "accepts requests with the same Accept-Language header" do'
    deleted = SPEC.split("\n")
    spec.write_text("\n".join(deleted[:10] + deleted[17:]))
    r = resolve(tmp_path, a)
    assert (r.state, r.start) == ("vanished", None), "only lines every test has are left"
    assert r.best_partial is not None and r.best_partial["file"] == a.file
    spec.write_text(SPEC.replace("=> 'a'", "=> 'en'"))
    assert resolve(tmp_path, a).state == "edited", "the test is still there, its header value changed"


POOLMANAGER = '''import logging

from .connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from .util import parse_url


__all__ = ['PoolManager', 'ProxyManager', 'proxy_from_url']


pool_classes_by_scheme = {
    'http': HTTPConnectionPool,
    'https': HTTPSConnectionPool,
}

log = logging.getLogger(__name__)

SSL_KEYWORDS = ('key_file', 'cert_file', 'cert_reqs', 'ca_certs',
                'ssl_version', 'ca_cert_dir', 'ssl_context')


class PoolManager(object):
    proxy = None
'''


def test_a_deleted_table_is_not_kept_by_its_blank_lines(tmp_path: Path) -> None:
    """A module-level table deleted, the lines after it kept (urllib3's poolmanager.py): the blank
    lines around where it was and two lines of code make half the span, but of its lines of code
    only a third are left, so the note about the table vanishes; a value of the table changed
    keeps it edited."""
    (tmp_path / "urllib3").mkdir()
    pm = tmp_path / "urllib3" / "poolmanager.py"
    pm.write_text(POOLMANAGER)
    a = capture(tmp_path, "urllib3/poolmanager.py", 9, 17)
    assert a.text.splitlines()[1] == "pool_classes_by_scheme = {"
    pm.write_text(POOLMANAGER.replace(
        "pool_classes_by_scheme = {\n    'http': HTTPConnectionPool,\n    'https': HTTPSConnectionPool,\n}\n\n", ""))
    r = resolve(tmp_path, a)
    assert (r.state, r.start) == ("vanished", None), "the table is gone: 2 of its 6 lines of code left"
    assert r.best_partial is not None and r.best_partial["file"] == a.file
    pm.write_text(POOLMANAGER.replace("'https': HTTPSConnectionPool", "'https': VerifiedHTTPSConnectionPool"))
    assert resolve(tmp_path, a).state == "edited", "one entry of the table changed: still the table"


RES_HEADER = '''
var express = require('../')
  , request = require('./support/http');

describe('res', function(){
  describe('.header(field)', function(){
    it('should get the response header field', function(done){
      var app = express();

      app.use(function(req, res){
        res.setHeader('Content-Type', 'text/x-foo');
        res.send(res.header('Content-Type'));
      });

      request(app)
      .get('/')
      .expect('text/x-foo', done);
    })
  })

  describe('.header(field, value)', function(){
    it('should set the response header field', function(done){
      var app = express();

      app.use(function(req, res){
        res.header('Content-Type', 'text/x-foo');
        res.end();
      });

      request(app)
      .get('/')
      .end(function(res){
        res.headers['content-type'].should.equal('text/x-foo');
        done();
      })
    })
  })
})
'''

RES_SET = '''
var express = require('../')
  , request = require('./support/http');

describe('res', function(){
  describe('.set(field, value)', function(){
    it('should set the response header field', function(done){
      var app = express();

      app.use(function(req, res){
        res.set('Content-Type', 'text/x-foo').end();
      });

      request(app)
      .get('/')
      .expect('Content-Type', 'text/x-foo')
      .end(done);
    })
  })

  describe('.set(object)', function(){
    it('should set multiple fields', function(done){
      var app = express();

      app.use(function(req, res){
        res.set({
          'X-Foo': 'bar',
          'X-Bar': 'baz'
        }).end();
      });

      request(app)
      .get('/')
      .expect('X-Foo', 'bar')
      .expect('X-Bar', 'baz')
      .end(done);
    })
  })
})
'''


def test_a_deleted_spec_is_not_moved_into_a_sibling_spec(tmp_path: Path) -> None:
    """A spec file deleted while a sibling spec tests the method that replaced it (express's
    test/res.header.js against test/res.set.js): the sibling holds most of the deleted test's
    tokens, but fewer than half its lines of code as they were, and git's blame traces none there:
    the note vanishes. The test moved into the sibling file with one line edited is found there."""
    (tmp_path / "test").mkdir()
    header, spec = tmp_path / "test" / "res.header.js", tmp_path / "test" / "res.set.js"
    header.write_text(RES_HEADER)
    spec.write_text(RES_SET)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "-A"], check=True)
    a = capture(tmp_path, "test/res.header.js", 18, 27)
    assert "describe('.header(field, value)', function(){" in a.text
    header.unlink()
    subprocess.run(["git", "-C", str(tmp_path), "add", "-A"], check=True)
    r = resolve(tmp_path, a)
    assert (r.state, r.start) == ("vanished", None), "res.set.js has its own test of the same shape"
    body = split_lines(RES_HEADER)[20:37]  # the `.header(field, value)` block
    body[5] = body[5].replace("'text/x-foo'", "'text/x-bar'")
    spec.write_text(RES_SET.removesuffix("})\n") + "\n" + "".join(line + "\n" for line in body) + "})\n")
    r = resolve(tmp_path, a)
    assert (r.state, r.file) == ("edited", "test/res.set.js"), "moved into res.set.js, one value changed"


CACHE = '''var fs = require('fs');

/**
 * A cache of `name`, kept in `options.store`.
 *
 * @param {String} name
 * @param {Object} options
 * @api private
 */

function Cache(name, options) {
  options = options || {};
  this.name = name;
  this.limit = options.limit;
  this.store = options.store || {};
  this.loaded = this.load();
}

/**
 * Read the entries of this cache from disk.
 *
 * @return {Object}
 * @api private
 */

Cache.prototype.load = function(){
  return JSON.parse(fs.readFileSync(this.path, 'utf8'));
};

/**
 * Look up `key` in this cache.
 *
 * @param {String} key
 * @return {Object}
 * @api private
 */

Cache.prototype.get = function(key){
  return this.store[key];
};

module.exports = Cache;
'''
LOAD = '''/**
 * Read the entries of this cache from disk.
 *
 * @return {Object}
 * @api private
 */

Cache.prototype.load = function(){
  return JSON.parse(fs.readFileSync(this.path, 'utf8'));
};

'''


def test_a_deleted_method_is_not_kept_by_its_siblings_doc_comment(tmp_path: Path) -> None:
    """A method deleted with its doc comment and its call (express's View.prototype.contents): the
    alignment finds the lines of a sibling's doc comment (`/**`, `@api private`, ` */`) where the
    deleted ones were, 8 of the span's 11 lines, but git's diff from the commit the note was taken
    at keeps 4 of them: the note vanishes, naming how much of it git keeps."""
    (tmp_path / "cache.js").write_text(CACHE)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "cache")
    start = find(CACHE, "this.limit")
    a = capture(tmp_path, "cache.js", start, start + 10)
    assert split_lines(a.text)[-1] == " */" and "this.load()" in a.text
    (tmp_path / "cache.js").write_text(CACHE.replace("  this.loaded = this.load();\n", "").replace(LOAD, ""))
    r = resolve(tmp_path, a)
    assert (r.state, r.start) == ("vanished", None), "the method and its comment are gone"
    assert r.best_partial is not None and r.best_partial["lines_kept"] == round(4 / 11, 3)
    (tmp_path / "cache.js").write_text(CACHE.replace("from disk", "from its file"))
    assert resolve(tmp_path, a).state == "edited", "a word of the comment changed: the method is there"


VIEW = '''/**
 * A template view.
 */

function View(name) {
  this.name = name;
}

/**
 * Read the template.
 *
 * @param {String} path
 * @api private
 */

View.prototype.contents = function(path){
  var self = this;
  return fs.readFileSync(path, 'utf8');
};

/**
 * Render with the given options.
 */

View.prototype.render = function(options, fn){
  fn(null, this.name);
};
'''
CONTENTS = VIEW[VIEW.index("/**\n * Read"):VIEW.index("/**\n * Render")]
LOOKUP = CONTENTS.replace("Read the template.", "Look up the template's path.").replace(
    "contents", "lookup").replace("fs.readFileSync(path, 'utf8')", "resolve(self.root, path)")


def test_a_method_deleted_then_another_written_in_its_place_vanishes(tmp_path: Path) -> None:
    """A method deleted in one commit, and in a later one another method written where it was,
    with the same doc-comment lines, `var self = this;` and `};`: one diff from the commit the note
    was taken at to today pairs 8 of the note's 11 lines with the new method's, but the lines died
    in the commit that deleted them (git's per-commit line tracking, `git log -L`, `git blame`):
    the note on the deleted method vanishes instead of moving onto the new one."""
    path = tmp_path / "view.js"
    path.write_text(VIEW)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "view")
    start = find(VIEW, " * Read the template.") - 1
    a = capture(tmp_path, "view.js", start, start + 10)
    assert a.text == CONTENTS.rstrip("\n") + "\n"
    path.write_text(VIEW.replace(CONTENTS, ""))
    git(tmp_path, "commit", "-qam", "drop contents")
    path.write_text(VIEW.replace(CONTENTS, LOOKUP))
    git(tmp_path, "commit", "-qam", "add lookup")
    r = resolve(tmp_path, a)
    assert (r.state, r.start) == ("vanished", None), "the method the note was about was deleted"
    assert r.best_partial is None or r.best_partial["lines_kept"] < 0.5
    path.write_text(VIEW.replace(CONTENTS, LOOKUP).replace("fn(null, this.name)", "fn(null, this.name, options)"))
    assert resolve(tmp_path, a).state == "vanished", "uncommitted edits elsewhere change nothing"


def test_code_deleted_beside_an_older_copy_in_another_file_vanishes_and_names_the_copy(repo: Path) -> None:
    """retry_delay deleted from http.py while util.py held a copy of it since before the note was
    taken: the note's code did not go there (git's blame traces no line there), so the note
    vanishes and names the copy as its best partial match. A note taken before the copy was made
    follows the code into util.py: for it, the copy is where its code went."""
    a = retry_span(repo)
    util = repo / "pkg" / "util.py"
    util.write_text("def unrelated_helper(x):\n    return x * 2\n\n\n" + a.text)
    git(repo, "commit", "-qam", "a copy in util")
    copied = capture(repo, "pkg/http.py", a.start, a.end)  # the note, taken with the copy there
    (repo / "pkg" / "http.py").write_text(PARSER.replace(a.text + "\n\n", ""))
    git(repo, "commit", "-qam", "drop http's retry_delay")
    r = resolve(repo, copied)
    assert (r.state, r.start) == ("vanished", None), "the copy was there all along: not where the code went"
    assert r.best_partial is not None and r.best_partial["file"] == "pkg/util.py"
    moved = resolve(repo, a)  # the note taken before the copy existed: the copy is where its code went
    assert (moved.state, moved.file, moved.start) == ("moved", "pkg/util.py", 5)


def test_a_function_moved_down_and_edited_follows_it(repo: Path) -> None:
    """A function moved to the end of its file with one line changed: git's diff deletes it and adds
    it elsewhere, and the note follows it there, edited (a block of unchanged lines where the diff
    added lines is moved code, as `git blame -M` follows it)."""
    a = retry_span(repo)
    raised = 'raise ValueError("attempt must be non-negative")'
    moved = PARSER.replace(a.text + "\n\n", "") + "\n\n" + a.text.replace(raised, 'raise ValueError(f"no: {attempt}")')
    (repo / "pkg" / "http.py").write_text(moved)
    r = resolve(repo, a)
    at = find(moved, "def retry_delay")
    assert (r.state, r.file, r.start, r.end) == ("edited", a.file, at, at + 6)


def test_a_file_followed_from_its_last_resolution_answers_as_a_fresh_resolution(repo: Path) -> None:
    """The server's hook answers (`in_file(follow=True)`): after each edit, the notes it did not
    reach keep their verdict at their moved lines, and a vanished note whose code an edit brings
    back is found again — what resolving every note afresh says."""
    from engram.memory.memories import Memories
    from engram.store.repo import Store

    run_engram(repo, "init")
    (repo / "pkg" / "http.py").unlink()  # (no other copy of the code to find it in)
    path = repo / "parser.py"
    path.write_text(PARSER)
    mem = Memories(Store(repo))
    lines = PARSER.splitlines(keepends=True)
    starts = [i + 1 for i, line in enumerate(lines) if line.startswith("def ")]
    for a, b in zip(starts, [*starts[1:], len(lines) + 3]):
        mem.remember(f"the function at line {a} is shared by the transport", at=[f"parser.py:{a}-{b - 3}"], dedup=False)
    merge = "".join(lines[starts[1] - 1:starts[2] - 3])

    def both() -> tuple[list, list]:
        def shown(found: list) -> list:
            return [(m.id, [(p.start, p.end, p.state, round(p.retained, 3)) for p in ps]) for m, ps in found]

        return (shown(mem.in_file("parser.py", attribute=False, follow=True)),
                shown(Memories(Store(repo)).in_file("parser.py", attribute=False)))

    path.write_text(PARSER.replace(merge, ""))  # merge_headers deleted: its note vanishes
    followed, fresh = both()
    assert followed == fresh and any(p[2] == "vanished" for _, ps in followed for p in ps)
    path.write_text("# the header parser\n\n" + PARSER.replace(merge, ""))  # the others move, the vanished one stays
    followed, fresh = both()
    assert followed == fresh and any(p[2] == "vanished" for _, ps in followed for p in ps)
    path.write_text("# moved below\n\n" + PARSER.replace(merge, "").replace('    return name.strip().lower(), value.strip()\n',
                             '    return name.strip().lower(), value.strip()  # trimmed\n') + "\n\n" + merge)
    followed, fresh = both()
    assert followed == fresh and all(p[2] != "vanished" for _, ps in followed for p in ps)


def test_notes_taken_at_many_commits_ask_git_three_times_and_answer_as_alone(repo: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Notes on one file taken at six commits of its history, the file then edited: resolving them
    all (what `engram recall --at FILE`, the hook's server and the editor's lenses do) starts three
    git processes (the files at their commits, the history between, the uncommitted edits), not
    some per commit (~110 for 300 notes at 60 commits of a real file), and each note's answer is
    the one it gets resolved alone by a fresh process."""
    from engram.memory import anchors
    from engram.memory.memories import Memories
    from engram.store.repo import init_store

    store, _ = init_store(repo)
    mem = Memories(store)
    path = repo / "pkg" / "http.py"
    text = PARSER
    for i in range(6):
        text = text.replace("def content_length", f"def helper_{i}(x):\n    return x + {i}\n\n\ndef content_length")
        path.write_text(text)
        git(repo, "commit", "-qam", f"helper {i}")
        for needle, n in (("def retry_delay", 6), ("def merge_headers", 5)):
            a = find(text, needle)
            mem.remember(f"note {i} on {needle}", at=[f"pkg/http.py:{a}-{a + n}"], dedup=False)
    path.write_text(text.replace("    delay = base_delay", "    delay = 2 * base_delay")
                    .replace("    merged = {", "    merged = dict() or {"))
    alone = {}
    for no in mem.anchored_in("pkg/http.py"):
        anchors._clear_git_caches()
        alone[no] = [(p.state, p.start, p.end, p.retained) for p in mem.places([no], attribute=False)[no]]
    anchors._clear_git_caches()
    started: list[list[str]] = []

    class Counted(subprocess.Popen):  # type: ignore[type-arg]
        def __init__(self, args: list[str], *a: object, **k: object) -> None:
            started.append(list(args))
            super().__init__(args, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(subprocess, "Popen", Counted)
    together = {no: [(p.state, p.start, p.end, p.retained) for p in ps]
                for no, ps in mem.places(list(alone), attribute=False).items()}
    assert together == alone
    assert {s for ps in alone.values() for s, *_ in ps} == {"edited"}, "git was asked for every note"
    asked = [next(x for x in a[3:] if not x.startswith("-") and "=" not in x) for a in started if a[0] == "git"]
    assert asked == ["cat-file", "log", "diff"], started
    anchors._clear_git_caches()
    monkeypatch.setenv("PATH", "")  # no git: the alignment's rules decide, nothing fails
    assert {s for ps in mem.places(list(alone), attribute=False).values() for s in [p.state for p in ps]} <= {
        "edited", "vanished"}


def test_the_scan_for_deleted_notes_reads_each_file_once_per_call(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Notes whose code was deleted are each looked for in the repository's other files of their
    extension; resolving them together reads each of those files once, not once per note, and
    answers as each note resolved alone."""
    from engram.memory import anchors
    from engram.memory.memories import Memories
    from engram.store.repo import init_store

    for i in range(8):
        (repo / "pkg" / f"mod{i}.py").write_text(f"def helper_{i}(value):\n    return value + {i}\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "modules")
    store, _ = init_store(repo)
    mem = Memories(store)
    for needle, n in (("def retry_delay", 6), ("def merge_headers", 5), ("def content_length", 5)):
        a = find(PARSER, needle)
        mem.remember(f"note on {needle}", at=[f"pkg/http.py:{a}-{a + n}"], dedup=False)
    (repo / "pkg" / "http.py").write_text(PARSER[:PARSER.index("def merge_headers")])
    nos = mem.anchored_in("pkg/http.py")
    alone = {no: [(p.state, p.start, p.end) for p in mem.places([no], attribute=False)[no]] for no in nos}
    opened: list[str] = []

    def counted(path: str, *a: object, **k: object) -> object:
        opened.append(os.path.basename(path))
        return open(path, *a, **k)  # type: ignore[call-overload]

    monkeypatch.setattr(anchors, "open", counted, raising=False)
    together = {no: [(p.state, p.start, p.end) for p in ps] for no, ps in mem.places(nos, attribute=False).items()}
    assert together == alone
    assert {s for ps in alone.values() for s, *_ in ps} == {"vanished"}
    assert sorted(opened) == sorted({f"mod{i}.py" for i in range(8)} | {"util.py", "http.py"}), opened


def test_a_note_whose_code_moved_to_another_file_follows_later_edits_of_that_file(repo: Path) -> None:
    """The cached resolution of an anchor found in another file is stale when that file changes,
    not only when the anchor's own (now missing) file does."""
    run_engram(repo, "init")
    a = find(PARSER, "def retry_delay")
    mid = json.loads(run_engram(repo, "remember", "Retries back off", "--at", f"pkg/http.py:{a}-{a + 6}",
                                "--json").stdout)["id"]
    git(repo, "mv", "pkg/http.py", "pkg/wire.py")

    def where() -> tuple[str, list[int], str]:
        place = json.loads(run_engram(repo, "memory", "show", mid, "--json").stdout)["anchors"][0]
        return place["file"], place["lines"], place["state"]

    assert where() == ("pkg/wire.py", [a, a + 6], "moved")
    wire = repo / "pkg" / "wire.py"
    wire.write_text("# one\n# two\n" + wire.read_text())
    assert where() == ("pkg/wire.py", [a + 2, a + 8], "moved")


THEMES = '''from attrs import Attr, BLACK, DEFAULT, REGULAR, UNDEFINED


def dark_theme():
    return {
        "input": Attr(DEFAULT, REGULAR),
        "disabled": Attr(DEFAULT, REGULAR),
        "fg": Attr(DEFAULT, REGULAR),
        "bg": Attr(DEFAULT, REGULAR),
        "prompt": Attr(DEFAULT, REGULAR),
        "gutter": Attr(DEFAULT, REGULAR),
    }


def empty_theme():
    return {
        "input": Attr(UNDEFINED, UNDEFINED),
        "fg": Attr(UNDEFINED, UNDEFINED),
        "border": Attr(BLACK, REGULAR),
    }
'''


def test_a_name_swapped_for_another_in_use_is_an_edit_not_a_rename(tmp_path: Path) -> None:
    """fzf's theme table: two rows of six deleted and `REGULAR` replaced by `UNDEFINED` on the other
    four, both names in use in the file before and after. Git's line tracking keeps none of the six
    lines; a rename would keep the four (a refactoring gives a thing a new name), but this is one
    constant swapped for another: the note's table is gone, it vanishes. The same edit giving the
    four rows a name the file did not have (`PLAIN`) is a rename: the note stays, edited."""
    path = tmp_path / "themes.py"
    path.write_text(THEMES)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "themes")
    start = find(THEMES, '"input": Attr(DEFAULT')
    a = capture(tmp_path, "themes.py", start, start + 5)
    table = a.text
    kept = "".join(line + "\n" for line in split_lines(table) if '"disabled"' not in line and '"gutter"' not in line)
    path.write_text(THEMES.replace(table, kept.replace("DEFAULT, REGULAR", "DEFAULT, UNDEFINED")))
    git(tmp_path, "commit", "-qam", "undefined attributes")
    r = resolve(tmp_path, a)
    assert (r.state, r.start) == ("vanished", None), "REGULAR swapped for UNDEFINED, both in use: an edit"
    assert r.best_partial is not None and r.best_partial["lines_kept"] == 0.0
    path.write_text(THEMES.replace(table, kept.replace("DEFAULT, REGULAR", "DEFAULT, PLAIN")))
    git(tmp_path, "commit", "-qam", "plain attributes")
    r = resolve(tmp_path, a)
    assert (r.state, r.start) == ("edited", start), "a name the file did not have: a rename, four lines of six kept"


UNITS = '''def scale(value, factor):
    """Multiply, rounded to cents."""
    result = value * factor
    return round(result, 2)


def describe(unit, plural=False):
    """The unit's name, for a label."""
    name = unit.long_name or unit.name
    if plural and not name.endswith("s"):
        name += "s"
    return name.capitalize()
'''


def test_a_short_function_moved_down_in_a_commit_and_edited_follows_it(tmp_path: Path) -> None:
    """A four-line function moved below its neighbour in a commit, its signature changed on the way:
    its three other lines (57 letters and digits, fewer than a long block's) are deleted and added
    again unchanged by the commit's diff, a move as `git blame -M` follows one, and the note
    follows the function there, edited, rather than vanishing with the line that changed."""
    path = tmp_path / "units.py"
    path.write_text(UNITS)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "units")
    a = capture(tmp_path, "units.py", 1, 4)
    body = "".join(split_lines(a.text)[1:])
    assert sum(ch.isalnum() for ch in body) == 57
    moved = UNITS.replace(a.text + "\n\n", "") + "\n\n" + a.text.replace("factor):", "factor=1.0):")
    path.write_text(moved)
    git(tmp_path, "commit", "-qam", "scale below, with a default factor")
    r = resolve(tmp_path, a)
    at = find(moved, "def scale")
    assert (r.state, r.start, r.end) == ("edited", at, at + 3)
