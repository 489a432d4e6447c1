"""The README's set-up commands are the ones CI runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    readme = (ROOT / "README.md").read_text()
    setup = readme.split("## Set up (fresh machine)", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.+?)\n```", setup)
    assert len(commands) == 2, "exactly two set-up commands"
    assert commands[0].startswith("pip install . && engram demo")
    ci = (ROOT / ".ci" / "run").read_text()
    assert f"TEST_COMMAND='{commands[1]}'" in ci
