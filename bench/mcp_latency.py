#!/usr/bin/env python3
"""Measures the MCP tool-call latency of `explain` (20-line spans, default windows) over stdio and
HTTP, against the in-process explain on one open connection (the floor) and each transport's
`tapes(limit=1)` call (its own cost), measured in the same run.

    python bench/mcp_latency.py --repo /tmp/engram-scale-run0-XXXX            # a store scale.py kept
    python bench/mcp_latency.py --corpus bench/data/c100m                      # builds a 100 MB store first

Against one ingested store it times `tools/call explain {file, start_line, end_line}` (the tool's
defaults: before=2, after=2, brief=False) on `--spans` 20-line spans of code the sessions wrote
(sampled as in bench/scale.py and written into the working tree), `--rounds` passes each after
`--warmup` untimed calls, through:

1. in-process core: engram.query.explain.explain on one open connection (same options) - the floor;
2. in-process MCP: the SDK's `mcp.Client` connected to `build_mcp(...)` in memory (the tool body:
   a connection per call, bounding, pydantic, JSON-RPC objects; no transport);
3. stdio: `mcp.Client(StdioServerParameters(engram mcp))`, the server a subprocess;
4. HTTP: `engram lsp` as a subprocess driven by a minimal LSP client on its stdin/stdout
   (initialize with rootUri = the repository, initialized), then `.engram/run/mcp.json` gives the
   URL and bearer token of the streamable-HTTP endpoint the language server starts, called with
   `mcp.Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=...)))`.

Wall p50/p99 per call, client CPU per call, and for the subprocess transports the server's CPU per
call (from /proc/PID/stat). Target: HTTP p99 <= 30 ms. The machine is shared: read CPU next to wall.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (SPAN_LINES, SpanCase, cold_start_ingest, engram_command, engram_files,  # noqa: E402
                    engram_version, fmt_table, index_bytes, index_readonly, load, machine, pct, sample_spans,
                    start_lsp, verdict, warm_cache)

TARGET_HTTP_P99_MS = 30.0
FLOOR_CALLS = 100
SPAN_DIR = "_mcp_spans"
CLK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> float:
    """user+sys CPU seconds of a process (and its reaped children are not counted)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / CLK


def children_matching(word: str) -> list[int]:
    out = []
    me = os.getpid()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == me and word in cmd:
            out.append(int(d.name))
    return out


@dataclass
class Series:
    name: str
    wall: list[float] = field(default_factory=list)
    client_cpu: float = 0.0  # seconds over the timed calls
    server_cpu: float | None = None
    top1: int = 0
    n_checked: int = 0
    errors: int = 0
    note: str = ""

    def cells(self) -> list[str]:
        n = max(1, len(self.wall))
        server = f"{self.server_cpu / n * 1000:.2f} ms" if self.server_cpu is not None else "-"
        return [self.name, f"{pct(self.wall, 50) * 1000:.2f} ms", f"{pct(self.wall, 90) * 1000:.2f} ms",
                f"{pct(self.wall, 99) * 1000:.2f} ms", f"{self.client_cpu / n * 1000:.2f} ms", server,
                f"{self.top1}/{self.n_checked}", str(len(self.wall)) + (f", {self.errors} errors" if self.errors else "")]


def args_of(c: SpanCase) -> dict[str, Any]:
    return {"file": c.rel, "start_line": c.start, "end_line": c.end}


# ------------------------------------------------------------------ in-process

def run_core(repo: Path, cases: list[SpanCase], rounds: int, warmup: int) -> Series:
    from engram.index.db import open_db
    from engram.query.explain import Options, explain
    from engram.query.spans import read_span
    from engram.store.repo import Store

    store = Store.discover(repo)
    db = open_db(store)
    opts = Options(before=2, after=2)
    s = Series("in-process engram.query.explain.explain (one connection)")
    try:
        for c in cases[:warmup]:
            explain(store, db, read_span(repo, c.rel, c.start, c.end, repo), opts)
        c0 = time.process_time()
        for r in range(rounds):
            for c in cases:
                t0 = time.perf_counter()
                doc = explain(store, db, read_span(repo, c.rel, c.start, c.end, repo), opts)
                s.wall.append(time.perf_counter() - t0)
                if r == 0:
                    s.n_checked += 1
                    s.top1 += bool(doc["sessions"]) and doc["sessions"][0]["session_id"] == c.session
        s.client_cpu = time.process_time() - c0
    finally:
        db.close()
    return s


async def drive(client: Any, name: str, cases: list[SpanCase], rounds: int, warmup: int,
                server_pid: int | None) -> Series:
    s = Series(name)
    for c in cases[:warmup]:
        await client.call_tool("explain", args_of(c))
    c0 = time.process_time()
    sc0 = proc_cpu(server_pid) if server_pid else None
    for r in range(rounds):
        for c in cases:
            t0 = time.perf_counter()
            res = await client.call_tool("explain", args_of(c))
            s.wall.append(time.perf_counter() - t0)
            if res.is_error:
                s.errors += 1
                if not s.note:
                    s.note = str(res.content)[:300]
                continue
            if r == 0:
                doc = res.structured_content or {}
                s.n_checked += 1
                s.top1 += bool(doc.get("sessions")) and doc["sessions"][0]["session_id"] == c.session
    s.client_cpu = time.process_time() - c0
    if server_pid:
        s.server_cpu = proc_cpu(server_pid) - sc0  # type: ignore[operator]
    return s


async def floor(client: Any, name: str, calls: int, server_pid: int | None) -> Series:
    """The transport's own cost: `tapes(limit=1)`, a tool that opens the index and reads one row."""
    s = Series(name + ": `tapes(limit=1)` (transport floor)")
    for _ in range(5):
        await client.call_tool("tapes", {"limit": 1})
    c0 = time.process_time()
    sc0 = proc_cpu(server_pid) if server_pid else None
    for _ in range(calls):
        t0 = time.perf_counter()
        res = await client.call_tool("tapes", {"limit": 1})
        s.wall.append(time.perf_counter() - t0)
        s.errors += bool(res.is_error)
    s.client_cpu = time.process_time() - c0
    if server_pid:
        s.server_cpu = proc_cpu(server_pid) - sc0  # type: ignore[operator]
    return s


async def run_memory(repo: Path, cases: list[SpanCase], rounds: int, warmup: int) -> list[Series]:
    from mcp import Client

    from engram.store.repo import Store
    from engram_server.mcp_tools import build_mcp, thread_runner

    server = build_mcp(lambda: Store.discover(repo), thread_runner())
    async with Client(server) as c:
        name = "in-process MCP (SDK Client on build_mcp, in memory)"
        return [await drive(c, name, cases, rounds, warmup, None), await floor(c, name, FLOOR_CALLS, None)]


async def run_stdio(repo: Path, engram: list[str], cases: list[SpanCase], rounds: int, warmup: int) -> list[Series]:
    from mcp import Client, StdioServerParameters

    exe, *rest = engram_command(engram)
    # The SDK passes only a few variables (HOME, PATH, ...) by default: give the server this process's
    # environment, so it runs the same engram (PYTHONPATH) as the other rows.
    params = StdioServerParameters(command=exe, args=[*rest, "mcp", "--repo", str(repo)], cwd=str(repo),
                                   env=dict(os.environ))
    async with Client(params) as c:
        await c.list_tools()
        pids = children_matching(" mcp")
        pid = pids[0] if len(pids) == 1 else None
        name = "stdio (`engram mcp` subprocess)"
        s = await drive(c, name, cases, rounds, warmup, pid)
        if pid is None:
            s.note = f"server pid not identified ({pids}): no server CPU"
        return [s, await floor(c, name, FLOOR_CALLS, pid)]


# ------------------------------------------------------------------ HTTP via the language server

async def run_http(repo: Path, engram: list[str], cases: list[SpanCase], rounds: int, warmup: int,
                   log: Path) -> list[Series]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    lsp, info = await asyncio.to_thread(start_lsp, [*engram_command(engram), "lsp"], repo, log)
    try:
        headers = {"Authorization": f"Bearer {info['token']}"}
        async with httpx2.AsyncClient(headers=headers) as http:
            async with Client(streamable_http_client(info["url"], http_client=http)) as c:
                await c.list_tools()
                name = "HTTP (`engram lsp` endpoint, streamable HTTP)"
                return [await drive(c, name, cases, rounds, warmup, lsp.proc.pid),
                        await floor(c, name, FLOOR_CALLS, lsp.proc.pid)]
    finally:
        lsp.close()


# ------------------------------------------------------------------ main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", type=Path, help="an ingested repository (e.g. one bench/scale.py --keep left)")
    ap.add_argument("--corpus", type=Path, help="corpus the store was built from (spans are taken from its "
                                                 "sessions); without --repo, a fresh store is ingested from it")
    ap.add_argument("--engram", default="engram", help="the engram command")
    ap.add_argument("--spans", type=int, default=100, help="20-line spans")
    ap.add_argument("--rounds", type=int, default=2, help="timed passes over the spans per transport")
    ap.add_argument("--warmup", type=int, default=10, help="untimed calls first, per transport")
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--only", nargs="*", choices=["core", "memory", "stdio", "http"],
                    default=["core", "memory", "stdio", "http"])
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, force=True)  # httpx logs every request at INFO
    for name in ("httpx", "httpx2", "mcp"):
        logging.getLogger(name).setLevel(logging.WARNING)
    engram = args.engram.split()
    projects = (args.corpus.resolve() / "projects") if args.corpus else None
    made = None
    if args.repo is None:
        if projects is None:
            raise SystemExit("mcp_latency: give --repo (an ingested repository) or --corpus")
        run = cold_start_ingest(None, engram, projects, "mcp")
        made = args.repo = run.repo
        print(f"ingested {projects} into {run.repo}: {run.wall:.1f}s wall, {run.cpu:.1f}s CPU; {run.summary}")
    repo = args.repo.resolve()
    with index_readonly(repo) as db:
        n_tapes = db.execute("SELECT count(*) FROM tapes").fetchall()[0][0]
        raw_bytes = db.execute("SELECT sum(end - start) FROM captures").fetchall()[0][0]  # source bytes captured
    idx = sum(index_bytes(repo / ".engram").values())
    print(f"machine: {machine()}")
    print(f"engram under test: {engram_version()}")
    print(f"store: {repo}: {n_tapes} tapes from {(raw_bytes or 0) / 1e6:,.0f} MB of transcripts, "
          f"index {idx / 1e6:,.0f} MB")
    cases = sample_spans(repo, args.spans, args.seed, span_dir=SPAN_DIR, corpus=projects)
    warm_cache(engram_files(repo / ".engram"))
    print(f"spans: {len(cases)} x {SPAN_LINES} lines; {args.rounds} rounds after {args.warmup} warm-up calls "
          f"per transport; load average {load()}", flush=True)

    series: list[Series] = []
    log = Path(tempfile.gettempdir()) / f"engram-mcp-latency-lsp-{os.getpid()}.log"
    for what in args.only:
        if what == "core":
            got = [run_core(repo, cases, args.rounds, args.warmup)]
        elif what == "memory":
            got = asyncio.run(run_memory(repo, cases, args.rounds, args.warmup))
        elif what == "stdio":
            got = asyncio.run(run_stdio(repo, engram, cases, args.rounds, args.warmup))
        else:
            got = asyncio.run(run_http(repo, engram, cases, args.rounds, args.warmup, log))
        for s in got:
            print(f"  {s.name}: p50 {pct(s.wall, 50) * 1000:.2f} ms, p99 "
                  f"{pct(s.wall, 99) * 1000:.2f} ms (load {load()}){' ' + s.note if s.note else ''}",
                  flush=True)
        series.extend(got)

    print()
    print(f"## MCP `explain` latency: {n_tapes} tapes / {(raw_bytes or 0) / 1e6:,.0f} MB of transcripts, "
          f"{machine()}")
    print(f"engram: {engram_version()}; load average at the end: {load()}")
    print()
    print(fmt_table(["path", "p50", "p90", "p99", "client CPU/call", "server CPU/call", "recall@1", "calls"],
                    [s.cells() for s in series]))
    http = next((s for s in series if s.name.startswith("HTTP") and "floor" not in s.name), None)
    if http is not None:
        p99 = pct(http.wall, 99) * 1000
        print(f"\nHTTP p99 {p99:.1f} ms — target <= {TARGET_HTTP_P99_MS:.0f} ms: "
              f"{verdict(p99 <= TARGET_HTTP_P99_MS)}")
    shutil.rmtree(repo / SPAN_DIR, ignore_errors=True)
    if made is not None:
        print(f"\nrepository kept: {made}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
