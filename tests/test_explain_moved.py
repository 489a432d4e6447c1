"""`engram explain` on a file the repository moved after the sessions that wrote it: the edits
recorded under its earlier path (git's rename history) are edits of the file, so the session that
wrote a span comes before a later one that only carried its lines (issue 52,
Ahmad-A0/Inversity-SnapSwap: `client/src/...` moved to `src/...` after the aider runs).

The aider history is written in the shape aider writes it (see tests/test_adapter_aider.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from conftest import git, run_engram

START = """import React from 'react';

const Upload = () => {
    return null;
};

export default Upload;
"""

# What the first run wrote: the body of the component.
BLOCK = """    const [image, setImage] = useState(null);
    const handleImageChange = (event) => {
        const file = event.target.files[0];
        if (file) {
            setImage(URL.createObjectURL(file));
        }
    };
    return (
        <input type="file" accept="image/*" onChange={handleImageChange} id="imageInput" />
    );
"""


def commit_file(root: Path, rel: str, text: str, msg: str, when: str) -> str:
    """Commit `text` at `rel` at time `when` (aider's own commits of a run carry the run's times)."""
    (root / rel).write_text(text)
    git(root, "add", rel)
    subprocess.run(["git", "commit", "-qm", msg], cwd=root, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
                        "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when})
    return git(root, "rev-parse", "--short=7", "HEAD").strip()


def block(path: str, search: str, replace: str) -> str:
    return f"{path}\n```javascript\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n```\n"


def run(at: str, ask: str, reply: str, path: str, commit: str) -> str:
    return (f"\n# aider chat started at {at}\n\n> Aider v0.58.1  \n"
            "> Main model: claude-3-5-sonnet-20240620 with diff edit format  \n> Git repo: .git with 1 files  \n\n"
            f"#### {ask}  \n\nHere are the changes:\n\n{reply}\n> Tokens: 2.1k sent, 351 received.  \n"
            f"> Applied edit to {path}  \n> Commit {commit} feat: {ask}  \n")


def test_the_run_that_wrote_a_moved_files_lines_comes_before_a_later_run_that_carried_them(repo: Path) -> None:
    """Run 1 writes the component's body in client/upload.js; run 2's block holds that body
    unchanged between the two lines it changes around it (a carrier); then the file is moved
    (`git mv`, no session). Explaining the body at the new path used to name run 2 first: run 1's
    edit, under the old path, was an edit of another file, and the later of two sessions one
    touch each came first."""
    (repo / "client").mkdir()
    old, new = "client/upload.js", "upload.js"
    commit_file(repo, old, START, "start", "2024-09-28T12:00:00+01:00")
    written = START.replace("    return null;\n", BLOCK).replace("import React from 'react';",
                                                                "import React, { useState } from 'react';")
    first = commit_file(repo, old, written, "feat: upload", "2024-09-28T12:26:49+01:00")
    carried = written.replace("const Upload = () => {", "const Upload = ({ label }) => {").replace(
        "export default Upload;", "export default React.memo(Upload);")
    second = commit_file(repo, old, carried, "feat: label", "2024-09-28T18:06:25+01:00")
    history = run("2024-09-28 12:26:04", "let me upload an image", block(
        old, "import React from 'react';\n\nconst Upload = () => {\n    return null;\n};\n",
        "import React, { useState } from 'react';\n\nconst Upload = () => {\n" + BLOCK + "};\n"), old, first)
    history += run("2024-09-28 17:52:16", "give it a label and memoize it", block(
        old, "const Upload = () => {\n" + BLOCK + "};\n\nexport default Upload;\n",
        "const Upload = ({ label }) => {\n" + BLOCK + "};\n\nexport default React.memo(Upload);\n"), old, second)
    (repo / ".aider.chat.history.md").write_text(history)
    git(repo, "mv", old, new)
    git(repo, "commit", "-qm", "move files")
    run_engram(repo, "ingest", str(repo / ".aider.chat.history.md"))

    doc = json.loads(run_engram(repo, "explain", f"{new}:5-9", "--brief", "--debug").stdout)
    order = [s["session_id"][:21] for s in doc["sessions"]]
    assert order == ["aider-20240928T122604", "aider-20240928T175216"], order
    assert [s["wrote"] for s in doc["sessions"]] == [True, False]
    files = {f["file"] for s in doc["sessions"] for f in s["fragments"]}
    assert files == {old}  # the path the runs recorded, as they recorded it
    assert "moved_file" in {r["rule"] for r in doc["ranking"]}


def test_a_path_that_is_still_another_file_is_not_an_earlier_path(repo: Path) -> None:
    """A file copied elsewhere and the original kept: the copy's explain does not take the
    original's edits as its own (git follows no rename to a path still in the tree)."""
    (repo / "client").mkdir()
    commit_file(repo, "client/upload.js", START, "start", "2024-09-28T12:00:00+01:00")
    written = START.replace("    return null;\n", BLOCK)
    first = commit_file(repo, "client/upload.js", written, "feat: upload", "2024-09-28T12:26:49+01:00")
    (repo / ".aider.chat.history.md").write_text(run("2024-09-28 12:26:04", "let me upload an image", block(
        "client/upload.js", "    return null;\n", BLOCK), "client/upload.js", first))
    commit_file(repo, "upload.js", written, "a copy", "2024-09-28T21:01:53+01:00")
    run_engram(repo, "ingest", str(repo / ".aider.chat.history.md"))
    doc = json.loads(run_engram(repo, "explain", "upload.js:4-8", "--brief", "--debug").stdout)
    assert "moved_file" not in {r["rule"] for r in doc["ranking"]}
    assert not any(s["wrote"] for s in doc["sessions"])
