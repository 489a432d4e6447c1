#!/usr/bin/env python3
"""Generates a seeded, deterministic corpus of realistic Claude Code session transcripts; measures
nothing itself and has no reference: capture.py and scale.py measure on what it writes (and run
it when their corpus is missing). `--check` verifies every generated structuredPatch.

    python bench/gen_sessions.py --out bench/data/c100m --size 100MB [--seed 1] [--jobs 2] [--check]

Layout written (the shape of `~/.claude/projects/`)::

    OUT/projects/-home-dev-proj/<session-uuid>.jsonl
    OUT/projects/-home-dev-proj/<session-uuid>/subagents/agent-<id>.jsonl

What a session looks like (modelled on the real CC 2.1.39 files in
`shared/fixtures/transcripts/claude-spotter/` and `shared/reference/transcript-formats.md` §1):

- every record carries the real envelope (parentUuid chain, isSidechain, userType, cwd
  "/home/dev/proj", sessionId, version "2.1.39", gitBranch, slug, type, uuid, increasing timestamp);
- `progress` records (hook_progress around every tool call, bash_progress while commands run,
  agent_progress for subagents) are about two thirds of all records, as in real data;
- user prompts in prose; assistant responses split into one record per content block
  (thinking with signature, text, tool_use with `toolu_…` ids) sharing message.id/requestId;
- tool results with `toolUseResult`: Read (cat -n text in the message AND `file{…}`),
  Edit (old/new strings, originalFile, structuredPatch with 3 lines of context), Write
  create/update, Bash (stdout/stderr of plausible build/test output), Grep, Glob, Task;
- failures (string toolUseResult "Error: …" with `is_error: true`, user rejections), turn-end
  system records, file-history snapshots, occasional compaction (system compact_boundary +
  user isCompactSummary + `agent-acompact-*` sidechain) and Task subagent files.

Code content is synthesised from per-language templates (Python, TypeScript, Elixir, Go) and
seeded random identifiers. A deterministic "base repository" is shared by all sessions (so the
same file read in two sessions is identical, like boilerplate and imports are in real life), but
each session evolves its own copy of the files it touches, so different sessions edit different
code. Every Edit/Write keeps a per-session file state: applying `structuredPatch` to
`originalFile` gives exactly the new file.

Determinism: the corpus depends only on --seed and --size (not on --jobs or the machine).
Sizes use decimal units: 1MB = 10**6 bytes, 1GB = 10**9 bytes.
"""

from __future__ import annotations

import argparse
import base64
import math
import os
import random
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import orjson

CWD = "/home/dev/proj"
PROJECT_DIR = "-home-dev-proj"
VERSION = "2.1.39"
MIN_SESSION = 300_000
MAX_SESSION = 8_000_000
EPOCH_MS = 1_767_600_000_000  # 2026-01-05T08:00:00Z

_dumps = orjson.dumps
B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

# ------------------------------------------------------------------ vocabulary

NOUNS = """account address alert annotation archive asset audit batch bucket budget cache cart channel
checkpoint claim client cluster comment commit config connection contact context cursor customer
dashboard dataset deadline delivery device digest document draft entry event export feature feed field
filter fingerprint folder frame gateway grant graph group handler header history hook index invoice item
job journal key label layer ledger limit link listing lock manifest member message metric migration
module monitor note notification offset order owner package page panel parcel partition patch payload
payment permission pipeline plan policy pool post preview price profile project prompt queue quota rating
receipt record region release report request resource response review role route rule sample schedule
schema scope segment session setting shard shipment signal snapshot source span stage status step store
stream subscription summary tag tape task team template tenant thread ticket timeline token topic trace
transaction transcript trigger upload user vendor version view volume wallet warehouse webhook widget
window worker workspace""".split()
VERBS = """add apply archive assign build cache calculate cancel check clean close collect compare compute
convert count create decode delete deliver detect dispatch emit encode enqueue ensure estimate expand
export extract fetch filter find flush format generate group handle hydrate index infer init inspect load
lookup merge migrate normalize notify open parse persist prepare process publish purge read rebuild
record refresh register reload remove render reset resolve restore retry route sanitize save scan
schedule score select send serialize sort split start stop store summarize sync track transform trim
update upload validate verify watch write""".split()
ADJS = """active batched cached current default dirty empty expired external failed final global hidden
initial internal last latest local max min missing next pending primary private public raw recent remote
safe shared stale total unique valid""".split()
EXCS = {"py": ["ValueError", "KeyError", "RuntimeError", "TimeoutError", "LookupError", "OSError"],
        "ts": ["TypeError", "RangeError", "Error"], "ex": ["ArgumentError", "RuntimeError", "KeyError"],
        "go": ["error"]}


def _snake(ws: Iterable[str]) -> str:
    return "_".join(ws)


def _camel(ws: list[str]) -> str:
    return ws[0] + "".join(w.capitalize() for w in ws[1:])


def _pascal(ws: Iterable[str]) -> str:
    return "".join(w.capitalize() for w in ws)


def _uuid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


def _b62(rng: random.Random, n: int) -> str:
    return "".join(rng.choices(B62, k=n))


def _hex(rng: random.Random, n: int) -> str:
    return f"{rng.getrandbits(4 * n):0{n}x}"


def _ts(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


# ------------------------------------------------------------------ code synthesis

LANGS = ("py", "ts", "ex", "go")
EXT_LANG = {".py": "py", ".ts": "ts", ".tsx": "ts", ".ex": "ex", ".exs": "ex", ".go": "go"}
INDENT = {"py": "    ", "ts": "  ", "ex": "  ", "go": "\t"}

# Statement templates: "»" is one indentation level of the language; slots are filled per use.
STMTS: dict[str, list[list[str]]] = {
    "py": [
        ["{v} = {fn}({a}, {b})"],
        ["{v} = self.{attr}.get({a}, {num})"],
        ["if {v} is None:", "»return {default}"],
        ["if not {a}:", "»raise {Exc}(\"{noun} must not be empty\")"],
        ["for {item} in {coll}:", "»{v}.append({item}.{attr})"],
        ["for {item} in {coll}:", "»if {item}.{attr} > {num}:", "»»{v} += {item}.{attr2}"],
        ["log.debug(\"{verb} {noun} %s\", {a})"],
        ["{v} = [{item}.{attr} for {item} in {coll} if {item}.{attr2}]"],
        ["{v} = {{{item}.{attr}: {item} for {item} in {coll}}}"],
        ["try:", "»{v} = {fn}({a})", "except {Exc} as exc:", "»log.warning(\"{verb} {noun} failed: %s\", exc)",
         "»{v} = {default}"],
        ["self.{attr} = {v}"],
        ["{v} = {a}.{attr} or {num}"],
        ["with self._lock:", "»self.{attr}[{a}] = {v}"],
        ["assert {v} is not None, \"{noun} missing\""],
        ["{v} = sorted({coll}, key=lambda {item}: {item}.{attr})"],
        ["{v} = max({num}, len({coll}) - {a})"],
        ["{v} = \"{noun}:{{}}\".format({a})"],
        ["if isinstance({a}, dict):", "»{v} = {a}.get(\"{attr}\")"],
        ["{v} += {num}"],
        ["yield from self._{fn}({a})"],
    ],
    "ts": [
        ["const {v} = {fn}({a}, {b});"],
        ["const {v} = this.{attr}.get({a}) ?? {num};"],
        ["if (!{a}) {", "»return {default};", "}"],
        ["if ({v} === undefined) {", "»throw new {Exc}(`{noun} not found: ${{{a}}}`);", "}"],
        ["for (const {item} of {coll}) {", "»{v}.push({item}.{attr});", "}"],
        ["for (const {item} of {coll}) {", "»if ({item}.{attr} > {num}) {", "»»{v} += {item}.{attr2};", "»}", "}"],
        ["logger.debug(`{verb} {noun} ${{{a}}}`);"],
        ["const {v} = {coll}.filter(({item}) => {item}.{attr} > {num});"],
        ["const {v} = new Map({coll}.map(({item}) => [{item}.{attr}, {item}]));"],
        ["try {", "»{v} = await {fn}({a});", "} catch (err) {", "»logger.warn(`{verb} {noun} failed`, err);",
         "»{v} = {default};", "}"],
        ["this.{attr} = {v};"],
        ["let {v} = {a}.{attr} || {num};"],
        ["this.{attr}.set({a}, {v});"],
        ["const {v} = [...{coll}].sort((x, y) => x.{attr} - y.{attr});"],
        ["const {{ {attr}, {attr2} }} = {a};"],
        ["{v} += {num};"],
        ["emit(\"{noun}:{verb}\", {{ {a}, {v} }});"],
    ],
    "ex": [
        ["{v} = {Mod}.{fn}({a}, {b})"],
        ["{v} = Map.get({a}, :{attr}, {num})"],
        ["{v} = Enum.map({coll}, fn {item} -> {item}.{attr} end)"],
        ["case {Mod}.{fn}({a}) do", "»{{:ok, {v}}} -> {v}", "»{{:error, reason}} -> Logger.warning(\"{verb} {noun} failed: #{{inspect(reason)}}\")",
         "end"],
        ["Logger.debug(\"{verb} {noun} #{{inspect({a})}}\")"],
        ["{v} =", "»{coll}", "»|> Enum.filter(&(&1.{attr} > {num}))", "»|> Enum.count()"],
        ["if {a} == nil do", "»raise {Exc}, \"{noun} is required\"", "end"],
        ["{v} = %{{{a} | {attr}: {b}}}"],
        ["{{:ok, {v}}} = Repo.insert({Mod}.changeset(%{Mod}{{}}, {a}))"],
        ["{v} = Keyword.get(opts, :{attr}, {default})"],
        ["send(self(), {{:{verb}, {a}}})"],
        ["{v} = Enum.reduce({coll}, 0, fn {item}, acc -> acc + {item}.{attr} end)"],
        ["with {{:ok, {v}}} <- {Mod}.{fn}({a}),", "»{{:ok, {item}}} <- {Mod}.{fn2}({v}) do", "»{{:ok, {item}}}", "end"],
    ],
    "go": [
        ["{v}, err := s.{fn}(ctx, {a})", "if err != nil {", "»return {zero}, fmt.Errorf(\"{verb} {noun}: %w\", err)", "}"],
        ["{v} := s.{attr}[{a}]"],
        ["for _, {item} := range {coll} {", "»{v} = append({v}, {item}.{Attr})", "}"],
        ["for _, {item} := range {coll} {", "»if {item}.{Attr} > {num} {", "»»{v} += {item}.{Attr2}", "»}", "}"],
        ["s.mu.Lock()", "defer s.mu.Unlock()"],
        ["{v} := len({coll})"],
        ["log.Printf(\"{verb} {noun} %v\", {a})"],
        ["if {a} == nil {", "»return {zero}, Err{Noun}NotFound", "}"],
        ["{v} := make(map[string]*{Type}, len({coll}))"],
        ["s.{attr}[{a}] = {v}"],
        ["{v} := strings.TrimSpace({a}.{Attr})"],
        ["select {", "case <-ctx.Done():", "»return {zero}, ctx.Err()", "default:", "}"],
        ["{v} += {num}"],
    ],
}
# Templates above were written str.format-style; slots are now substituted by regex, so literal
# braces are single.
for _tpls in STMTS.values():
    for _tpl in _tpls:
        _tpl[:] = [ln.replace("{{", "{").replace("}}", "}") for ln in _tpl]
_SLOT_RE = re.compile(r"\{(\w+)\}")
DEFAULTS = {"py": ["None", "0", "[]", "{}", "False", "\"\""], "ts": ["null", "0", "[]", "undefined", "false", "\"\""],
            "ex": ["nil", "0", "[]", "%{}", "false", ":error"], "go": ["nil", "0", "\"\"", "false"]}


class CodeGen:
    """Template-driven source generator for one language, driven by the caller's RNG."""

    def __init__(self, lang: str, rng: random.Random) -> None:
        self.lang = lang
        self.rng = rng
        self.unit = INDENT[lang]
        self.templates = STMTS[lang]

    # identifiers -------------------------------------------------------
    def var(self) -> str:
        r = self.rng
        ws = [r.choice(ADJS), r.choice(NOUNS)] if r.random() < 0.5 else [r.choice(NOUNS)]
        if r.random() < 0.3:
            ws.append(r.choice(("ids", "count", "map", "list", "set", "ref", "opts", "rows")))
        return _camel(ws) if self.lang in ("ts", "go") else _snake(ws)

    def fname(self) -> str:
        r = self.rng
        ws = [r.choice(VERBS), r.choice(NOUNS)]
        if r.random() < 0.4:
            ws.insert(1, r.choice(ADJS))
        if self.lang == "go":
            return _pascal(ws)
        return _camel(ws) if self.lang == "ts" else _snake(ws)

    def tname(self) -> str:
        r = self.rng
        return _pascal([r.choice(NOUNS), r.choice(NOUNS)]) if r.random() < 0.6 else _pascal([r.choice(NOUNS)])

    def _slots(self) -> dict[str, Any]:
        r = self.rng
        n1, n2 = r.choice(NOUNS), r.choice(NOUNS)
        lang = self.lang
        return {
            "v": self.var(), "a": self.var(), "b": self.var(), "item": n1 if lang != "go" else n1[:1],
            "coll": self.var() + ("s" if lang != "ts" else "List"),
            "fn": self.fname(), "fn2": self.fname(),
            "attr": n2 if lang != "ts" else _camel([n2, r.choice(NOUNS)]),
            "attr2": r.choice(NOUNS), "Attr": n2.capitalize(), "Attr2": r.choice(NOUNS).capitalize(),
            "num": r.choice(("0", "1", "2", "3", "8", "10", "16", "32", "64", "100", "250", "1000", "4096")),
            "default": r.choice(DEFAULTS[lang]), "Exc": r.choice(EXCS[lang]), "noun": n1, "Noun": n1.capitalize(),
            "verb": r.choice(VERBS), "Mod": _pascal([r.choice(NOUNS)]), "Type": self.tname(),
            "zero": r.choice(("nil", "0", "\"\"", "false")),
        }

    def statements(self, indent: str, n: int) -> list[str]:
        out: list[str] = []
        unit = self.unit
        sub = _SLOT_RE.sub
        for _ in range(n):
            tpl = self.rng.choice(self.templates)
            s = self._slots()
            get = s.__getitem__
            for line in tpl:
                depth = line.count("»")
                out.append(indent + unit * depth + sub(lambda m: get(m.group(1)), line.replace("»", "")))
        return out

    def doc(self) -> str:
        r = self.rng
        return (f"{r.choice(VERBS).capitalize()} the {r.choice(ADJS)} {r.choice(NOUNS)} "
                f"{r.choice(('for', 'of', 'from', 'into', 'before'))} a {r.choice(NOUNS)}")

    # units ---------------------------------------------------------------
    def unit_lines(self, method: bool = False, test: bool = False) -> list[str]:
        """One function (or method when `method`), ending without a blank line."""
        r = self.rng
        n = r.randint(2, 7)
        name = self.fname()
        if self.lang == "py":
            ind = self.unit * (2 if method else 1)
            head = self.unit if method else ""
            if test:
                return [f"{head}def test_{name}({'self' if method else ''}) -> None:",
                        *self.statements(ind, n), f"{ind}assert {self.var()} == {r.choice(DEFAULTS['py'])}"]
            args = ", ".join(f"{self.var()}: {r.choice(('int', 'str', 'list[str]', 'dict[str, Any]', self.tname()))}"
                             for _ in range(r.randint(0, 3)))
            params = ("self" + (", " + args if args else "")) if method else args
            ret = r.choice(("None", "int", "str", "bool", self.tname(), f"list[{self.tname()}]"))
            return [f"{head}def {name}({params}) -> {ret}:", f"{ind}\"\"\"{self.doc()}.\"\"\"",
                    *self.statements(ind, n), f"{ind}return {self.var()}"]
        if self.lang == "ts":
            ind = self.unit * (2 if method else 1)
            if test:
                return [f"  it(\"{r.choice(VERBS)}s the {r.choice(ADJS)} {r.choice(NOUNS)}\", async () => {{",
                        *self.statements("    ", n), f"    expect({self.var()}).toEqual({r.choice(DEFAULTS['ts'])});", "  });"]
            args = ", ".join(f"{self.var()}: {r.choice(('number', 'string', 'string[]', self.tname()))}"
                             for _ in range(r.randint(0, 3)))
            ret = r.choice(("void", "number", "string", "boolean", self.tname(), f"Promise<{self.tname()}>"))
            head = f"  {'async ' if 'Promise' in ret else ''}{name}({args}): {ret} {{" if method else \
                f"export {'async ' if 'Promise' in ret else ''}function {name}({args}): {ret} {{"
            close = "  }" if method else "}"
            return [head, *self.statements(ind, n), f"{ind}return {self.var()};", close]
        if self.lang == "ex":
            if test:
                return [f"  test \"{r.choice(VERBS)}s {r.choice(ADJS)} {r.choice(NOUNS)}\" do",
                        *self.statements("    ", n), f"    assert {self.var()} == {r.choice(DEFAULTS['ex'])}", "  end"]
            args = ", ".join(self.var() for _ in range(r.randint(1, 3)))
            priv = r.random() < 0.3
            lines = [] if priv else ["  @doc \"\"\"", f"  {self.doc()}.", "  \"\"\""]
            return [*lines, f"  {'defp' if priv else 'def'} {name}({args}) do", *self.statements("    ", n),
                    f"    {{:ok, {self.var()}}}", "  end"]
        # go
        if test:
            return [f"func Test{name}(t *testing.T) {{", *self.statements("\t", n),
                    f"\tif got := {self.var()}; got != {r.choice(DEFAULTS['go'])} {{",
                    "\t\tt.Fatalf(\"unexpected %v\", got)", "\t}", "}"]
        recv = f"(s *{self.tname()}) " if r.random() < 0.7 else ""
        args = ", ".join(f"{self.var()} {r.choice(('string', 'int', 'int64', '[]string', '*' + self.tname()))}"
                         for _ in range(r.randint(0, 2)))
        ret = r.choice(("error", f"(*{self.tname()}, error)", "(int, error)", "bool", "string"))
        return [f"// {name} {self.doc().lower()}.", f"func {recv}{name}(ctx context.Context{', ' + args if args else ''}) {ret} {{",
                *self.statements("\t", n), f"\treturn {self.var()}", "}"]

    def file_text(self, path: str, n_units: int) -> str:
        """A whole source file for `path` (header, imports, types, `n_units` functions)."""
        r = self.rng
        stem = path.rsplit("/", 1)[-1].split(".", 1)[0]
        test = "test" in stem
        parts = [p for p in path.split("/")[:-1] if p not in ("services", "lib", "internal", "web", "src", "cmd", "test", "tests")]
        lines: list[str]
        if self.lang == "py":
            lines = [f"\"\"\"{self.doc()}.\"\"\"", "", "from __future__ import annotations", "", "import logging"]
            lines += sorted(r.sample(["import os", "import re", "import time", "import json", "import threading",
                                      "from collections import defaultdict", "from pathlib import Path"], r.randint(1, 4)))
            lines += ["from dataclasses import dataclass, field", "from typing import Any", ""]
            for _ in range(r.randint(1, 4)):
                lines.append(f"from proj.{r.choice(NOUNS)}.{r.choice(NOUNS)} import {self.tname()}")
            if test:
                lines += ["", "import pytest"]
            lines += ["", "log = logging.getLogger(__name__)", "", f"{r.choice(ADJS).upper()}_{r.choice(NOUNS).upper()} = {r.randint(1, 5000)}", ""]
            for i in range(n_units):
                lines.append("")
                if not test and r.random() < 0.25:
                    lines += ["@dataclass", f"class {self.tname()}:", f"    \"\"\"{self.doc()}.\"\"\"", ""]
                    for _ in range(r.randint(2, 5)):
                        lines.append(f"    {self.var()}: {r.choice(('int', 'str', 'bool', 'float'))} = {r.choice(('0', 'False', '0.0', 'None'))}")
                    for _ in range(r.randint(1, 3)):
                        lines.append("")
                        lines += self.unit_lines(method=True)
                    lines.append("")
                else:
                    lines += self.unit_lines(test=test)
                    lines.append("")
        elif self.lang == "ts":
            lines = []
            for _ in range(r.randint(2, 5)):
                t = self.tname()
                lines.append(f"import {{ {t} }} from \"../{r.choice(NOUNS)}/{t}\";")
            lines += ["import { logger } from \"../lib/logger\";", ""]
            if test:
                lines += ["import { describe, expect, it } from \"vitest\";", "", f"describe(\"{stem}\", () => {{"]
                for _ in range(n_units):
                    lines += self.unit_lines(test=True)
                    lines.append("")
                lines.append("});")
            else:
                for i in range(n_units):
                    if r.random() < 0.2:
                        lines += [f"export interface {self.tname()} {{"]
                        lines += [f"  {self.var()}{'?' if r.random() < 0.3 else ''}: {r.choice(('number', 'string', 'boolean', self.tname()))};"
                                  for _ in range(r.randint(2, 6))]
                        lines += ["}", ""]
                    if r.random() < 0.25:
                        lines += [f"export class {self.tname()} {{", f"  private readonly {self.var()} = new Map<string, {self.tname()}>();", ""]
                        for _ in range(r.randint(1, 3)):
                            lines += self.unit_lines(method=True)
                            lines.append("")
                        lines[-1] = "}"
                        lines.append("")
                    else:
                        lines += self.unit_lines()
                        lines.append("")
        elif self.lang == "ex":
            mod = "Proj." + ".".join(_pascal(p.split("_")) for p in parts[1:] + [stem] if p not in ("proj",))
            if test:
                lines = [f"defmodule {mod} do", "  use Proj.DataCase, async: true", "",
                         f"  alias Proj.{_pascal([r.choice(NOUNS)])}", ""]
                for _ in range(n_units):
                    lines += self.unit_lines(test=True)
                    lines.append("")
            else:
                lines = [f"defmodule {mod} do", "  @moduledoc \"\"\"", f"  {self.doc()}.", "  \"\"\"",
                         "  require Logger", "", "  alias Proj.Repo"]
                lines += [f"  alias Proj.{_pascal([r.choice(NOUNS)])}.{self.tname()}" for _ in range(r.randint(1, 3))]
                lines += ["", f"  @{r.choice(ADJS)}_{r.choice(NOUNS)} {r.randint(1, 5000)}", ""]
                for _ in range(n_units):
                    lines += self.unit_lines()
                    lines.append("")
            lines[-1] = "end"
        else:
            pkg = parts[-1] if parts else "main"
            lines = [f"// Package {pkg} {self.doc().lower()}.", f"package {pkg.replace('-', '')}", "", "import ("]
            lines += sorted(f"\t\"{m}\"" for m in r.sample(["context", "errors", "fmt", "log", "sort", "strings", "sync", "time"],
                                                          r.randint(2, 5)))
            if test:
                lines.append("\t\"testing\"")
            lines += [")", ""]
            if not test:
                t = self.tname()
                lines += [f"// {t} {self.doc().lower()}.", f"type {t} struct {{", "\tmu    sync.Mutex"]
                lines += [f"\t{self.var()} {r.choice(('int', 'string', 'bool', 'time.Duration', 'map[string]*' + self.tname()))}"
                          for _ in range(r.randint(2, 5))]
                lines += ["}", ""]
            for _ in range(n_units):
                lines += self.unit_lines(test=test)
                lines.append("")
        return "\n".join(lines).rstrip("\n") + "\n"


def is_simple(line: str, lang: str) -> bool:
    """A line that can be replaced or deleted without unbalancing blocks."""
    s = line.strip()
    if not s or not line[:1].isspace():
        return False
    if lang == "py":
        return not s.endswith(":") and not s.startswith(("def ", "class ", "@", "\"\"\"", "return", "yield"))
    if lang == "ex":
        return not (s.endswith(" do") or s == "end" or s.startswith(("def", "@", "\"\"\"", "end", "{:", "|>", "->"))
                    or "->" in s or s.endswith((",", "=")))
    return not (s.endswith(("{", "}", "(", ")", ":", "});", "});")) or s.startswith(("}", "case", "default", "return", "func", "//"))
                or s in ("});", ")"))


_SYMBOL_RE = {
    "py": re.compile(r"^\s*def (\w+)", re.M),
    "ts": re.compile(r"^(?:export )?(?:async )?function (\w+)|^  (?:async )?(\w+)\(", re.M),
    "ex": re.compile(r"^\s*defp? (\w+)", re.M),
    "go": re.compile(r"^func (?:\([^)]*\) )?(\w+)", re.M),
}


# ------------------------------------------------------------------ the shared base repository


class BaseRepo:
    """The deterministic starting state of the project shared by every session (lazy, cached)."""

    def __init__(self, seed: int, n_per_lang: int = 320) -> None:
        self.seed = seed
        r = random.Random(f"{seed}:repo")
        self.paths: dict[str, list[str]] = {lang: [] for lang in LANGS}
        self.by_dir: dict[str, list[str]] = {}
        self._cache: dict[str, str] = {}
        seen: set[str] = set()
        svcs = r.sample(NOUNS, 6)
        areas = r.sample(NOUNS, 8)
        ctxs = r.sample(NOUNS, 8)
        pkgs = r.sample(NOUNS, 10)
        for lang in LANGS:
            while len(self.paths[lang]) < n_per_lang:
                n1, n2 = r.choice(NOUNS), r.choice(NOUNS)
                if lang == "py":
                    svc, pkg = r.choice(svcs), r.choice(NOUNS[:60])
                    p = (f"services/{svc}/tests/test_{n1}_{n2}.py" if r.random() < 0.2
                         else f"services/{svc}/{svc}/{pkg}/{n1}_{n2}.py")
                elif lang == "ts":
                    area = r.choice(areas)
                    p = (f"web/src/{area}/{_camel([n1, n2])}.test.ts" if r.random() < 0.2 else
                         f"web/src/{area}/{_pascal([n1, n2])}.{'tsx' if r.random() < 0.3 else 'ts'}")
                elif lang == "ex":
                    c = r.choice(ctxs)
                    p = (f"test/proj/{c}/{n1}_{n2}_test.exs" if r.random() < 0.2 else
                         f"lib/proj_web/live/{n1}_{n2}_live.ex" if r.random() < 0.15 else f"lib/proj/{c}/{n1}_{n2}.ex")
                else:
                    pk = r.choice(pkgs)
                    p = (f"internal/{pk}/{n1}_{n2}_test.go" if r.random() < 0.2 else
                         f"cmd/{pk}/main.go" if r.random() < 0.05 else f"internal/{pk}/{n1}_{n2}.go")
                if p in seen:
                    continue
                seen.add(p)
                self.paths[lang].append(p)
                self.by_dir.setdefault(p.rsplit("/", 1)[0], []).append(p)

    def content(self, path: str) -> str:
        text = self._cache.get(path)
        if text is None:
            r = random.Random(f"{self.seed}:file:{path}")
            lang = EXT_LANG[os.path.splitext(path)[1]]
            text = CodeGen(lang, r).file_text(path, r.randint(4, 18))
            self._cache[path] = text
        return text


# ------------------------------------------------------------------ diffs


def make_hunks(old: list[str], changes: list[tuple[int, int, list[str]]], ctx: int = 3
               ) -> tuple[list[dict[str, Any]], list[str]]:
    """jsdiff-style structuredPatch hunks and the new lines for non-overlapping replacements.

    `changes` are (a, b, new_lines): old lines [a, b) (0-based) become new_lines. Common leading
    and trailing lines are trimmed first so the hunks are minimal around each change.
    """
    trimmed: list[tuple[int, int, list[str]]] = []
    for a, b, rep in sorted(changes, key=lambda c: c[0]):
        i = 0
        while a + i < b and i < len(rep) and old[a + i] == rep[i]:
            i += 1
        a, rep = a + i, rep[i:]
        j = 0
        while b - j > a and j < len(rep) and old[b - 1 - j] == rep[len(rep) - 1 - j]:
            j += 1
        b, rep = b - j, rep[:len(rep) - j]
        if a == b and not rep:
            continue
        trimmed.append((a, b, rep))
    new: list[str] = []
    pos = 0
    for a, b, rep in trimmed:
        new.extend(old[pos:a])
        new.extend(rep)
        pos = b
    new.extend(old[pos:])
    hunks: list[dict[str, Any]] = []
    n = len(old)
    delta = 0
    i = 0
    while i < len(trimmed):
        j = i
        while j + 1 < len(trimmed) and trimmed[j + 1][0] - trimmed[j][1] <= 2 * ctx:
            j += 1
        group = trimmed[i:j + 1]
        start = max(0, group[0][0] - ctx)
        end = min(n, group[-1][1] + ctx)
        lines = [" " + x for x in old[start:group[0][0]]]
        gdelta = 0
        for k, (a, b, rep) in enumerate(group):
            lines.extend("-" + x for x in old[a:b])
            lines.extend("+" + x for x in rep)
            gdelta += len(rep) - (b - a)
            nxt = group[k + 1][0] if k + 1 < len(group) else end
            lines.extend(" " + x for x in old[b:nxt])
        old_lines = end - start
        hunks.append({"oldStart": start + 1, "oldLines": old_lines, "newStart": start + 1 + delta,
                      "newLines": old_lines + gdelta, "lines": lines})
        delta += gdelta
        i = j + 1
    return hunks, new


def apply_patch(original: str, hunks: list[dict[str, Any]]) -> str:
    """Apply structuredPatch hunks to a file's text (used by --check)."""
    old = original.split("\n")
    trailing = old[-1] == ""
    if trailing:
        old.pop()
    out: list[str] = []
    pos = 0
    for h in hunks:
        start = h["oldStart"] - 1
        if start < pos:
            raise ValueError("overlapping hunks")
        out.extend(old[pos:start])
        pos = start
        for ln in h["lines"]:
            tag, text = ln[:1], ln[1:]
            if tag == "+":
                out.append(text)
            elif tag == "-":
                if old[pos] != text:
                    raise ValueError(f"- line mismatch at {pos + 1}")
                pos += 1
            elif tag == " ":
                if old[pos] != text:
                    raise ValueError(f"context mismatch at {pos + 1}")
                out.append(text)
                pos += 1
    out.extend(old[pos:])
    return "\n".join(out) + ("\n" if trailing else "")


# ------------------------------------------------------------------ prose

PROMPTS = [
    "Can you {verb} the {noun} {noun2} logic in `{path}`? It should {verb2} {adj} {noun}s before it {verb3}s them.",
    "The tests in `{test}` are failing after the last change with `{exc}`. Please investigate and fix the root cause, not just the test.",
    "Implement {feature}. {sentence} {sentence}",
    "Refactor `{fn}` so that it no longer {verb3}s the {noun2} twice. Keep the public API the same.",
    "Add a `{fn}` helper next to `{fn2}` and use it from `{path}`. {sentence}",
    "{sentence} Could you take a look at `{path}` and tell me what you think, then make the change?",
    "We need to support {adj} {noun}s in the {noun2} pipeline. {sentence} Run the tests when you're done.",
    "Rename `{fn}` to `{fn2}` everywhere and update the callers.",
    "Please review `{path}` for edge cases around {adj} {noun2}s and add tests for them.",
    "continue",
    "yes, go ahead",
    "Looks good. Now also handle the case where the {noun} is {adj}.",
]
SENTENCES = [
    "Right now the {noun} handler {verb}s every {noun2} even when it is {adj}, which is slow.",
    "The {noun2} should be {verb}ed lazily and cached per {noun}.",
    "Make sure the {adj} path still works and log a warning instead of crashing.",
    "This came up in the review of the {noun} {noun2} change last week.",
    "Don't touch the {noun2} migration, it's already deployed.",
    "Ideally {fn} stays a pure function so we can test it without the database.",
    "Keep the error messages consistent with the rest of the {noun} module.",
    "The {adj} {noun2}s come from the {noun} webhook, so they may be missing fields.",
]
THINK = [
    "The user wants me to {verb} the {noun} {noun2} code. Let me first understand how `{fn}` works and where it is called from.",
    "Looking at `{path}`, the {noun2} is {verb}ed inside `{fn}` before the {adj} check, so the check never runs for {noun}s that arrive late.",
    "I need to be careful here: `{fn2}` is also used by the {noun} worker, so changing its signature would break that caller.",
    "The test failure says `{exc}` which suggests the {noun} is None when `{fn}` runs. That happens when the {adj} {noun2} path returns early.",
    "Let me think about the edge cases: an empty {noun2} list, a {adj} {noun}, and a {noun} whose {noun2} was already {verb}ed.",
    "The simplest fix is to {verb} the {noun2} once in `{fn}` and pass it down, rather than {verb}ing it again in `{fn2}`.",
    "I should run the tests for `{test}` after this edit to make sure nothing else depends on the old behaviour.",
]
TEXTS = [
    "Let me look at `{path}` first.",
    "Now I'll update `{fn}` to handle the {adj} case.",
    "Let me run the tests to check the change.",
    "The tests pass. Let me also check the callers of `{fn2}`.",
    "I found the issue: `{fn}` {verb}s the {noun2} before checking whether it is {adj}.",
    "Let me search for other uses of `{fn}`.",
    "Now let me add a test for the {adj} {noun} case.",
    "That failure is unrelated to this change, it is the {noun} fixture. Let me fix it anyway.",
]
SUMMARY = [
    "I've made the following changes:\n\n1. **`{path}`**: `{fn}` now {verb}s {adj} {noun}s before {verb2}ing the {noun2}.\n"
    "2. **`{test}`**: added tests for the empty and {adj} cases.\n3. Updated `{fn2}` to reuse the new helper.\n\n"
    "All tests pass. {sentence}",
    "Done. `{fn}` no longer {verb}s the {noun2} twice; the {adj} path is covered by a new test in `{test}`.",
    "## Summary\n\n- Fixed the `{exc}` raised when the {noun} was {adj}\n- `{fn2}` now returns early for empty {noun2}s\n"
    "- Added {n} tests\n\nThe full suite passes ({m} tests).",
]


LANG_ERRORS = {
    "py": ["KeyError: 'id'", "AttributeError: 'NoneType' object has no attribute 'id'", "AssertionError",
           "TypeError: unsupported operand type(s) for +: 'int' and 'NoneType'"],
    "ts": ["TypeError: Cannot read properties of undefined (reading 'id')", "AssertionError: expected 3 to equal 4",
           "TS2345: Argument of type 'string' is not assignable to parameter of type 'number'"],
    "ex": ["** (FunctionClauseError) no function clause matching", "** (KeyError) key :id not found",
           "** (MatchError) no match of right hand side value: {:error, :not_found}"],
    "go": ["panic: runtime error: invalid memory address or nil pointer dereference", "--- FAIL: expected 3, got 4",
           "undefined: ctx"],
}


class Prose:
    """Fills prose templates with session-specific names."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def fill(self, tpl: str, ctx: dict[str, Any]) -> str:
        r = self.rng
        slots = {"verb": r.choice(VERBS), "verb2": r.choice(VERBS), "verb3": r.choice(VERBS), "noun": r.choice(NOUNS),
                 "noun2": r.choice(NOUNS), "adj": r.choice(ADJS), "n": r.randint(2, 9), "m": r.randint(40, 400),
                 "exc": r.choice(("KeyError: 'id'", "AttributeError: 'NoneType' object has no attribute 'id'",
                                  "TypeError: undefined is not a function", "** (FunctionClauseError)",
                                  "panic: runtime error: invalid memory address", "AssertionError"))}
        slots.update(ctx)
        if "{sentence}" in tpl:
            tpl = tpl.replace("{sentence}", r.choice(SENTENCES), 1).replace("{sentence}", r.choice(SENTENCES))
        if "{feature}" in tpl:
            slots["feature"] = f"{r.choice(ADJS)} {r.choice(NOUNS)} {r.choice(('export', 'sync', 'retries', 'filters', 'batching', 'limits'))}"
        return tpl.format(**slots)

    def para(self, pool: list[str], ctx: dict[str, Any], n: int) -> str:
        return " ".join(self.fill(self.rng.choice(pool), ctx) for _ in range(n))


# ------------------------------------------------------------------ hooks

_PLUG = "${CLAUDE_PLUGIN_ROOT}"
HOOK_PROFILES: dict[str, dict[str, tuple[list[str], list[str]]]] = {
    "heavy": {
        "Bash": ([f"cd {_PLUG}/hooks && bun run ./guardian.ts", f"{_PLUG}/scripts/pre-commit.sh",
                  f"{_PLUG}/scripts/pre-commit-check.sh", f"{_PLUG}/scripts/pre-tool-capture.sh"],
                 [f"{_PLUG}/scripts/post-tool-capture.sh", f"{_PLUG}/scripts/tool-call-capture.sh"]),
        "Edit": ([f"cd {_PLUG}/hooks && bun run ./guardian.ts", f"{_PLUG}/scripts/pre-tool-capture.sh"],
                 [f"cd {_PLUG}/hooks && bun run ./dist/post-yaml-validate.js", f"cd {_PLUG}/hooks && bun run ./dist/post-edit-check.js",
                  f"cd {_PLUG}/hooks && bun run ./dist/post-write-eslint.js", f"{_PLUG}/scripts/post-edit.sh",
                  f"{_PLUG}/scripts/post-tool-capture.sh", f"{_PLUG}/scripts/tool-call-capture.sh", "callback"]),
        "Read": ([], [f"{_PLUG}/scripts/tool-call-capture.sh", "callback"]),
        "Grep": ([], [f"{_PLUG}/scripts/tool-call-capture.sh", "callback"]),
        "Task": ([], [f"{_PLUG}/scripts/tool-call-capture.sh"]),
    },
    "medium": {
        "Bash": ([f"{_PLUG}/scripts/guard.sh"], [f"{_PLUG}/scripts/log-tool.sh"]),
        "Edit": ([f"{_PLUG}/scripts/guard.sh"], ["npx prettier --check \"$CLAUDE_FILE\"", f"{_PLUG}/scripts/lint-changed.sh",
                                                  f"{_PLUG}/scripts/log-tool.sh"]),
        "Read": ([], [f"{_PLUG}/scripts/log-tool.sh"]),
        "Grep": ([], [f"{_PLUG}/scripts/log-tool.sh"]),
        "Task": ([], [f"{_PLUG}/scripts/log-tool.sh"]),
    },
    "light": {"Edit": ([], ["~/.claude/hooks/format-on-save.sh"]), "Bash": ([], []), "Read": ([], []),
              "Grep": ([], []), "Task": ([], [])},
}
HOOK_ALIAS = {"Write": "Edit", "Glob": "Grep", "TaskOutput": "Grep"}
STOP_HOOKS = ["/home/dev/.claude/hooks/tmux-waiting.sh mark", f"{_PLUG}/hooks/stop-hook.sh"]
START_HOOKS = ["/home/dev/.claude/hooks/tmux-waiting.sh clear", f"{_PLUG}/scripts/notify-session.sh"]


# ------------------------------------------------------------------ records


class Writer:
    """One JSONL file of a session (the main file or a subagent's): envelope, parent chain, bytes."""

    def __init__(self, sess: "Session", agent_id: str | None = None) -> None:
        self.sess = sess
        self.agent_id = agent_id
        base: dict[str, Any] = {"isSidechain": agent_id is not None, "userType": "external", "cwd": CWD,
                                "sessionId": sess.sid, "version": VERSION, "gitBranch": sess.branch}
        if agent_id is not None:
            base["agentId"] = agent_id
        base["slug"] = sess.slug
        self.base = base
        self.chunks: list[bytes] = []
        self.size = 0
        self.records = 0
        self.last: str | None = None
        self.last_user: str | None = None
        self.agent_progress: Callable[[dict[str, Any]], None] | None = None

    def emit(self, rec: dict[str, Any]) -> None:
        b = _dumps(rec)
        self.chunks.append(b)
        self.size += len(b) + 1
        self.records += 1
        self.sess.total += len(b) + 1

    def env(self, typ: str, parent: str | None) -> dict[str, Any]:
        d: dict[str, Any] = {"parentUuid": parent}
        d.update(self.base)
        d["type"] = typ
        return d

    def data(self) -> bytes:
        return b"\n".join(self.chunks) + b"\n" if self.chunks else b""


@dataclass
class Outcome:
    """What a tool call did: its input, the tool_result content, toolUseResult and side records."""

    name: str
    inp: dict[str, Any]
    content: Any
    tur: Any
    is_error: bool = False
    bash_output: str | None = None
    edited: str | None = None
    rejected: bool = False
    extra_before_result: Callable[[Writer, str], None] | None = None


@dataclass
class SessionStats:
    files: int = 0
    records: int = 0
    bytes: int = 0
    progress: int = 0
    edits: int = 0


class Session:
    """Generates one session (and its subagent files) from its own RNG."""

    def __init__(self, repo: BaseRepo, seed: int, index: int, target: int, start_ms: int) -> None:
        r = random.Random(f"{seed}:session:{index}")
        self.rng = r
        self.repo = repo
        self.target = target
        self.sid = _uuid(r)
        self.slug = f"{r.choice(ADJS)}-{r.choice(VERBS).removesuffix('e')}ing-{r.choice(NOUNS)}"
        self.branch = r.choice(["main", "main", f"feat/{r.choice(NOUNS)}-{r.choice(NOUNS)}",
                                f"fix/{r.choice(NOUNS)}-{r.choice(VERBS)}", f"dev/{r.choice(NOUNS)}"])
        self.model = r.choice(["claude-opus-4-6", "claude-opus-4-6", "claude-sonnet-4-5-20250929"])
        self.ms = start_ms
        self.total = 0
        self.lang = r.choices(LANGS, weights=(35, 25, 20, 20))[0]
        self.cg = CodeGen(self.lang, r)
        self.prose = Prose(r)
        profile = r.choices(["heavy", "medium", "light"], weights=(80, 16, 4))[0]
        self.hooks = HOOK_PROFILES[profile]
        pool = repo.paths[self.lang]
        # A working area: a few directories of the session's language.
        dirs = sorted({p.rsplit("/", 1)[0] for p in pool})
        chosen = r.sample(dirs, min(len(dirs), r.randint(1, 3)))
        area = [p for p in pool if p.rsplit("/", 1)[0] in chosen]
        self.work: list[str] = r.sample(area, min(len(area), r.randint(6, 24)))
        tests = [p for p in pool if "test" in p.rsplit("/", 1)[-1] and p not in self.work]
        self.work += r.sample(tests, min(len(tests), r.randint(1, 3)))
        self.others = pool
        self.files: dict[str, str] = {}
        self.symbols: list[str] = []
        self.bash_seq = 0
        self.prompt_uuid = ""
        self.turn_edits: set[str] = set()
        self.main = Writer(self)
        self.subs: list[tuple[str, Writer]] = []
        self.next_compact = r.randint(1_800_000, 3_500_000)
        self.stats = SessionStats()

    # -- helpers -------------------------------------------------------------
    def tick(self, lo: int = 40, hi: int = 4000) -> str:
        self.ms += self.rng.randint(lo, hi)
        return _ts(self.ms)

    def abs(self, rel: str) -> str:
        return f"{CWD}/{rel}"

    def text_of(self, rel: str) -> str:
        t = self.files.get(rel)
        if t is None:
            t = self.repo.content(rel)
            self.files[rel] = t
            lang = EXT_LANG.get(os.path.splitext(rel)[1])
            if lang:
                for m in _SYMBOL_RE[lang].finditer(t):
                    name = m.group(1) or (m.group(2) if m.lastindex and m.lastindex > 1 else None)
                    if name and len(self.symbols) < 400:
                        self.symbols.append(name)
        return t

    def ctx(self) -> dict[str, Any]:
        r = self.rng
        path = r.choice(self.work)
        tests = [p for p in self.work if "test" in p.rsplit("/", 1)[-1]] or self.work
        fns = self.symbols or [self.cg.fname()]
        fn = r.choice(fns)
        fn2 = r.choice(fns)
        if fn2 == fn:
            fn2 = self.cg.fname()
        return {"path": path, "test": r.choice(tests), "fn": fn, "fn2": fn2, "exc": r.choice(LANG_ERRORS[self.lang])}

    def usage(self) -> dict[str, Any]:
        r = self.rng
        cc = r.randint(0, 9000)
        return {"input_tokens": r.randint(1, 12), "cache_creation_input_tokens": cc,
                "cache_read_input_tokens": r.randint(15000, 160000),
                "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": cc},
                "output_tokens": r.randint(1, 900), "service_tier": "standard", "inference_geo": "not_available"}

    # -- record emitters ------------------------------------------------------
    def assistant(self, w: Writer, blocks: list[dict[str, Any]]) -> str:
        """One API response: a record per content block, sharing message id and requestId."""
        r = self.rng
        mid = "msg_01" + _b62(r, 22)
        rid = "req_011C" + _b62(r, 20)
        usage = self.usage()
        uid = ""
        for block in blocks:
            uid = _uuid(r)
            rec = w.env("assistant", w.last)
            del rec["type"]
            rec["message"] = {"model": self.model if w.agent_id is None or w.agent_id.startswith("acompact") else
                              "claude-sonnet-4-5-20250929", "id": mid, "type": "message", "role": "assistant",
                              "content": [block], "stop_reason": None, "stop_sequence": None, "usage": usage}
            rec["requestId"] = rid
            rec["type"] = "assistant"
            rec["uuid"] = uid
            rec["timestamp"] = self.tick(300, 6000)
            w.emit(rec)
            w.last = uid
            if w.agent_progress is not None:
                w.agent_progress({"type": "assistant", "timestamp": rec["timestamp"], "message": rec["message"],
                                  "requestId": rid, "uuid": uid})
        return uid

    def progress(self, w: Writer, data: dict[str, Any], tool_id: str, parent_tool_id: str) -> None:
        uid = _uuid(self.rng)
        rec = w.env("progress", w.last)
        rec["data"] = data
        rec["parentToolUseID"] = parent_tool_id
        rec["toolUseID"] = tool_id
        rec["timestamp"] = self.tick(5, 400)
        rec["uuid"] = uid
        w.emit(rec)
        w.last = uid
        self.stats.progress += 1

    def hooks_for(self, w: Writer, event: str, tool: str, tool_id: str, cmds: list[str]) -> None:
        for cmd in cmds:
            self.progress(w, {"type": "hook_progress", "hookEvent": event, "hookName": f"{event}:{tool}", "command": cmd},
                          tool_id, tool_id)

    def user_text(self, w: Writer, text: str, **extra: Any) -> str:
        uid = _uuid(self.rng)
        rec = w.env("user", w.last)
        rec["message"] = {"role": "user", "content": text}
        rec["uuid"] = uid
        rec["timestamp"] = self.tick(2000, 90000)
        rec.update(extra)
        w.emit(rec)
        w.last = uid
        w.last_user = uid
        return uid

    def snapshot(self, w: Writer, update: bool) -> None:
        ts = _ts(self.ms)
        backups = {rel: {"backupFileName": f"{_hex(self.rng, 16)}@v{i + 1}", "version": i + 1, "backupTime": ts}
                   for i, rel in enumerate(sorted(self.turn_edits))} if update else {}
        w.emit({"type": "file-history-snapshot", "messageId": self.prompt_uuid,
                "snapshot": {"messageId": self.prompt_uuid, "trackedFileBackups": backups, "timestamp": ts},
                "isSnapshotUpdate": update})

    def tool_call(self, w: Writer, oc: Outcome, lead: list[dict[str, Any]]) -> None:
        """Emit the assistant tool_use, hooks, progress, and the user tool_result record."""
        r = self.rng
        tool_id = "toolu_01" + _b62(r, 22)
        block = {"type": "tool_use", "id": tool_id, "name": oc.name, "input": oc.inp, "caller": {"type": "direct"}}
        ass_uuid = self.assistant(w, [*lead, block])
        hk = self.hooks.get(HOOK_ALIAS.get(oc.name, oc.name), ([], []))
        if not oc.rejected:
            self.hooks_for(w, "PreToolUse", oc.name, tool_id, hk[0])
        if oc.edited and not oc.is_error and w.agent_id is None:
            self.turn_edits.add(oc.edited)
            self.snapshot(w, True)
        if oc.bash_output is not None:
            self.bash_progress(w, tool_id, oc.bash_output)
        if oc.extra_before_result is not None:
            oc.extra_before_result(w, tool_id)
        if oc.is_error and not oc.rejected and oc.name == "Bash":
            self.hooks_for(w, "PostToolUseFailure", oc.name, tool_id, hk[1][:2])
        elif not oc.is_error:
            self.hooks_for(w, "PostToolUse", oc.name, tool_id, hk[1])
        result: dict[str, Any] = {"tool_use_id": tool_id, "type": "tool_result", "content": oc.content}
        if oc.is_error or oc.name == "Bash":
            result["is_error"] = oc.is_error
        uid = _uuid(r)
        rec = w.env("user", ass_uuid)
        rec["message"] = {"role": "user", "content": [result]}
        rec["uuid"] = uid
        rec["timestamp"] = self.tick(20, 2500)
        rec["toolUseResult"] = oc.tur
        rec["sourceToolAssistantUUID"] = ass_uuid
        w.emit(rec)
        w.last = uid
        if w.agent_progress is not None:
            w.agent_progress({"type": "user", "message": rec["message"], "uuid": uid, "timestamp": rec["timestamp"]})
        if oc.rejected:
            uid2 = _uuid(r)
            rec2 = w.env("user", uid)
            rec2["message"] = {"role": "user", "content": [{"type": "text", "text": "[Request interrupted by user for tool use]"}]}
            rec2["uuid"] = uid2
            rec2["timestamp"] = self.tick(1, 20)
            w.emit(rec2)
            w.last = uid2

    def bash_progress(self, w: Writer, tool_id: str, output: str) -> None:
        lines = output.split("\n")
        if len(lines) < 3 or self.rng.random() < 0.1:
            return
        steps = min(10, max(2, len(lines) // 4, self.rng.randint(1, 8)))
        for k in range(1, steps + 1):
            upto = "\n".join(lines[: len(lines) * k // (steps + 1) + 1])
            tail = "\n".join(upto.split("\n")[-5:])
            self.progress(w, {"type": "bash_progress", "output": tail, "fullOutput": upto, "elapsedTimeSeconds": k + 1,
                              "totalLines": upto.count("\n") + 1, "timeoutMs": 120000},
                          f"bash-progress-{self.bash_seq}", tool_id)
            self.bash_seq += 1

    # -- tools -----------------------------------------------------------------
    def t_read(self, rel: str | None = None) -> Outcome:
        r = self.rng
        rel = rel or (r.choice(self.work) if r.random() < 0.85 else r.choice(self.others))
        path = self.abs(rel)
        if r.random() < 0.02:
            missing = path.rsplit(".", 1)[0] + "_" + r.choice(NOUNS) + "." + path.rsplit(".", 1)[1]
            return Outcome("Read", {"file_path": missing}, "<tool_use_error>File does not exist.</tool_use_error>",
                           "Error: File does not exist.", is_error=True)
        text = self.text_of(rel)
        lines = text.split("\n")
        total = len(lines)
        inp: dict[str, Any] = {"file_path": path}
        start = 1
        if total > 120 and r.random() < 0.25:
            start = r.randint(1, total - 40)
            limit = r.randint(30, 150)
            inp["offset"] = start
            inp["limit"] = limit
            lines = lines[start - 1:start - 1 + limit]
        body = "\n".join(f"{i:>6}→{ln}" for i, ln in enumerate(lines, start))
        part = "\n".join(lines)
        return Outcome("Read", inp, body, {"type": "text", "file": {"filePath": path, "content": part, "numLines": len(lines),
                                                                     "startLine": start, "totalLines": total}})

    def _edit_plan(self, text: str, lang: str) -> tuple[int, int, list[str]] | None:
        """Choose a change [a, b) -> new lines in a file's lines."""
        r = self.rng
        lines = text.split("\n")
        lines.pop()
        n = len(lines)
        cg = CodeGen(lang, r)
        kind = r.random()
        if kind < 0.22 or n < 12:
            starts = [i for i, ln in enumerate(lines) if ln and not ln[0].isspace() and
                      ln.startswith(("def ", "class ", "export ", "func ", "@dataclass", "// "))] or \
                     [i for i, ln in enumerate(lines) if ln.startswith(("  def ", "  @doc", "  test ", "  it("))]
            if not starts or n > 700:
                kind = 0.5
            else:
                at = r.choice(starts)
                if lang == "ex":
                    new = [*cg.unit_lines(test="test" in lines[at]), ""]
                else:
                    new = [*cg.unit_lines(), "", ""] if lang == "py" else [*cg.unit_lines(), ""]
                return at, at, new
        simple = [i for i in range(n) if is_simple(lines[i], lang)]
        if not simple:
            return None
        i = r.choice(simple)
        ind = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        j = i + 1
        want = r.randint(1, 5)
        while j < n and j - i < want and j in simple and lines[j].startswith(ind) and not lines[j][len(ind):len(ind) + 1].isspace():
            j += 1
        if kind < 0.35 and n > 30:
            return i, j, []  # delete
        if kind < 0.55:
            # a small tweak of one line: a changed number, argument or name
            ln = lines[i]
            rep = re.sub(r"\b\d+\b", lambda m: str(int(m.group()) * 2 + 1), ln, count=1)
            if rep == ln:
                rep = ln.replace(ln.strip(), ln.strip() + ("  # " + r.choice(VERBS) + " " + r.choice(NOUNS) if lang == "py" else ""), 1)
            if rep == ln:
                rep = ind + cg.statements("", 1)[0]
            return i, i + 1, [rep]
        return i, j, cg.statements(ind, r.randint(1, 6))

    def t_edit(self, rel: str | None = None) -> Outcome:
        r = self.rng
        rel = rel or r.choice(self.work)
        path = self.abs(rel)
        text = self.text_of(rel)
        lang = EXT_LANG[os.path.splitext(rel)[1]]
        plan = self._edit_plan(text, lang)
        lines = text.split("\n")
        lines.pop()
        if plan is None:
            return self.t_read(rel)
        a, b, rep = plan
        hunks, new = make_hunks(lines, [(a, b, rep)])
        if not hunks:
            return self.t_read(rel)
        # old_string/new_string: the changed lines widened until old_string is unique in the file.
        lo, hi = a, b
        if not rep or a == b:  # a pure deletion or insertion: anchor the strings on a neighbouring line
            if a > 0:
                lo = a - 1
            else:
                hi = min(len(lines), b + 1)
        old_s = "\n".join(lines[lo:hi])
        for _ in range(6):
            if old_s.strip() and text.count(old_s) == 1:
                break
            lo, hi = max(0, lo - 1), min(len(lines), hi + 1)
            old_s = "\n".join(lines[lo:hi])
        new_s = "\n".join(lines[lo:a] + rep + lines[b:hi])
        inp = {"replace_all": False, "file_path": path, "old_string": old_s, "new_string": new_s}
        if r.random() < 0.03:
            bad = old_s.replace(" ", "  ", 1) if " " in old_s else old_s + " "
            inp["old_string"] = bad
            msg = f"String to replace not found in file.\nString: {bad}"
            return Outcome("Edit", inp, f"<tool_use_error>{msg}</tool_use_error>", f"Error: {msg}", is_error=True)
        if r.random() < 0.01:
            return self.rejected("Edit", inp)
        new_text = "\n".join(new) + "\n"
        self.files[rel] = new_text
        self.stats.edits += 1
        tur = {"filePath": path, "oldString": old_s, "newString": new_s, "originalFile": text,
               "structuredPatch": hunks, "userModified": False, "replaceAll": False}
        return Outcome("Edit", inp, f"The file {path} has been updated successfully.", tur, edited=rel)

    def t_write(self) -> Outcome:
        r = self.rng
        if r.random() < 0.55 or not self.work:
            d = r.choice(self.work).rsplit("/", 1)[0]
            ext = os.path.splitext(r.choice(self.work))[1]
            name = (_pascal([r.choice(NOUNS), r.choice(NOUNS)]) if ext in (".ts", ".tsx") else
                    f"{r.choice(NOUNS)}_{r.choice(NOUNS)}") + ext
            rel = f"{d}/{name}"
            if rel in self.files or rel in self.work:
                return self.t_edit()
            lang = EXT_LANG[ext]
            text = CodeGen(lang, r).file_text(rel, r.randint(2, 10))
            self.files[rel] = text
            self.work.append(rel)
            self.stats.edits += 1
            path = self.abs(rel)
            return Outcome("Write", {"file_path": path, "content": text}, f"File created successfully at: {path}",
                           {"type": "create", "filePath": path, "content": text, "structuredPatch": [], "originalFile": None},
                           edited=rel)
        rel = r.choice(self.work)
        path = self.abs(rel)
        text = self.text_of(rel)
        lang = EXT_LANG[os.path.splitext(rel)[1]]
        lines = text.split("\n")
        lines.pop()
        changes: list[tuple[int, int, list[str]]] = []
        for _ in range(r.randint(1, 4)):
            plan = self._edit_plan(text, lang)
            if plan and all(plan[1] < c[0] - 1 or plan[0] > c[1] + 1 for c in changes):
                changes.append(plan)
        hunks, new = make_hunks(lines, changes)
        if not hunks:
            return self.t_edit(rel)
        new_text = "\n".join(new) + "\n"
        self.files[rel] = new_text
        self.stats.edits += 1
        return Outcome("Write", {"file_path": path, "content": new_text}, f"The file {path} has been updated successfully.",
                       {"type": "update", "filePath": path, "content": new_text, "structuredPatch": hunks,
                        "originalFile": text}, edited=rel)

    def rejected(self, name: str, inp: dict[str, Any]) -> Outcome:
        return Outcome(name, inp, "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it "
                       "was a file edit, the new_string was NOT written to the file). STOP what you are doing and wait for "
                       "the user to tell you how to proceed.", "User rejected tool use", is_error=True, rejected=True)

    def t_grep(self) -> Outcome:
        r = self.rng
        pat = r.choice(self.symbols) if self.symbols and r.random() < 0.8 else r.choice(NOUNS)
        scope = r.choice(self.work).rsplit("/", 2)[0]
        hits: list[str] = []
        files: list[str] = []
        for rel in self.work[:30]:
            t = self.files.get(rel)
            if t is None or pat not in t:
                continue
            files.append(self.abs(rel))
            for no, ln in enumerate(t.split("\n"), 1):
                if pat in ln:
                    hits.append(f"{self.abs(rel)}:{no}:{ln}")
        if r.random() < 0.5:
            content = "\n".join(hits[:200]) if hits else "No matches found"
            return Outcome("Grep", {"pattern": pat, "path": self.abs(scope), "output_mode": "content", "-n": True},
                           content, {"mode": "content", "numFiles": 0, "filenames": [], "content": "\n".join(hits[:200]),
                                     "numLines": min(len(hits), 200)})
        content = f"Found {len(files)} files\n" + "\n".join(files) if files else "No files found"
        return Outcome("Grep", {"pattern": pat, "path": self.abs(scope), "output_mode": "files_with_matches"},
                       content, {"mode": "files_with_matches", "filenames": files, "numFiles": len(files)})

    def t_glob(self) -> Outcome:
        r = self.rng
        d = r.choice(self.work).rsplit("/", 1)[0]
        ext = os.path.splitext(r.choice(self.work))[1]
        names = [self.abs(p) for p in self.repo.by_dir.get(d, []) if p.endswith(ext)]
        names += [self.abs(p) for p in self.files if p.startswith(d + "/") and p.endswith(ext) and self.abs(p) not in names]
        return Outcome("Glob", {"pattern": f"**/*{ext}", "path": self.abs(d)}, "\n".join(names) or "No files found",
                       {"filenames": names, "durationMs": r.randint(3, 900), "numFiles": len(names), "truncated": False})

    def t_bash(self) -> Outcome:
        r = self.rng
        kind = r.random()
        fail = False
        if kind < 0.45:
            cmd, desc, out, fail = self.test_run()
        elif kind < 0.6:
            cmd, desc, out, fail = self.build_run()
        elif kind < 0.72:
            cmd, desc, out = "git status", "Show working tree status", self.git_status()
        elif kind < 0.8:
            rel = r.choice(list(self.files) or self.work)
            cmd, desc, out = f"git diff --stat && git diff {rel} | head -80", "Show the diff", self.git_diff(rel)
        elif kind < 0.87:
            cmd, desc = "git log --oneline -15", "Recent commits"
            out = "\n".join(f"{_hex(r, 7)} {self.prose.fill(r.choice(('{verb} {noun} {noun2}', 'fix {adj} {noun} handling', 'add {noun} tests', 'refactor {noun} {noun2}')), {})}"
                            for _ in range(15))
        elif kind < 0.94:
            d = r.choice(self.work).rsplit("/", 1)[0]
            cmd, desc = f"ls -la {d}", "List directory"
            out = f"total {r.randint(20, 400)}\n" + "\n".join(
                f"-rw-r--r--  1 dev dev {r.randint(300, 40000):>6} Feb {r.randint(1, 28):>2} {r.randint(0, 23):02d}:{r.randint(0, 59):02d} {p.rsplit('/', 1)[1]}"
                for p in self.repo.by_dir.get(d, [])[:40])
        else:
            pat = r.choice(self.symbols or NOUNS)
            cmd, desc = f"rg -n \"{pat}\" --type-add 'src:*.{{py,ts,ex,go}}' -t src | head -30", "Search for usages"
            out = "\n".join(f"{p}:{r.randint(1, 300)}:    {pat}({self.cg.var()})" for p in r.sample(self.work, min(4, len(self.work))))
        inp = {"command": cmd, "description": desc}
        if r.random() < 0.2:
            inp["timeout"] = r.choice((60000, 120000, 300000))
        if fail:
            code = r.choice((1, 1, 1, 2))
            return Outcome("Bash", inp, f"Exit code {code}\n{out}", f"Error: Exit code {code}\n{out}", is_error=True,
                           bash_output=out)
        tur = {"stdout": out, "stderr": "", "interrupted": False, "isImage": False, "noOutputExpected": False}
        return Outcome("Bash", inp, out or "(Bash completed with no output)", tur, bash_output=out)

    def test_run(self) -> tuple[str, str, str, bool]:
        r = self.rng
        tests = [p for p in self.work if "test" in p.rsplit("/", 1)[-1]] or self.work
        t = r.choice(tests)
        fail = r.random() < 0.3
        names = [s for s in self.symbols[-80:]] or [self.cg.fname() for _ in range(10)]
        n = r.randint(8, 180)
        nf = r.randint(1, 3) if fail else 0
        lang = self.lang
        if lang == "py":
            cmd = f"cd {CWD} && python -m pytest {t} -q" if r.random() < 0.7 else "python -m pytest -x -q services/"
            dots = "".join("F" if fail and r.random() < 0.05 else "." for _ in range(n))
            out = [f"{dots[i:i + 72]}{' ' * (72 - len(dots[i:i + 72]))} [{min(100, (i + 72) * 100 // n):>3}%]" for i in range(0, n, 72)]
            if fail:
                out += ["", "=" * 30 + " FAILURES " + "=" * 30]
                for _ in range(nf):
                    fn = r.choice(names)
                    src = self.files.get(t) or self.text_of(t)
                    src_lines = src.split("\n")
                    k = r.randint(0, max(0, len(src_lines) - 8))
                    out += [f"{'_' * 20} test_{fn} {'_' * 20}", ""]
                    out += [f"    {ln}" for ln in src_lines[k:k + 6]]
                    out += [f">       assert {self.cg.var()} == {r.randint(0, 99)}",
                            f"E       AssertionError: assert {r.randint(100, 999)} == {r.randint(0, 99)}", "",
                            f"{t}:{k + 6}: AssertionError"]
                out += ["=" * 20 + " short test summary info " + "=" * 20]
                out += [f"FAILED {t}::test_{r.choice(names)} - AssertionError" for _ in range(nf)]
                out.append(f"{nf} failed, {n - nf} passed in {r.uniform(0.2, 40):.2f}s")
            else:
                out.append(f"{n} passed in {r.uniform(0.2, 40):.2f}s")
            return cmd, "Run tests", "\n".join(out), fail
        if lang == "ts":
            cmd = f"cd web && npx vitest run {t.removeprefix('web/')}"
            out = ["", f" RUN  v2.1.8 {CWD}/web", ""]
            for _ in range(r.randint(1, 6)):
                f = r.choice(tests).removeprefix("web/")
                out.append(f" ✓ {f} ({r.randint(2, 30)} tests) {r.randint(3, 900)}ms")
            if fail:
                for _ in range(nf):
                    out += [f" FAIL  {t.removeprefix('web/')} > {r.choice(names)} > {self.prose.fill('{verb}s {adj} {noun}s', {})}",
                            f"AssertionError: expected {r.randint(0, 99)} to deeply equal {r.randint(100, 999)}",
                            f" ❯ {t.removeprefix('web/')}:{r.randint(5, 300)}:{r.randint(3, 40)}"]
            out += ["", f" Test Files  {'1 failed | ' if fail else ''}{r.randint(1, 9)} passed",
                    f"      Tests  {str(nf) + ' failed | ' if fail else ''}{n} passed", f"   Duration  {r.uniform(0.5, 20):.2f}s"]
            return cmd, "Run vitest", "\n".join(out), fail
        if lang == "ex":
            cmd = f"mix test {t}" if r.random() < 0.7 else "mix test"
            out = [f"Compiling {r.randint(1, 40)} files (.ex)", "Generated proj app", f"Running ExUnit with seed: {r.randint(1, 999999)}, max_cases: 4", "",
                   "".join("F" if fail and r.random() < 0.05 else "." for _ in range(n))]
            if fail:
                for k in range(nf):
                    out += ["", f"  {k + 1}) test {self.prose.fill('{verb}s {adj} {noun}', {})} ({self.cg.tname()}Test)",
                            f"     {t}:{r.randint(5, 200)}", "     Assertion with == failed",
                            f"     code:  assert {self.cg.var()} == {r.randint(0, 9)}", f"     left:  {r.randint(10, 99)}",
                            f"     right: {r.randint(0, 9)}", f"     stacktrace:\n       {t}:{r.randint(5, 200)}: (test)"]
            out += ["", f"Finished in {r.uniform(0.1, 30):.1f} seconds ({r.uniform(0.1, 3):.1f}s async, {r.uniform(0.1, 20):.1f}s sync)",
                    f"{n} tests, {nf} failure{'s' if nf != 1 else ''}"]
            return cmd, "Run tests", "\n".join(out), fail
        pk = "/".join(t.split("/")[:2])
        cmd = f"go test ./{pk}/... -count=1"
        out = []
        if fail:
            for _ in range(nf):
                out += [f"--- FAIL: Test{r.choice(names)} ({r.uniform(0, 2):.2f}s)",
                        f"    {t.rsplit('/', 1)[1]}:{r.randint(5, 300)}: unexpected {r.randint(0, 99)}"]
            out += ["FAIL", f"FAIL\tgithub.com/dev/proj/{pk}\t{r.uniform(0.01, 3):.3f}s"]
        for d in sorted({p.rsplit('/', 1)[0] for p in self.work})[:8]:
            out.append(f"ok  \tgithub.com/dev/proj/{d}\t{r.uniform(0.005, 3):.3f}s")
        return cmd, "Run go tests", "\n".join(out), fail

    def build_run(self) -> tuple[str, str, str, bool]:
        r = self.rng
        fail = r.random() < 0.2
        rel = r.choice(self.work)
        lang = self.lang
        if lang == "py":
            cmd = f"ruff check {rel.rsplit('/', 1)[0]} && mypy {rel}"
            out = [f"{rel}:{r.randint(1, 300)}:{r.randint(1, 40)}: F841 Local variable `{self.cg.var()}` is assigned to but never used"
                   for _ in range(r.randint(1, 6))] if fail else ["All checks passed!", "Success: no issues found in 1 source file"]
        elif lang == "ts":
            cmd = "cd web && npx tsc --noEmit -p ."
            out = [f"src/{rel.split('/src/', 1)[-1]}({r.randint(1, 300)},{r.randint(1, 40)}): error TS2339: Property '{self.cg.var()}' "
                   f"does not exist on type '{self.cg.tname()}'." for _ in range(r.randint(1, 5))] if fail else []
        elif lang == "ex":
            cmd = "mix compile --warnings-as-errors"
            out = [f"Compiling {r.randint(1, 30)} files (.ex)"]
            if fail:
                out += ["    warning: variable \"" + self.cg.var() + "\" is unused (if the variable is not meant to be used, prefix it with an underscore)",
                        "    │", f" {r.randint(10, 300)} │     {self.cg.var()} = {self.cg.fname()}(opts)", "    │",
                        f"    └─ {rel}:{r.randint(10, 300)}:{r.randint(3, 20)}: {self.cg.tname()}.{self.cg.fname()}/2", "",
                        "Compilation failed due to warnings while using the --warnings-as-errors option"]
            else:
                out.append("Generated proj app")
        else:
            cmd = "go build ./... && go vet ./..."
            out = [f"# github.com/dev/proj/{rel.rsplit('/', 1)[0]}",
                   f"{rel}:{r.randint(1, 300)}:{r.randint(1, 40)}: undefined: {self.cg.var()}"] if fail else []
        return cmd, "Build and lint", "\n".join(out), fail

    def git_status(self) -> str:
        changed = sorted(self.files_changed())
        return (f"On branch {self.branch}\nChanges not staged for commit:\n  (use \"git add <file>...\" to update what will be committed)\n"
                + "\n".join(f"\tmodified:   {p}" for p in changed[:30]) + "\n\nno changes added to commit (use \"git add\" and/or \"git commit -a\")")

    def files_changed(self) -> list[str]:
        return [p for p, t in self.files.items() if p not in self.repo._cache or self.repo._cache[p] != t]

    def git_diff(self, rel: str) -> str:
        base = self.repo._cache.get(rel, "")
        cur = self.files.get(rel, base)
        if base == cur:
            return ""
        import difflib  # noqa: PLC0415 - only for the occasional git diff output

        diff = difflib.unified_diff(base.split("\n"), cur.split("\n"), f"a/{rel}", f"b/{rel}", lineterm="", n=3)
        return f" {rel} | {abs(cur.count(chr(10)) - base.count(chr(10))) + 2} +-\n 1 file changed\n" + "\n".join(list(diff)[:80])

    def t_task(self, w: Writer) -> Outcome:
        """A Task (subagent) call: the subagent's own file, agent_progress in the parent."""
        r = self.rng
        agent = _hex(r, 7)
        prompt = self.prose.fill("Explore how {noun} {noun2}s are {verb}ed in this codebase. Find where `{fn}` is called, "
                                 "what `{fn2}` returns for {adj} inputs, and which tests cover it. Report file paths and line numbers.",
                                 self.ctx())
        sub = Writer(self, agent)
        self.subs.append((f"agent-{agent}.jsonl", sub))
        n_tools = r.randint(3, 12)
        inp = {"description": self.prose.fill("Explore {noun} {noun2} flow", {}), "prompt": prompt, "subagent_type": "Explore"}

        def run_sub(parent_w: Writer, task_id: str) -> None:
            """Runs between the parent's tool_use and its tool_result; fills in the result."""
            t0 = self.ms
            count = {"n": 0}

            def relay(message: dict[str, Any]) -> None:
                count["n"] += 1
                if count["n"] > 6 and r.random() < 0.7:
                    return
                self.progress(parent_w, {"message": message, "normalizedMessages": [], "type": "agent_progress",
                                         "prompt": prompt, "agentId": agent}, "agent_msg_01" + _b62(r, 22), task_id)

            sub.agent_progress = relay
            first = self.user_text(sub, prompt)
            relay({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": prompt}]}, "uuid": first,
                   "timestamp": _ts(self.ms)})
            for _ in range(n_tools):
                k = r.random()
                sub_oc = self.t_read() if k < 0.55 else self.t_grep() if k < 0.8 else self.t_glob()
                self.tool_call(sub, sub_oc, [])
            summary = self.prose.fill(r.choice(SUMMARY), self.ctx())
            self.assistant(sub, [{"type": "text", "text": summary}])
            oc.content = [{"type": "text", "text": summary}]
            oc.tur = {"status": "completed", "prompt": prompt, "agentId": agent, "content": [{"type": "text", "text": summary}],
                      "totalDurationMs": self.ms - t0, "totalTokens": r.randint(8000, 90000), "totalToolUseCount": n_tools,
                      "usage": self.usage()}

        oc = Outcome("Task", inp, None, None, extra_before_result=run_sub)
        return oc

    # -- structure -------------------------------------------------------------
    def compaction(self) -> None:
        r = self.rng
        w = self.main
        agent = "acompact-" + _hex(r, 6)
        side = Writer(self, agent)
        self.subs.append((f"agent-{agent}.jsonl", side))
        side.last = w.last
        self.user_text(side, "Your task is to create a detailed summary of the conversation so far, paying close attention "
                             "to the user's explicit requests and your previous actions.\n" + self.prose.para(SENTENCES, self.ctx(), 6))
        summary = "Analysis:\nLet me chronologically analyze the conversation:\n\n" + "\n\n".join(
            f"{i + 1}. **{self.prose.fill('{verb} {noun} {noun2}', {}).capitalize()}**: " + self.prose.para(THINK, self.ctx(), 3)
            for i in range(r.randint(6, 14)))
        summary += "\n\nFiles touched:\n" + "\n".join(f"   - {p}" for p in sorted(self.turn_edits | set(self.work[:8])))
        self.assistant(side, [{"type": "text", "text": summary}])
        uid = _uuid(r)
        rec = w.env("system", None)
        rec = {"parentUuid": None, "logicalParentUuid": w.last, **{k: v for k, v in rec.items() if k != "parentUuid"}}
        rec.update(subtype="compact_boundary", content="Conversation compacted", isMeta=False, timestamp=self.tick(),
                   uuid=uid, level="info", compactMetadata={"trigger": r.choice(("auto", "auto", "manual")),
                                                            "preTokens": r.randint(120000, 170000)})
        w.emit(rec)
        w.last = uid
        hook_id = _uuid(r)
        for cmd in START_HOOKS:
            self.progress(w, {"type": "hook_progress", "hookEvent": "SessionStart", "hookName": "SessionStart:compact",
                              "command": cmd}, hook_id, hook_id)
        w.last = uid
        self.user_text(w, "This session is being continued from a previous conversation that ran out of context. The summary "
                          "below covers the earlier portion of the conversation.\n\n" + summary,
                       isVisibleInTranscriptOnly=True, isCompactSummary=True)

    def turn(self) -> None:
        r = self.rng
        w = self.main
        self.turn_edits = set()
        t_start = self.ms
        ctx = self.ctx()
        prompt = self.prose.fill(r.choice(PROMPTS), ctx)
        self.prompt_uuid = _uuid(r)
        self.snapshot(w, False)
        uid = self.prompt_uuid
        rec = w.env("user", w.last)
        rec["message"] = {"role": "user", "content": prompt}
        rec["uuid"] = uid
        rec["timestamp"] = self.tick(5000, 600000)
        rec["thinkingMetadata"] = {"maxThinkingTokens": 31999}
        rec["todos"] = []
        rec["permissionMode"] = r.choice(("bypassPermissions", "default", "acceptEdits"))
        w.emit(rec)
        w.last = uid
        steps = r.randint(3, 28)
        for s in range(steps):
            lead: list[dict[str, Any]] = []
            if r.random() < 0.22:
                sig = base64.b64encode(r.randbytes(r.randint(180, 520))).decode()
                lead.append({"type": "thinking", "thinking": self.prose.para(THINK, self.ctx(), r.randint(1, 5)), "signature": sig})
            if r.random() < 0.45:
                lead.append({"type": "text", "text": self.prose.fill(r.choice(TEXTS), self.ctx())})
            k = r.random()
            # Tool mix close to the real sample: Bash 43%, Read 25%, Edit 19%, Write 4% of calls.
            if k < 0.25:
                oc = self.t_read()
            elif k < 0.45:
                oc = self.t_edit()
            elif k < 0.50:
                oc = self.t_write()
            elif k < 0.86:
                oc = self.t_bash()
            elif k < 0.93:
                oc = self.t_grep()
            elif k < 0.98:
                oc = self.t_glob()
            else:
                oc = self.t_task(w)
            self.tool_call(w, oc, lead)
            if oc.rejected:
                return
            if self.total >= self.target and s >= 2:
                break
        self.assistant(w, [{"type": "text", "text": self.prose.fill(r.choice(SUMMARY), self.ctx())}])
        stop_id = _uuid(r)
        for cmd in STOP_HOOKS:
            self.progress(w, {"type": "hook_progress", "hookEvent": "Stop", "hookName": "Stop", "command": cmd}, stop_id, stop_id)
        uid = _uuid(r)
        rec = w.env("system", w.last)
        rec.update(subtype="stop_hook_summary", hookCount=len(STOP_HOOKS), hookInfos=[{"command": c} for c in STOP_HOOKS],
                   hookErrors=[], preventedContinuation=False, stopReason="", hasOutput=True, level="suggestion",
                   timestamp=self.tick(20, 300), uuid=uid, toolUseID=stop_id)
        w.emit(rec)
        w.last = uid
        uid = _uuid(r)
        rec = w.env("system", w.last)
        rec.update(subtype="turn_duration", durationMs=self.ms - t_start, timestamp=self.tick(5, 60), uuid=uid, isMeta=False)
        w.emit(rec)
        w.last = uid
        if r.random() < 0.05:
            w.emit({"type": "queue-operation", "operation": "enqueue", "timestamp": self.tick(), "sessionId": self.sid,
                    "content": self.prose.fill(r.choice(PROMPTS), self.ctx())})
            w.emit({"type": "queue-operation", "operation": "dequeue", "timestamp": self.tick(), "sessionId": self.sid})

    def generate(self) -> None:
        """Turns until the session (main file plus subagents) reaches its target size."""
        self.snapshot_start()
        while self.total < self.target:
            self.turn()
            if self.total >= self.next_compact and self.total < self.target - 200_000:
                self.compaction()
                self.next_compact = self.total + self.rng.randint(1_800_000, 3_500_000)

    def snapshot_start(self) -> None:
        w = self.main
        hook_id = _uuid(self.rng)
        for cmd in START_HOOKS:
            self.progress(w, {"type": "hook_progress", "hookEvent": "SessionStart", "hookName": "SessionStart:startup",
                              "command": cmd}, hook_id, hook_id)

    def write(self, out_dir: Path) -> SessionStats:
        main_path = out_dir / f"{self.sid}.jsonl"
        data = self.main.data()
        main_path.write_bytes(data)
        st = self.stats
        st.files = 1
        st.bytes = len(data)
        st.records = self.main.records
        if self.subs:
            sub_dir = out_dir / self.sid / "subagents"
            sub_dir.mkdir(parents=True, exist_ok=True)
            for name, sw in self.subs:
                d = sw.data()
                (sub_dir / name).write_bytes(d)
                st.files += 1
                st.bytes += len(d)
                st.records += sw.records
        return st


# ------------------------------------------------------------------ corpus

_REPO: BaseRepo | None = None


def _repo(seed: int) -> BaseRepo:
    global _REPO
    if _REPO is None or _REPO.seed != seed:
        _REPO = BaseRepo(seed)
    return _REPO


def plan_sessions(seed: int, total: int) -> list[tuple[int, int, int]]:
    """(index, target bytes, start ms) per session; sizes log-uniform in [0.3 MB, 8 MB]."""
    r = random.Random(f"{seed}:plan")
    out: list[tuple[int, int, int]] = []
    left = total
    t = EPOCH_MS
    i = 0
    lo, hi = math.log(MIN_SESSION), math.log(MAX_SESSION)
    while left > 0:
        size = int(math.exp(r.uniform(lo, hi)))
        if left - size < MIN_SESSION // 2:
            size = max(left, 50_000)
        size = min(size, max(left, 50_000))
        out.append((i, size, t))
        left -= size
        t += r.randint(20 * 60_000, 18 * 3600_000)
        i += 1
    return out


def _gen_one(args: tuple[int, int, int, int, str]) -> SessionStats:
    seed, index, target, start, out = args
    sess = Session(_repo(seed), seed, index, target, start)
    sess.generate()
    return sess.write(Path(out))


def parse_size(text: str) -> int:
    """'100MB' -> 100_000_000 (decimal units; KB, MB, GB, or plain bytes)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]?)B?\s*", text.upper())
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {text!r}: use e.g. 10MB, 100MB, 1GB")
    return int(float(m.group(1)) * {"": 1, "K": 10**3, "M": 10**6, "G": 10**9}[m.group(2)])


@dataclass
class CorpusStats:
    sessions: int = 0
    files: int = 0
    records: int = 0
    bytes: int = 0
    progress: int = 0
    edits: int = 0
    seconds: float = 0.0
    per_session: list[SessionStats] = field(default_factory=list)


def generate(out: Path, size: int, seed: int = 1, jobs: int = 1) -> CorpusStats:
    """Write the corpus under `out`/projects/ and return totals."""
    proj = out / "projects" / PROJECT_DIR
    proj.mkdir(parents=True, exist_ok=True)
    plan = plan_sessions(seed, size)
    t0 = time.perf_counter()
    stats = CorpusStats()
    work = [(seed, i, target, start, str(proj)) for i, target, start in plan]
    if jobs > 1:
        with ProcessPoolExecutor(max_workers=jobs) as ex:
            results = list(ex.map(_gen_one, work, chunksize=1))
    else:
        results = [_gen_one(a) for a in work]
    for st in results:
        stats.sessions += 1
        stats.files += st.files
        stats.records += st.records
        stats.bytes += st.bytes
        stats.progress += st.progress
        stats.edits += st.edits
    stats.seconds = time.perf_counter() - t0
    return stats


def check(out: Path, limit: int = 0) -> int:
    """Verify the corpus: every line parses and structuredPatch(originalFile) == the new file."""
    n = bad = 0
    for p in sorted((out / "projects").rglob("*.jsonl")):
        for line in p.read_bytes().splitlines():
            rec = orjson.loads(line)
            tur = rec.get("toolUseResult")
            if not isinstance(tur, dict) or not tur.get("structuredPatch") or not isinstance(tur.get("originalFile"), str):
                continue
            n += 1
            try:
                got = apply_patch(tur["originalFile"], tur["structuredPatch"])
            except (ValueError, IndexError):
                bad += 1
                continue
            if "content" in tur:
                want = tur["content"]
                if got != want:
                    bad += 1
            elif tur["originalFile"].count(tur["oldString"]) != 1 or \
                    got != tur["originalFile"].replace(tur["oldString"], tur["newString"], 1):
                bad += 1
            if limit and n >= limit:
                break
    print(f"check: {n} patches verified, {bad} bad")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path, help="corpus directory (projects/ is created inside)")
    ap.add_argument("--size", default="100MB", type=parse_size, help="total raw JSONL size, e.g. 10MB, 100MB, 1GB")
    ap.add_argument("--seed", type=int, default=1, help="RNG seed (same seed and size -> same bytes)")
    ap.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1), help="worker processes (output does not depend on it)")
    ap.add_argument("--check", action="store_true", help="after generating, verify every structuredPatch")
    args = ap.parse_args(argv)
    if (args.out / "projects").exists() and any((args.out / "projects").rglob("*.jsonl")):
        print(f"{args.out}/projects already holds sessions; remove it first", file=sys.stderr)
        return 2
    st = generate(args.out, args.size, args.seed, args.jobs)
    mb = st.bytes / 1e6
    print(f"gen_sessions: {st.sessions} sessions, {st.files} files, {st.records} records "
          f"({st.progress / max(st.records, 1):.0%} progress), {st.edits} edits, {st.bytes} bytes ({mb:.1f} MB) "
          f"in {st.seconds:.1f}s ({mb / max(st.seconds, 1e-9):.1f} MB/s) -> {args.out / 'projects'}")
    if args.check:
        return check(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
