"""One output convention for every command (docs/cli.md, "Output"): a command prints for its
main reader by default, and `--json` always gives the one JSON document a program reads.

- Commands an agent or a script calls to get an answer (`explain`, `view`, `search`) print JSON
  when their output goes to a program (a pipe, a file, an agent's tool call) and for people on a
  terminal; `--json` and `--pretty` choose either way. Agents run commands without a terminal, so
  they get JSON without asking, and a person following a hint such as `engram view TAPE@N --full`
  reads text, not a JSON document.
- Every other command prints for people (a table, a summary line, ok/warn/fail lines); `--json`
  prints the same facts as one JSON document on stdout.

Either way, stdout holds the answer only: warnings, notes meant for a person who is not reading
the JSON, and progress go to stderr, and errors are one line on stderr (exit 1)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def people_output(parser: argparse.ArgumentParser) -> None:
    """`--json` for a command that prints for people by default."""
    parser.add_argument("--json", action="store_true", help="print one JSON document instead (for programs)")


def agent_output(parser: argparse.ArgumentParser,
                 pretty_help: str = "print for people (the default on a terminal)") -> None:
    """`--json` and `--pretty` for a command that answers agents and scripts (see `wants_pretty`)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--json", action="store_true",
                       help="print one JSON document (the default when the output is not a terminal)")
    group.add_argument("--pretty", action="store_true", help=pretty_help)


def wants_pretty(args: argparse.Namespace) -> bool:
    """People's output for an agent-facing command: asked for, or the default on a terminal."""
    if args.pretty or args.json:
        return bool(args.pretty)
    return sys.stdout.isatty()


def print_json(doc: Any, compact: bool = False) -> None:
    """`doc` on stdout as indented JSON (orjson: numpy scalars and dataclasses serialise too); with
    `compact`, on one line when stdout is not a terminal: a program or an agent reads it, and an
    answer cut to a token budget counts compact JSON (indentation would be a third more)."""
    import orjson  # noqa: PLC0415 - not for `engram --help`

    indent = not (compact and not sys.stdout.isatty())
    sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2 if indent else 0).decode() + "\n")


def print_within(text: str, budget: int | None, again: str, page: int | None = None) -> None:
    """`text` for people on stdout, within `budget` tokens (None or 0: whole). A terminal is not
    proof that a person reads it (an agent's shell may run in a pseudo-terminal), so people's text
    of an agent-facing answer keeps to a budget as its JSON does: whole lines up to it, then one
    line saying what was left out and `again`, the command that shows more. With `page` (explain's
    --page), the text is read in pages of the budget as the JSON is: that page is printed, and the
    last line names the next."""
    from engram.errors import BadInput  # noqa: PLC0415
    from engram.query.budget import TOKEN_BYTES, tokens  # noqa: PLC0415 - (orjson) not for `engram --help`
    from engram.words import plural  # noqa: PLC0415

    if not budget or len(text.encode()) <= budget * TOKEN_BYTES:
        if page is not None and page > 1:
            raise BadInput(f"--page {page}: the answer is whole on page 1" + (f" at a {budget}-token budget"
                                                                               if budget else ""))
        print(text)
        return
    paged = page is not None
    pages: list[list[str]] = []
    rest = text.splitlines()
    while rest:
        kept, left = _head_lines(rest, max(budget * TOKEN_BYTES - 160, 80))  # (the last line: ~160)
        pages.append(kept)
        if not paged:
            break
        rest = left[1:] if len(left) == len(rest) else left  # one huge line: its head is its page
    page = page or 1
    if page > len(pages):
        raise BadInput(f"--page {page}: the answer has {len(pages)} pages at a {budget}-token budget")
    after = [line for later in pages[page:] for line in later] if paged else left
    print("\n".join(pages[page - 1]))
    if not after:
        return
    told = "\n".join(after)
    print(f"… {plural(len(after), 'more line')} (~{tokens(len(told.encode()))} tokens) "
          f"left out of the {budget}-token budget: {again}" + (f"; --page {page + 1}: the next page" if paged else ""))


def _head_lines(lines: list[str], room: int) -> tuple[list[str], list[str]]:
    """The first lines that fit `room` bytes (at least part of the first), and the rest."""
    used = 0
    for i, line in enumerate(lines):
        used += len(line.encode()) + 1
        if used > room:
            if i == 0:  # one huge line: its head, cut on a character and marked cut
                return [line.encode()[:max(room - 3, 0)].decode(errors="ignore") + "…"], lines
            return lines[:i], lines[i:]
    return lines, []


def writable_output(out: Path, store_dir: Path | None = None) -> None:
    """Refuse `-o FILE` in a folder that is not there, or naming a folder, before any work: the
    write made the missing folders (a typo'd path became a new tree, reported as written). And
    refuse a file inside `store_dir` (`.engram/`): an export written over the memory log erased
    every memory."""
    import os  # noqa: PLC0415

    from engram.errors import BadInput  # noqa: PLC0415

    if store_dir is not None:
        real, store = os.path.realpath(out), os.path.realpath(store_dir)
        if real == store or real.startswith(store.rstrip(os.sep) + os.sep):
            raise BadInput(f"-o {out}: inside engram's store ({store_dir}), whose files an export would write "
                           "over; write it elsewhere")
    if out.is_dir():
        raise BadInput(f"-o {out}: a directory; name the file to write")
    if not out.parent.is_dir():
        raise BadInput(f"-o {out}: no such directory {out.parent}")
