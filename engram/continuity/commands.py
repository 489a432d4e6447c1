"""Shell commands in a transcript: the command line a tool call ran, whether it is a test or a
build (a failure of one stays open until a later run passes), and which of its parts had side
effects a new session must not repeat (a commit, a push, a deploy, an install...).

Recognised by the words of the command, not by running or parsing a shell: a side effect hidden
behind a script or an alias is not seen, and the package says its list is what the commands'
words show."""

from __future__ import annotations

import re
import shlex
from typing import Any, Final

from engram.adapters.apply_patch import shell_script

#: Tool names that run a shell command (Claude Code `Bash`, Codex `shell`, `exec_command`, ...).
SHELL_TOOLS: Final = frozenset({"Bash", "bash", "shell", "exec_command", "local_shell", "shell_command",
                                "container.exec", "run_shell_command", "execute_command"})

# (category, pattern on one simple command). First match wins; the patterns see the command with
# `sudo`, environment assignments and `cd x &&` stripped.
_EFFECTS: Final[list[tuple[str, re.Pattern[str]]]] = [(c, re.compile(p)) for c, p in (
    ("commit", r"^git\s+(-C\s+\S+\s+)?(commit|merge|rebase|cherry-pick|revert|am|stash\s+(drop|clear))\b"),
    ("push", r"^git\s+(-C\s+\S+\s+)?push\b"),
    ("tag", r"^git\s+(-C\s+\S+\s+)?tag\s+(-[asfm]\s+)*[^-\s]"),
    ("history rewrite", r"^git\s+(-C\s+\S+\s+)?(reset\s+--hard|clean\s+-[a-z]*f|branch\s+-[dD]|checkout\s+--\s)"),
    ("migration", (r"((manage\.py|django-admin)\s+migrate\b|db:migrate|ecto\.migrate|alembic\s+(upgrade|downgrade)|"
                   r"prisma\s+(migrate\s+(dev|deploy|reset)|db\s+push)|flyway\s+migrate|knex\s+migrate|"
                   r"sequelize\s+db:migrate|goose\s+\S*\s*up\b|dbmate\s+up|diesel\s+migration\s+run)")),
    ("deploy", (r"(^(fly|flyctl|vercel|netlify|firebase|serverless|sls|sam|kamal|cap|mina|gcloud\s+\S+)\s+deploy\b|"
                r"\brun\s+deploy\b|^make\s+deploy\b|kubectl\s+(apply|delete|rollout\s+restart)|"
                r"terraform\s+(apply|destroy)|helm\s+(install|upgrade|uninstall)|pulumi\s+(up|destroy)|cdk\s+deploy|"
                r"eb\s+deploy|git\s+push\s+heroku\b)")),
    ("publish", (r"(npm\s+publish|yarn\s+publish|pnpm\s+publish|twine\s+upload|cargo\s+publish|gem\s+push|"
                r"poetry\s+publish|uv\s+publish|docker\s+push|gh\s+release\s+create|mix\s+hex\.publish)")),
    ("pull request", r"^gh\s+(pr\s+(create|merge|close)|issue\s+(create|close))\b"),
    ("file deletion", r"^(rm|rmdir|git\s+rm|unlink|shred)\s"),
    ("package install", (r"^((pip3?|uv\s+pip|python3?\s+-m\s+pip)\s+install|uv\s+add|poetry\s+add|npm\s+(install|i|add)\s+"
                        r"\S|yarn\s+add|pnpm\s+(add|install\s+\S)|bun\s+add|cargo\s+(add|install)|go\s+(get|install)|"
                        r"gem\s+install|bundle\s+add|(apt|apt-get|dnf|yum|apk|brew|pacman)\s+(install|add|-S)|"
                        r"mix\s+deps\.get|composer\s+require|conda\s+install)")),
)]

_TEST_WORDS: Final = re.compile(
    r"(^|\s|/)(pytest|py\.test|tox|nox|unittest|jest|vitest|mocha|ava|rspec|phpunit|ctest|"
    r"go\s+test|cargo\s+(test|nextest)|mix\s+test|npm\s+(run\s+)?test|yarn\s+(run\s+)?test|pnpm\s+(run\s+)?test|"
    r"bun\s+test|deno\s+test|dotnet\s+test|mvn\s+\S*test|gradle\w*\s+\S*test|make\s+(test|check)|rake\s+test|"
    r"bundle\s+exec\s+(rspec|rake)|swift\s+test|zig\s+build\s+test|playwright\s+test)\b")
_BUILD_WORDS: Final = re.compile(
    r"(^|\s|/)(make|cmake\s+--build|ninja|cargo\s+(build|check|clippy)|go\s+(build|vet)|mix\s+(compile|format"
    r"\s+--check)|tsc|npm\s+run\s+(build|lint|typecheck)|yarn\s+(build|lint)|pnpm\s+(build|lint)|"
    r"gradle\w*\s+build|mvn\s+\S*(compile|package)|dotnet\s+build|ruff|mypy|pyright|eslint|"
    r"python3?\s+-m\s+(build|compileall|mypy|ruff))\b")
_PREFIX: Final = re.compile(r"^((sudo|time|env|nice|command)\s+|[A-Za-z_][A-Za-z0-9_]*=\S*\s+)+")
_SPLIT: Final = re.compile(r"\s*(?:&&|\|\||;|\n)\s*")


def command_line(name: str, inp: Any) -> str | None:
    """The command a shell tool call ran, as one string; None for any other tool call."""
    if name not in SHELL_TOOLS or not isinstance(inp, dict):
        return None
    cmd = inp.get("command") if inp.get("command") is not None else inp.get("cmd")
    if isinstance(cmd, list) and all(isinstance(c, str) for c in cmd):
        return shell_script(cmd) or " ".join(shlex.quote(c) for c in cmd)
    return cmd if isinstance(cmd, str) and cmd.strip() else None


def simple_commands(line: str) -> list[str]:
    """The simple commands of a command line (split at `&&`, `||`, `;` and newlines; pipes kept),
    each without `sudo`, `env X=Y` or leading variable assignments."""
    out = []
    for part in _SPLIT.split(line.strip()):
        part = _PREFIX.sub("", part.strip())
        if part and not part.startswith("#"):
            out.append(part)
    return out


def effects(line: str) -> list[tuple[str, str]]:
    """(category, simple command) for each part of `line` with a side effect to remember."""
    out = []
    for part in simple_commands(line):
        if part.startswith(("echo ", "printf ", "cat ", "grep ", "rg ")):
            continue  # words about a side effect, not the effect
        for category, pattern in _EFFECTS:
            if pattern.search(part):
                out.append((category, part))
                break
    return out


def check_kind(line: str) -> str | None:
    """"test" or "build" for a command that checks the work (its last failure stays open until a
    later run passes), else None."""
    parts = simple_commands(line)
    if any(_TEST_WORDS.search(p) for p in parts):
        return "test"
    if any(_BUILD_WORDS.search(p) for p in parts):
        return "build"
    return None


def family(line: str) -> str:
    """What makes two runs the same check: the command line with its whitespace collapsed and
    output plumbing (`| tail -20`, `2>&1`) removed, so `pytest -x 2>&1 | tail` and `pytest -x`
    are one check."""
    text = re.sub(r"\s*\d?>&\d|\s*\|\s*(tail|head|grep|tee|less|cat)\b.*$", "", line.strip(), flags=re.DOTALL)
    return " ".join(text.split())


def covers(later: str, earlier: str) -> bool:
    """Does a later passing run of `later` settle an earlier failing run of `earlier`? The same
    check, or the same runner with a subset of its arguments (the whole suite after one test)."""
    a, b = family(later), family(earlier)
    if a == b:
        return True
    wa, wb = a.split(), b.split()
    if len(wa) < 1 or len(wb) < 1:
        return False
    head = 2 if len(wa) > 1 and len(wb) > 1 and wa[:2] == wb[:2] else 1
    if wa[:head] != wb[:head] or not check_kind(a) or check_kind(a) != check_kind(b):
        return False
    return set(wa[head:]) <= set(wb[head:])
