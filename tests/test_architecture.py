"""The package structure the README's architecture section describes holds: no import circles in
`engram/` or `server/` (a circle makes every module in it load with the others and hides which
one owns a concept), the core never imports the protocol libraries, and the layers import only
downwards. Read with `ast`, every import counted (a function-level import is still a dependency).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"engram": ROOT / "engram", "engram_server": ROOT / "server"}
PROTOCOL_LIBRARIES = ("pygls", "lsprotocol", "mcp", "uvicorn", "starlette")

# What each package of engram/ may import from engram/ (besides itself): the layers, bottom up.
LAYERS: dict[str, set[str]] = {
    "engram.errors": set(),
    "engram.arrays": set(),
    "engram.words": set(),
    "engram.gitread": set(),
    "engram.fsutil": {"engram.errors", "engram.words"},
    "engram.tape": {"engram.errors", "engram.words", "engram.fsutil"},
    "engram.store": {"engram.errors", "engram.words", "engram.gitread", "engram.fsutil", "engram.tape"},
    "engram.anchor": {"engram.arrays", "engram.words"},
    "engram.adapters": {"engram.errors", "engram.words", "engram.gitread", "engram.tape", "engram.anchor"},
    "engram.index": {"engram.errors", "engram.words", "engram.fsutil", "engram.arrays", "engram.tape", "engram.store",
                     "engram.gitread", "engram.anchor", "engram.adapters"},
    "engram.capture": {"engram.errors", "engram.words", "engram.fsutil", "engram.tape", "engram.store", "engram.anchor",
                       "engram.gitread", "engram.adapters", "engram.index"},
    "engram.query": {"engram.errors", "engram.words", "engram.fsutil", "engram.arrays", "engram.tape", "engram.store",
                     "engram.gitread", "engram.anchor", "engram.adapters", "engram.index"},
    "engram.integrations": {"engram.errors", "engram.words", "engram.store", "engram.memory"},
    "engram.memory": {"engram.errors", "engram.words", "engram.fsutil", "engram.arrays", "engram.tape", "engram.store",
                      "engram.gitread", "engram.anchor", "engram.adapters", "engram.index", "engram.query"},
    "engram.continuity": {"engram.errors", "engram.words", "engram.fsutil", "engram.tape", "engram.store",
                          "engram.gitread", "engram.adapters", "engram.index", "engram.query", "engram.memory"},
    "engram.interop": {"engram.errors", "engram.words", "engram.fsutil", "engram.tape", "engram.store", "engram.anchor",
                       "engram.gitread", "engram.adapters", "engram.index", "engram.capture", "engram.query"},
    "engram.share": {"engram.errors", "engram.words", "engram.fsutil", "engram.tape", "engram.store", "engram.index",
                     "engram.gitread", "engram.capture", "engram.memory"},
    "engram.doctor": {"engram.errors", "engram.words", "engram.fsutil", "engram.tape", "engram.store", "engram.index",
                      "engram.gitread", "engram.capture", "engram.integrations", "engram.memory"},
}


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg, folder in PACKAGES.items():
        for f in folder.rglob("*.py"):
            parts = [pkg, *f.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = f
    return mods


def _imported(mod: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    """Full names of what `node` imports (`from a import b` may name a module a.b or a name in a)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        parts = mod.split(".")[: None if path.name == "__init__.py" else -1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join([*parts, *([base] if base else [])])
    return [base, *(f"{base}.{a.name}" for a in node.names)]


def _graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module -> project modules it imports, module -> top-level third-party names it imports)."""
    mods = _modules()
    inner: dict[str, set[str]] = {m: set() for m in mods}
    outer: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for name in _imported(mod, path, node):
                target = name
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target:
                    # importing a package's own child runs the package first: not an edge back up
                    if target != mod and not mod.startswith(target + "."):
                        inner[mod].add(target)
                elif name:
                    outer[mod].add(name.split(".")[0])
    return inner, outer


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circles() -> None:
    inner, _ = _graph()
    circles = _circles(inner)
    detail = [" <-> ".join(c) + ": " + "; ".join(f"{a} -> {b}" for a in c for b in sorted(inner[a]) if b in c)
              for c in circles]
    assert not circles, "import circles:\n" + "\n".join(detail)


def test_the_circle_finder_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_the_core_never_imports_the_protocol_libraries() -> None:
    _, outer = _graph()
    bad = {m: sorted(outer[m] & set(PROTOCOL_LIBRARIES)) for m in outer if m.split(".")[0] == "engram"}
    assert not {m: libs for m, libs in bad.items() if libs}


def _package_of(mod: str) -> str:
    parts = mod.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else mod


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_layers_import_only_downwards(package: str) -> None:
    inner, _ = _graph()
    allowed = LAYERS[package] | {package, "engram"}
    wrong = {f"{m} -> {t}" for m in inner if _package_of(m) == package
             for t in inner[m] if t.startswith("engram.") and _package_of(t) not in allowed}
    assert not wrong, f"{package} may import only {sorted(LAYERS[package])}:\n" + "\n".join(sorted(wrong))


def test_nothing_in_the_core_imports_the_command_line_or_the_server() -> None:
    inner, _ = _graph()
    wrong = {f"{m} -> {t}" for m in inner if m.startswith("engram.") and not m.startswith("engram.cli")
             for t in inner[m] if t.startswith(("engram.cli", "engram_server"))}
    assert not wrong, "\n".join(sorted(wrong))


def test_every_package_is_installed_by_pip_install_dot() -> None:
    """`pyproject.toml` lists the packages explicitly (server/ installs as `engram_server`), so a new
    package missing from the list works in the editable install the tests use and is absent from a
    user's `pip install .` (engram.share, engram.interop and engram.continuity once were)."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {name + "".join("." + part for part in init.parent.relative_to(folder).parts)
               for name, folder in PACKAGES.items() for init in folder.rglob("__init__.py")}
    assert on_disk - listed == set(), f"add these to [tool.setuptools] packages in pyproject.toml: {on_disk - listed}"

