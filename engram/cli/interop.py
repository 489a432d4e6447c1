"""`engram export --agent-trace` and `engram import --agent-trace`: Engram's evidence written as,
and read from, Agent Trace records (engram.interop.agent_trace; docs/interop.md). git-ai notes
and Entire checkpoint branches need no command: `engram ingest` reads them."""

from __future__ import annotations

import argparse
import sys
from contextlib import closing
from pathlib import Path

from engram.cli.context import store_of
from engram.cli.output import people_output, writable_output


def cmd_export(args: argparse.Namespace) -> int:
    import orjson

    from engram.cli.query import _ready_db
    from engram.interop.agent_trace import export_record

    from engram.errors import BadInput

    store = store_of(args)
    if args.output:
        writable_output(Path(args.output), store.dir)
    with closing(_ready_db(store)) as db:
        record = export_record(store, db, args.target, Path.cwd())
    line = orjson.dumps(record) + b"\n"
    if args.output:
        from engram.fsutil import atomic_write

        try:
            atomic_write(Path(args.output), line)
        except OSError as exc:
            raise BadInput(f"-o {args.output}: cannot write it ({exc.strerror or exc})") from None
        ranges = sum(len(c["ranges"]) for f in record["files"] for c in f["conversations"])
        from engram.words import plural

        print(f"wrote an Agent Trace record of {plural(len(record['files']), 'file')}, {plural(ranges, 'range')} "
              f"to {args.output}", file=sys.stderr)
    else:
        sys.stdout.buffer.write(line)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from engram.errors import BadInput
    from engram.interop.agent_trace import import_records, parse_records

    store = store_of(args)
    if args.file == "-":
        data, name = sys.stdin.buffer.read(), "standard input"
    else:
        path = Path(args.file)
        if not path.is_file():
            raise BadInput(f"{args.file}: " + ("a directory; name the Agent Trace file (JSON Lines) in it"
                                              if path.is_dir() else "not a regular file; give the Agent Trace "
                                              "file, or - for standard input" if path.exists() else "no such file"))
        data, name = path.read_bytes(), args.file
    report = import_records(store, parse_records(data, name))
    if args.json:
        from engram.cli.output import print_json

        print_json(report.as_dict())
    else:
        print(report.summary())
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `export` and `import` to the command line."""
    s = sub.add_parser("export", help="write the evidence as an Agent Trace record (JSON Lines) of a commit or file")
    s.add_argument("--agent-trace", action="store_true", required=True,
                   help="the format (Agent Trace 0.1.0, cursor/agent-trace); the only one so far")
    s.add_argument("target", nargs="?", metavar="REV|FILE",
                   help="a commit (the lines it added; default HEAD) or a file of the working tree (all its lines)")
    s.add_argument("-o", "--output", metavar="FILE", help="write the record to FILE instead of standard output")
    s.set_defaults(func=cmd_export)

    s = sub.add_parser("import", help="add Agent Trace records to the evidence (as tapes explain reads)")
    s.add_argument("--agent-trace", action="store_true", required=True, help="the format (Agent Trace 0.x or 1.x)")
    s.add_argument("file", metavar="FILE", help="a record, a JSON array of records or JSON Lines; - for stdin")
    people_output(s)
    s.set_defaults(func=cmd_import)
