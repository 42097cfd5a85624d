"""The rooms of ``jaxlsp/`` import one way only: no import circle, no import from a lower layer to a
higher one (the layers written in ``docs/architecture.md``), ``jax._src`` in one place.

Imports are read from the source with ``ast`` (nothing is imported), inside functions and under
``TYPE_CHECKING`` too: a lazy import that closes a circle is still a circle.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "jaxlsp"
DOC = ROOT / "docs" / "architecture.md"
#: the modules allowed to import ``jax._src`` (and their submodules)
JAX_PRIVATE = ("jaxlsp.worker.tracing.jaxcompat",)
#: The worker is a program of its own (it runs in the user's interpreter); the rest of jaxlsp sees
#: it only through these modules: the typed request and result, TPU topology names, and the
#: process containment both sides apply (``jaxlsp.worker`` itself names what is staged).
WORKER = "jaxlsp.worker"
WORKER_FACE = ("jaxlsp.worker", "jaxlsp.worker.protocol", "jaxlsp.worker.topology", "jaxlsp.worker.containment")


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imported(name: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """(module, line) for every import of a jaxlsp module in ``path``, resolved to the module
    that holds the name (``from pkg import mod`` is ``pkg.mod``; ``from mod import name`` is ``mod``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def resolve(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "jaxlsp" and (target := resolve(alias.name)):
                    yield target, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            if base.split(".")[0] != "jaxlsp":
                continue
            for alias in node.names:
                target = resolve(f"{base}.{alias.name}")
                if target is not None:
                    yield target, node.lineno


def import_graph() -> dict[str, dict[str, int]]:
    known = modules()
    graph: dict[str, dict[str, int]] = {}
    for name, path in known.items():
        graph[name] = {t: line for t, line in imported(name, path, known) if t != name}
    return graph


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(graph.get(nxt, {}))))
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def layers(text: str) -> list[list[str]]:
    """The rooms of each layer, bottom first, from the doc's ```text layers block."""
    block = re.search(r"```text layers\n(.*?)```", text, re.S)
    assert block, f"{DOC} has no ```text layers block"
    return [line.split() for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


def layer_of(module: str, rooms: dict[str, int]) -> tuple[str, int] | None:
    best = None
    for room, level in rooms.items():
        inside = module == room or (room != "jaxlsp" and module.startswith(room + "."))
        if inside and (best is None or len(room) > len(best[0])):
            best = (room, level)
    return best


def test_no_import_circle_inside_jaxlsp() -> None:
    graph = import_graph()
    found = circles(graph)
    described = [" <-> ".join(c) for c in found]
    assert not found, "import circles (a lazy import counts):\n" + "\n".join(described)


def test_no_room_imports_a_room_above_it() -> None:
    rooms = {room: level for level, names in enumerate(layers(DOC.read_text(encoding="utf-8"))) for room in names}
    graph = import_graph()
    unplaced = [m for m in graph if layer_of(m, rooms) is None]
    assert not unplaced, f"modules in no room of {DOC.name}'s layers: {unplaced}"
    upward = []
    for module, targets in sorted(graph.items()):
        room, level = layer_of(module, rooms) or ("", 0)
        for target, line in sorted(targets.items()):
            target_room, target_level = layer_of(target, rooms) or ("", 0)
            if target_level > level:
                path = modules()[module].relative_to(ROOT)
                upward.append(f"{path}:{line}: {module} ({room}) imports {target} ({target_room}, a layer above)")
    assert not upward, "imports from a lower layer to a higher one:\n" + "\n".join(upward)


def behind_the_face(graph: dict[str, dict[str, int]]) -> list[str]:
    """``module:line -> target`` for each import from outside the worker of a worker module that is
    not one of its face's."""
    found = []
    for module, targets in sorted(graph.items()):
        if module == WORKER or module.startswith(WORKER + "."):
            continue
        for target, line in sorted(targets.items()):
            inside = target == WORKER or target.startswith(WORKER + ".")
            if inside and target not in WORKER_FACE:
                found.append(f"{module}:{line} -> {target}")
    return found


def test_outside_code_sees_the_worker_only_through_its_face() -> None:
    found = behind_the_face(import_graph())
    assert not found, f"imports of the worker past its face {WORKER_FACE}:\n" + "\n".join(found)


def test_the_face_check_finds_a_reach_past_the_face() -> None:
    graph = {
        "jaxlsp.capture.engine": {"jaxlsp.worker.protocol": 3, "jaxlsp.worker.tracing.limits": 4},
        "jaxlsp.worker.process.main": {"jaxlsp.worker.tracing.limits": 9},
    }
    assert behind_the_face(graph) == ["jaxlsp.capture.engine:4 -> jaxlsp.worker.tracing.limits"]


def test_only_jaxcompat_imports_jax_private_modules() -> None:
    offenders = []
    for name, path in modules().items():
        if name.startswith(JAX_PRIVATE):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            if any(n == "jax._src" or n.startswith("jax._src.") for n in names):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, f"jax._src imported outside {JAX_PRIVATE}: {offenders}"


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b": 1}, "b": {"a": 2}}, [["a", "b"]]),
        ({"a": {"b": 1}, "b": {"c": 1}, "c": {}}, []),
        ({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}, [["a", "b", "c"]]),
    ],
)
def test_the_circle_finder_finds_circles(graph: dict[str, dict[str, int]], expected: list[list[str]]) -> None:
    assert circles(graph) == expected


def test_a_lazy_upward_import_is_found(tmp_path: Path) -> None:
    """The checks can fail: a lower room's function-level import of a higher room is an edge."""
    low = tmp_path / "jaxlsp" / "low.py"
    low.parent.mkdir()
    (low.parent / "__init__.py").write_text("")
    low.write_text("def f():\n    from jaxlsp.high import g\n    return g\n")
    (low.parent / "high.py").write_text("from jaxlsp import low\ndef g(): pass\n")
    known = modules(low.parent)
    graph = {name: {t: line for t, line in imported(name, path, known) if t != name} for name, path in known.items()}
    assert graph["jaxlsp.low"] == {"jaxlsp.high": 2}
    assert circles(graph) == [["jaxlsp.high", "jaxlsp.low"]]
    rooms = {"jaxlsp.low": 0, "jaxlsp.high": 1}
    assert layer_of("jaxlsp.low", rooms) == ("jaxlsp.low", 0)


def test_the_page_names_every_room_and_only_files_that_exist() -> None:
    """docs/architecture.md reads true against the tree: each package under jaxlsp/ is in its code
    map, and each module path it names (``capture/launch/spare.py``) is a file here."""
    text = DOC.read_text(encoding="utf-8")
    packages = sorted(str(p.parent.relative_to(PACKAGE)) for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE)
    code_map = text[text.index("## Code map") : text.index("## API boundaries")]
    missing = [p for p in packages if f"{p.rpartition('/')[2]}/" not in code_map]
    assert not missing, f"rooms missing from {DOC.name}'s code map: {missing}"
    named = set(re.findall(r"`((?:[a-z_]+/)+[a-z_]+\.(?:py|ts|md|json))`", text))
    gone = [n for n in sorted(named) if not any((base / n).exists() for base in (PACKAGE, ROOT, ROOT / "editors"))]
    assert not gone, f"{DOC.name} names files that do not exist: {gone}"


#: At most this many ``Any`` per 1,000 lines inside the worker (issue 54: 82 before it was typed).
WORKER_ANY_PER_1000 = 15


def any_count(source: str) -> int:
    """``Any`` as a name in code: annotations, casts' string types and subscripts, never in
    comments or docstrings (a docstring does not parse as an expression that names it)."""
    count = 0
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Name) and node.id == "Any") or (
            isinstance(node, ast.Attribute) and node.attr == "Any"
        ):
            count += 1
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                inner = ast.parse(node.value, mode="eval")
            except SyntaxError:
                continue
            count += sum(1 for n in ast.walk(inner) if isinstance(n, ast.Name) and n.id == "Any")
    return count


def test_the_worker_is_typed_both_ways() -> None:
    """The worker names ``Any`` at most 15 times per 1,000 lines, and every ``request`` it takes is
    the face's ``WorkerRequest``, never a ``dict[str, Any]``."""
    found, lines, untyped = 0, 0, []
    for path in sorted((PACKAGE / "worker").rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        found += any_count(source)
        lines += len(source.splitlines())
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for arg in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs):
                    if arg.arg == "request" and (
                        arg.annotation is None or "WorkerRequest" not in ast.unparse(arg.annotation)
                    ):
                        untyped.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert found * 1000 <= WORKER_ANY_PER_1000 * lines, f"{found} Any in {lines} lines of jaxlsp/worker"
    assert not untyped, f"requests not typed as WorkerRequest: {untyped}"


def test_the_any_count_reads_code_not_prose() -> None:
    source = 'from typing import Any\n"""Any docstring"""\nx: dict[str, Any] = {}\ny = cast("list[Any]", [])\n# Any\n'
    assert any_count(source) == 2
