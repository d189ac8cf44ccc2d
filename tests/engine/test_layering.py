"""The engine's layering, read from its source: it never imports the app, and no two of
its modules import each other, directly or round a circle (imports inside functions
and under TYPE_CHECKING count: a lazy import still ties the modules together)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in (ROOT / "engine").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def _graph() -> tuple[dict[str, set[str]], list[tuple[str, str]]]:
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    into_app: list[tuple[str, str]] = []
    for name, path in modules.items():
        for target in _imports(path):
            if target == "app" or target.startswith("app."):
                into_app.append((name, target))
            while target and target not in modules:
                target = target.rpartition(".")[0]
            # A package's own modules may import the package (its __init__).
            if target and target != name and not name.startswith(target + "."):
                graph[name].add(target)
    return graph, into_app


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_engine_never_imports_the_app() -> None:
    _, into_app = _graph()
    assert into_app == []


def test_no_engine_modules_import_each_other_in_a_circle() -> None:
    graph, _ = _graph()
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# The engine's folders are its layers, bottom to top; the modules at engine/'s root
# (errors, paths, json_file, environ, wire*) are the vocabulary every layer shares.
LAYERS = ("runtime", "rag", "service")
SHARED = (
    "errors",
    "paths",
    "json_file",
    "environ",
    "wire",
    "wire_events",
    "wire_openai",
    "wire_each",
    "wire_hardware",
    "stream_cut",
)


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "engine" and parts[1] in LAYERS else None


def _upward_imports() -> list[tuple[str, str]]:
    graph, _ = _graph()
    return [
        (name, target)
        for name, targets in sorted(graph.items())
        for target in sorted(targets)
        if (low := _layer(name)) is not None
        and (high := _layer(target)) is not None
        and LAYERS.index(high) > LAYERS.index(low)
    ]


def test_every_engine_module_lives_in_a_layer_or_is_shared() -> None:
    loose = [
        name
        for name in _modules()
        if _layer(name) is None
        and name not in ("engine", "engine.__main__")
        and name.removeprefix("engine.") not in SHARED
    ]
    assert loose == []


def test_no_layer_imports_one_above_it() -> None:
    """The runtime imports neither the RAG core nor the service; the RAG core never
    imports the service (imports inside functions count)."""
    assert _upward_imports() == []


def test_the_shared_modules_import_no_layer() -> None:
    graph, _ = _graph()
    for name in SHARED:
        assert {t for t in graph[f"engine.{name}"] if _layer(t)} == set(), name


def test_an_upward_import_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    real = _graph

    def with_one_more() -> tuple[dict[str, set[str]], list[tuple[str, str]]]:
        graph, into_app = real()
        graph["engine.runtime.planner.planner"] = {"engine.rag.store.lance_store"}
        return graph, into_app

    monkeypatch.setitem(globals(), "_graph", with_one_more)
    assert _upward_imports() == [("engine.runtime.planner.planner", "engine.rag.store.lance_store")]


def test_the_benchmarks_stay_out_of_the_product() -> None:
    """The benchmark lab is a top-level `bench` package of the checkout: no module of the
    engine or the window imports it, and the wheel's package list leaves it out."""
    import tomllib

    for package in ("engine", "app", "native"):
        for path in (ROOT / package).rglob("*.py"):
            if path.relative_to(ROOT).as_posix() == "app/commands/bench.py":
                continue  # the command that finds it in a checkout
            reached = {n for n in _imports(path) if n == "bench" or n.startswith("bench.")}
            assert not reached, (path, reached)
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"
    ]["find"]["include"]
    assert not any(pattern.startswith("bench") for pattern in include)
    assert not (ROOT / "engine" / "bench").exists()
