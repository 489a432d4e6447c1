"""The README's set-up commands are the ones CI runs, and the first works on a stock Debian or
Ubuntu Python (PEP 668: `pip install` outside a virtual environment is refused there)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def setup_section() -> str:
    return (ROOT / "README.md").read_text().split("## Set up (fresh machine)", 1)[1].split("\n## ", 1)[0]


def setup_commands() -> list[str]:
    commands = re.findall(r"```sh\n(.+?)\n```", setup_section())
    assert len(commands) == 2, "exactly two set-up commands"
    return commands


def test_ci_runs_both_readme_set_up_commands_verbatim() -> None:
    demo, tests = setup_commands()
    ci = (ROOT / ".ci" / "run").read_text()
    assert f"DEMO_COMMAND='{demo}'" in ci and 'bash -c "$DEMO_COMMAND"' in ci
    assert f"TEST_COMMAND='{tests}'" in ci and 'bash -c "$TEST_COMMAND"' in ci
    assert demo.endswith("engram demo")


def test_the_set_up_commands_install_into_a_virtual_environment_never_the_system_python() -> None:
    for command in setup_commands():
        steps = [step.split() for step in command.split(" && ")]
        assert steps[0] == ["python3", "-m", "venv", ".venv"], command
        for step in steps[1:]:
            assert step[0].startswith(".venv/bin/"), f"{step[0]} runs outside the venv: {command}"


def test_the_readme_names_the_python_version_the_clone_and_what_debian_lacks() -> None:
    needed = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    section = setup_section()
    assert f"Python ≥ {needed.removeprefix('>=')}" in section
    assert "git clone" in section and "python3-venv" in section  # Debian's python3 has no ensurepip without it


def test_every_setting_is_documented() -> None:
    """`[ingest] transcript_dirs` (the folders a running server may ingest from) was named only in
    the changelog: a user could not find the setting a refused `engram ingest PATH` pointed to."""
    from engram.store.config import DEFAULTS

    text = (ROOT / "README.md").read_text() + "".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))
    missing = [f"{section}.{key}" for section, keys in DEFAULTS.items() for key in keys
               if not re.search(rf"\b{re.escape(key)}\b", text)]
    assert missing == [], f"settings documented nowhere in README.md or docs/: {missing}"
