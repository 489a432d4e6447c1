"""Aider chat histories (`.aider.chat.history.md`): edits at the right lines, failed blocks left
out, one session per run, explain naming the run that wrote the code.

The histories here are written in the exact shape aider writes them (headers, `#### ` lines with
their line break, `> ` output, a failed block's multi-line report). Real histories from public
repositories carry no licence that allows a copy here: bench/harness_aider.py measures the
adapter on them (bench/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import git, run_engram

from engram.adapters.aider import (
    locate,
    search_replace_blocks,
    segments,
    whole_blocks,
    without_reasoning,
)

APP_BEFORE = """import os


def greet(name):
    return "hi " + name


def main():
    print(greet(os.environ.get("USER", "you")))
"""

APP_AFTER = """import os
import sys


def greet(name, punctuation="!"):
    message = f"hello {name}{punctuation}"
    return message.capitalize()


def main():
    print(greet(os.environ.get("USER", "you")))
"""


def sr(path: str, search: str, replace: str) -> str:
    return f"{path}\n```python\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n```\n"


def commit_file(root: Path, rel: str, text: str, msg: str) -> str:
    (root / rel).write_text(text)
    git(root, "add", rel)
    git(root, "commit", "-qm", msg)
    return git(root, "rev-parse", "--short=7", "HEAD").strip()


def history(root: Path, commit: str, *, failed: bool = False) -> Path:
    """One run of aider in the diff edit format that made `commit` (and one empty run before it)."""
    good = sr("app.py", "import os\n", "import os\nimport sys\n") + "\n" + sr(
        "app.py", 'def greet(name):\n    return "hi " + name\n',
        'def greet(name, punctuation="!"):\n    message = f"hello {name}{punctuation}"\n'
        "    return message.capitalize()\n")
    bad = sr("app.py", "def missing():\n    pass\n", "def missing():\n    return 1\n")
    reply = good + ("\n" + bad if failed else "")
    report = ("> Applied edit to app.py  \n" if not failed else
              "> The LLM did not conform to the edit format.  \n"
              "> https://aider.chat/docs/troubleshooting/edit-errors.html  \n"
              "> # 1 SEARCH/REPLACE block failed to match!\n\n"
              "## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in app.py\n"
              "<<<<<<< SEARCH\ndef missing():\n    pass\n=======\ndef missing():\n    return 1\n>>>>>>> REPLACE\n\n"
              "The SEARCH section must exactly match an existing block of lines including all white space\n\n"
              "# The other 2 SEARCH/REPLACE blocks were applied successfully.\nDon't re-send them.\n"
              "Just reply with fixed versions of the block above that failed to match.  \n")
    text = ("\n# aider chat started at 2025-03-01 09:59:00\n\n> /usr/bin/aider  \n\n"
            "# aider chat started at 2025-03-01 10:00:00\n\n"
            "> Aider v0.86.1  \n> Main model: anthropic/claude-sonnet-4 with diff edit format  \n"
            "> Git repo: .git with 1 files  \n\n"
            "#### make greet take a punctuation argument  \n\n"
            "#### Add the import too  \n\n"  # (the model's own `####` heading below has no line break)
            "#### Steps\n\nHere are the changes:\n\n" + reply + "\n"
            "> Tokens: 2.1k sent, 300 received.  \n" + report + f"> Commit {commit} feat: punctuation  \n")
    path = root / ".aider.chat.history.md"
    path.write_text(text)
    return path


def shown(root: Path, session: str) -> list[dict]:
    return json.loads(run_engram(root, "show", session, "--json").stdout)["events"]


def made_by_aider(repo: Path) -> str:
    commit_file(repo, "app.py", APP_BEFORE, "start")
    return commit_file(repo, "app.py", APP_AFTER, "feat: punctuation")


def test_search_replace_edits_land_on_the_lines_aider_changed(repo: Path) -> None:
    commit = made_by_aider(repo)
    history(repo, commit)
    out = run_engram(repo, "ingest", str(repo / ".aider.chat.history.md")).stdout
    assert "1 session" in out and "2 edits" in out
    assert "1 aider session: not kept by the harness: message times" in out  # said, not invented
    session = next(t["session_id"] for t in json.loads(run_engram(repo, "tapes", "--json").stdout)
                   if t["session_id"].startswith("aider-20250301T100000-"))
    evs = shown(repo, session)
    meta = evs[0]
    assert (meta["harness"], meta["harness_version"], meta["model"]) == ("aider", "0.86.1", "anthropic/claude-sonnet-4")
    assert meta["started"] == "2025-03-01T10:00:00" and meta["unkept"]
    edits = [e for e in evs if e["kind"] == "code.edit"]
    assert [(e["file"], e["before_range"], e["after_range"]) for e in edits] == [
        ("app.py", [2, 1], [2, 2]), ("app.py", [5, 6], [5, 7])]  # (the second in the file after the first)
    assert edits[1]["after_text"] == ('def greet(name, punctuation="!"):\n    message = f"hello {name}{punctuation}"\n'
                                      "    return message.capitalize()\n")
    assert edits[1]["file_after_sha"] == git(repo, "rev-parse", f"{commit}:app.py").strip()
    assert edits[0]["commit"].startswith(commit) and edits[0]["ts"]
    users = [e["text"] for e in evs if e["kind"] == "msg.in"]
    assert users == ["make greet take a punctuation argument", "Add the import too"]
    view = run_engram(repo, "show", session).stdout
    assert "not kept by this harness: message times" in view


def test_a_failed_search_block_is_not_an_edit(repo: Path) -> None:
    commit = made_by_aider(repo)
    history(repo, commit, failed=True)
    out = run_engram(repo, "ingest", str(repo / ".aider.chat.history.md")).stdout
    assert "2 edits" in out  # the two that applied; the failed one is not an edit


def test_explain_names_the_run_that_wrote_the_code(repo: Path) -> None:
    commit = made_by_aider(repo)
    history(repo, commit)
    run_engram(repo, "ingest")  # found in the work tree, where aider writes it
    doc = json.loads(run_engram(repo, "explain", "app.py:5-7", "--brief").stdout)
    assert doc["sessions"][0]["session_id"].startswith("aider-20250301T100000-")


def test_a_history_without_a_message_is_a_counted_skip(repo: Path, tmp_path: Path) -> None:
    f = tmp_path / ".aider.chat.history.md"
    f.write_text("\n# aider chat started at 2025-03-01 09:59:00\n\n> /usr/bin/aider  \n")
    out = run_engram(repo, "ingest", str(f))
    assert "0 sessions" in out.stdout and "without a message (aider started and left)" in out.stdout


def test_blocks_are_placed_as_aider_places_them() -> None:
    lines = ["def f():", "    if x:", "        return 1", "    return 2"]
    # the model lost the indentation: aider matches the block shifted and re-indents the replacement
    assert locate(lines, ["if x:", "    return 1"], ["if y:", "    return 3"]) == \
        (1, 2, ["    if y:", "        return 3"])
    assert locate(lines, ["nothing like it"], ["x"]) is None  # not placed by guess
    assert locate(lines, [], ["# end"]) == (4, 0, ["# end"])  # an empty SEARCH appends
    blocks = search_replace_blocks("**src/a.py**\n```\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n```\n"
                                   "<<<<<<< SEARCH\nc\n=======\nd\n>>>>>>> REPLACE\n")
    assert [(b.path, b.search, b.after) for b in blocks] == [("src/a.py", ["a"], ["b"]), ("src/a.py", ["c"], ["d"])]
    whole = whole_blocks("Update `src/a.py`:\n\n```python\nx = 1\n```\n", frozenset({"src/a.py"}))
    assert [(b.path, b.after) for b in whole] == [("src/a.py", ["x = 1"])]


def test_an_undone_commit_gives_the_file_back(repo: Path) -> None:
    """After `/undo` (aider: `Removed: <hash> …`), the next block is placed in the file as it was."""
    commit_file(repo, "app.py", APP_BEFORE, "start")
    text = ("\n# aider chat started at 2025-03-01 10:00:00\n\n> Model: m with diff edit format  \n\n"
            "#### rename greet  \n\n" + sr("app.py", "def greet(name):\n", "def hello(name):\n") +
            "\n> Applied edit to app.py  \n> Commit 1234567 rename  \n\n#### /undo  \n\n"
            "> Removed: 1234567 rename  \n> Now at:  abcdef0 start  \n\n#### add a docstring  \n\n" +
            sr("app.py", "def greet(name):\n", 'def greet(name):\n    """Say hi."""\n') + "\n> Applied edit to app.py  \n")
    (repo / ".aider.chat.history.md").write_text(text)
    run_engram(repo, "ingest", str(repo / ".aider.chat.history.md"))
    session = next(t["session_id"] for t in json.loads(run_engram(repo, "tapes", "--json").stdout))
    edits = [e for e in shown(repo, session) if e["kind"] == "code.edit"]
    assert [(e["before_range"], e["after_range"], e.get("after_range") is not None) for e in edits] == [
        ([4, 4], [4, 4], True), ([5, 4], [5, 5], True)]


def test_whole_file_replies_are_read_as_aider_reads_them() -> None:
    """Shapes met in real histories (Ahmad-A0/Inversity-SnapSwap, BeauCranston/car-game)."""
    # JSX in a reply: a line that is just `>` is code, not aider's output
    jsx = ["Here:", "", "src/App.js", "```", "<motion.div", '  className="mt-12"', ">", "  <Masonry/>",
           "</motion.div>", "```", "", "> Applied edit to src/App.js  "]
    segs = segments(list(enumerate(jsx)))
    assert [s.kind for s in segs] == ["reply", "tool"] and ">" in segs[0].lines
    # a reply cut off inside its block: aider writes what it got
    assert [(b.path, b.after) for b in whole_blocks("src/a.js\n```\nline 1\nline 2\n", frozenset({"src/a.js"}))] == \
        [("src/a.js", ["line 1", "line 2"])]
    # of two listings of one file, the first named by its line is written; a block under a blank
    # line is the only file aider wrote; a sentence before a fence is a file name to aider
    text = ("src/a.js\n```\nfirst\n```\nsrc/a.js\n```\nsecond\n```\n")
    assert [b.after for b in whole_blocks(text, frozenset({"src/a.js"}))] == [["first"]]
    assert [(b.path, b.after) for b in whole_blocks("Install it:\n```bash\nnpm i x\n```\n", frozenset({"a.js"}))] == \
        [("Install it", ["npm i x"])]
    assert [(b.path, b.after) for b in whole_blocks("First:\n\n\n```bash\nnpm i x\n```\n", frozenset({"a.js"}))] == \
        [("a.js", ["npm i x"])]
    # the model's reasoning, shown in the history, holds drafts aider does not write
    draft = "<thinking-content-7bbeb8e1>\nsrc/a.js\n```\n... content ...\n```\n</thinking-content-7bbeb8e1>\n\n"
    assert [b.after for b in whole_blocks(without_reasoning(draft + "src/a.js\n```\nreal\n```\n"),
                                          frozenset({"src/a.js"}))] == [["real"]]


def test_a_block_aider_matched_loosely_takes_its_range_from_the_commit(repo: Path) -> None:
    """A SEARCH block that splits a line of the file (aider's looser matching applied it, and
    committed the result): its edit is the file's change in that commit, at exact lines."""
    commit_file(repo, "app.py", APP_BEFORE, "start")
    commit = commit_file(repo, "app.py", APP_BEFORE.replace("def greet(name):", "def greet(name, loud=False):"), "loud")
    reply = sr("app.py", "def greet\n\n(name):\n", "def greet(name, loud=False):\n")
    (repo / ".aider.chat.history.md").write_text(
        "\n# aider chat started at 2025-03-01 10:00:00\n\n> Main model: m with diff edit format  \n\n"
        "#### add loud  \n\n" + reply + f"\n> Applied edit to app.py  \n> Commit {commit} loud  \n")
    run_engram(repo, "ingest", str(repo / ".aider.chat.history.md"))
    session = next(t["session_id"] for t in json.loads(run_engram(repo, "tapes", "--json").stdout))
    [edit] = [e for e in shown(repo, session) if e["kind"] == "code.edit"]
    assert (edit["before_range"], edit["after_range"], edit["after_text"]) == ([4, 4], [4, 4], "def greet(name, loud=False):\n")
    assert edit["file_after_sha"] == git(repo, "rev-parse", f"{commit}:app.py").strip()
