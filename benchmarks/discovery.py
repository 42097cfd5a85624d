"""Discovery's speed measured against libcst's own parser (targets: scan <= 2.0x, edit <= 0.25x),
and what call-site inference adds (target: one target's call sites <= 0.10x the scan).

(a) Whole-tree scan: ``discover_paths`` over the installed ``flax`` and ``jax`` packages with a
    fresh index, divided by ``libcst.parse_module`` of every ``.py`` file of the same folders. Both
    sides read the files from disk (the OS cache is warmed first): the parse loop reads each file
    once, ``discover_paths`` reads them itself as it does in use. The packages are located with
    ``importlib.util.find_spec``, which for a top-level package does not execute it (checked).
(b) Incremental edit: a 5,000-line model file made by repeating the examples under fresh names.
    With the index warm, one line inside one function changes (to a new text each time, so every
    edit is a real change and a real cache miss); ``set_text`` + ``discover`` is timed and divided
    by one ``libcst.parse_module`` of the file. Both are medians of several repetitions.
(c) Notebooks: the model code as a Jupyter notebook (cells of a few definitions, markdown cells
    between them, a magic and an output per cell, as saved notebooks have) and the same code as a
    ``.py`` file (the notebook's module text: the same lines), each discovered from disk with a
    fresh index; seconds per line of code of the notebook divided by the same for the file (target
    <= 1.0 with a 5% allowance for timer noise: a notebook costs no more per line than a ``.py``
    file). Measured in CPU time of this process over back-to-back pairs (file and notebook, their
    order alternating): the median of the pairs' ratios, since on a shared machine the load drifts
    between pairs but hardly within one.

(d) Call sites (discovery/callsites/finder.py): static inference is not part of the scan (it runs when a
    target without a profile is traced or listed), so (a) is what it was; what it costs is measured
    here. On the tree of (a), with the index warm from a scan, ``CallSiteFinder.find`` of a sample
    of the entrypoints (every n-th, in file order), against that scan's time: the median target
    must cost at most 10 % of the scan, the same bar as "adds at most 10 % to the scan".

Run ``python benchmarks/discovery.py`` (``--quick`` scans flax only). The exit status is 1 when a
ratio misses its target.
"""

from __future__ import annotations

import argparse
import ast
import gc
import importlib.metadata
import importlib.util
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import libcst

from jaxlsp.discovery import Classifier, Discovery, WorkspaceIndex, discover_paths
from jaxlsp.discovery.callsites.finder import CallSiteFinder
from jaxlsp.discovery.index import iter_python_files
from jaxlsp.notebook import is_notebook, read_module

SCAN_TARGET = 2.0
EDIT_TARGET = 0.25
NOTEBOOK_TARGET = 1.05
CALLSITES_TARGET = 0.10
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
MODEL_EXAMPLES = ("attention.py", "eqx_mlp.py", "linen_mlp.py", "nnx_cnn.py")


def package_dir(name: str) -> Path:
    """The folder of the installed top-level package ``name``, found without importing it."""
    before = name in sys.modules
    spec = importlib.util.find_spec(name)
    if not before and name in sys.modules:
        raise AssertionError(f"find_spec({name!r}) imported {name}")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{name} is not installed: run `make install` first")
    return Path(next(iter(spec.submodule_search_locations)))


def read(path: Path) -> str:
    """A file's Python text: a notebook's is its module (its code cells), what discovery parses."""
    with open(path, encoding="utf-8", errors="replace") as f:  # as the index reads files
        text = f.read()
    return read_module(text).text if is_notebook(path) else text


def clock(fn: Callable[[], object]) -> float:
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def cpu_clock(fn: Callable[[], object]) -> float:
    """CPU seconds of this process spent in ``fn``."""
    gc.collect()
    start = time.process_time()
    fn()
    return time.process_time() - start


# -- (a) whole-tree scan -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScanResult:
    files: int
    lines: int
    size: int  # bytes of source
    parse_seconds: float  # libcst.parse_module of every file, reads included
    parse_failures: int  # files libcst could not parse (their time still counts)
    discover_seconds: float  # discover_paths with a fresh index
    discovered: int  # files discover_paths looked at (the rest cannot define a JAX entrypoint)
    entrypoints: int

    @property
    def ratio(self) -> float:
        return self.discover_seconds / self.parse_seconds


def measure_scan(dirs: Sequence[Path], roots: Sequence[Path], repeat: int = 1) -> ScanResult:
    """Both measurements, interleaved ``repeat`` times; the fastest of each counts."""
    files = [file for folder in dirs for file in iter_python_files(folder)]  # what discover_paths walks
    texts = [read(file) for file in files]  # warms the OS cache for both measurements
    lines = sum(text.count("\n") for text in texts)
    size = sum(len(text.encode()) for text in texts)
    del texts
    failures = 0

    def parse_all() -> None:
        nonlocal failures
        failures = 0
        for file in files:
            try:
                libcst.parse_module(read(file))
            except libcst.ParserSyntaxError:
                failures += 1

    found: list[Discovery] = []

    def discover_all() -> None:
        found[:] = discover_paths(list(dirs), roots=list(roots))  # a fresh index every time

    # Warm up both code paths (lazy imports, compiled patterns) on a small file first.
    small = min(files, key=lambda f: f.stat().st_size) if files else None
    if small is not None:
        libcst.parse_module(read(small))
        discover_paths([small], roots=list(roots))
    parse_times: list[float] = []
    discover_times: list[float] = []
    for _ in range(max(1, repeat)):
        parse_times.append(clock(parse_all))
        discover_times.append(clock(discover_all))
    return ScanResult(
        files=len(files),
        lines=lines,
        size=size,
        parse_seconds=min(parse_times),
        parse_failures=failures,
        discover_seconds=min(discover_times),
        discovered=len(found),
        entrypoints=sum(len(d.entrypoints) + len(d.drivers) for d in found),
    )


# -- (b) incremental edit ------------------------------------------------------------------------------


def _segment(text: str, node: ast.stmt) -> str:
    lines = text.splitlines()
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    assert node.end_lineno is not None
    return "\n".join(lines[first - 1 : node.end_lineno])


def model_file(min_lines: int = 5_000, examples: Path = EXAMPLES) -> str:
    """Realistic model code: the examples' definitions repeated under fresh names, imports once."""
    imports: list[str] = []
    copies: list[tuple[str, list[str], list[str]]] = []  # (stem, names defined, definitions) per example
    for name in MODEL_EXAMPLES:
        text = read(examples / name)
        names: list[str] = []
        blocks: list[str] = []
        for node in ast.parse(text).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                if not (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
                    line = _segment(text, node)
                    if line not in imports:
                        imports.append(line)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.append(node.name)
                blocks.append(_segment(text, node))
        copies.append((Path(name).stem, names, blocks))
    out = ['"""Generated from the examples for the discovery benchmark."""', "", *sorted(imports), ""]
    count = len(out)
    copy = 0
    while count < min_lines:
        for stem, names, blocks in copies:
            pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
            for block in blocks:
                renamed = pattern.sub(rf"\g<1>_{stem}_{copy}", block)
                out.extend(["", "", renamed])
                count += 2 + renamed.count("\n") + 1
        copy += 1
    text = "\n".join(out) + "\n"
    ast.parse(text)
    return text


@dataclass(frozen=True)
class EditResult:
    lines: int
    parse_seconds: float  # median libcst.parse_module of the whole file
    edit_seconds: float  # median set_text + discover after a one-line edit
    edits: int
    parses: int
    misses_per_edit: float  # statements summarized again per edit (1 when only the edited one is)
    entrypoints: int

    @property
    def ratio(self) -> float:
        return self.edit_seconds / self.parse_seconds


_EDITED = re.compile(r"^(?P<indent>[ \t]+)(?P<lhs>scores = .*)$", re.M)


def measure_edit(text: str, edits: int = 15, parses: int = 5) -> EditResult:
    """Time discovery after one-line edits of ``text`` against parsing ``text`` with libcst."""
    targets = list(_EDITED.finditer(text))
    if not targets:
        raise ValueError("the model file has no `scores = ...` line to edit")
    target = targets[len(targets) // 2]  # a function in the middle of the file

    def edited(n: int) -> str:
        line = f"{target['indent']}{target['lhs']} * {1 + n / 1000}"  # a new text on every edit
        return text[: target.start()] + line + text[target.end() :]

    path = Path(tempfile.gettempdir()) / "jaxlsp-bench" / "model.py"  # an open document, never written
    index = WorkspaceIndex([path.parent])
    classifier = Classifier(index)
    index.set_text(path, text)
    expected = len(classifier.discover(path).entrypoints)

    def one(n: int) -> Callable[[], object]:
        def run() -> None:
            index.set_text(path, edited(n))
            found = classifier.discover(path)
            assert len(found.entrypoints) == expected, "an edit inside a function body changed the entrypoints"

        return run

    clock(one(0))  # warm-up edit, not counted
    misses = index.cache.misses
    edit_times = [clock(one(n)) for n in range(1, edits + 1)]
    misses_per_edit = (index.cache.misses - misses) / edits
    parse_times = [clock(lambda: libcst.parse_module(text)) for _ in range(parses)]
    return EditResult(
        lines=text.count("\n"),
        parse_seconds=statistics.median(parse_times),
        edit_seconds=statistics.median(edit_times),
        edits=edits,
        parses=parses,
        misses_per_edit=misses_per_edit,
        entrypoints=expected,
    )


# -- (c) notebooks --------------------------------------------------------------------------------------

# A small PNG's worth of base64, as a plotted output carries (outputs are read, then ignored).
_OUTPUT = {"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBORw0KGgo" * 400}}


def notebook_of(text: str, per_cell: int = 3) -> str:
    """``text`` (the model file) as notebook JSON: its imports in the first code cell, then
    ``per_cell`` definitions per code cell, each after a markdown cell, with a magic and an output."""
    import json

    blocks = text.split("\n\n\n")
    cells: list[dict[str, object]] = [{"cell_type": "markdown", "metadata": {}, "source": "# Models"}]
    for i in range(0, len(blocks), per_cell):
        source = "\n\n\n".join(blocks[i : i + per_cell]).strip("\n")
        if i:
            cells.append({"cell_type": "markdown", "metadata": {}, "source": f"## Part {i // per_cell}"})
            source = "%load_ext autoreload\n" + source
        lines = source.splitlines(keepends=True)
        cells.append({"cell_type": "code", "metadata": {}, "execution_count": i, "outputs": [_OUTPUT], "source": lines})
    notebook = {"cells": cells, "metadata": {"kernelspec": {"language": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(notebook, indent=1)


@dataclass(frozen=True)
class NotebookResult:
    notebook_lines: int  # lines of code (the notebook's module)
    file_lines: int
    notebook_bytes: int
    notebook_seconds: float  # median CPU time of discover_paths of the notebook, fresh index, from disk
    file_seconds: float  # the same for the .py file of its code
    runs: int
    entrypoints: int
    pair_ratio: float  # median over back-to-back (file, notebook) pairs of notebook / file seconds

    @property
    def ratio(self) -> float:
        """Seconds per line of code, notebook over file."""
        return self.pair_ratio * self.file_lines / self.notebook_lines


def measure_notebook(text: str, runs: int = 11) -> NotebookResult:
    folder = Path(tempfile.mkdtemp(prefix="jaxlsp-bench-nb-"))
    py, nb = folder / "models.py", folder / "models.ipynb"
    nb.write_text(notebook_of(text), encoding="utf-8")
    code = read(nb)  # the notebook's code cells as one file: line for line the code discovery reads
    py.write_text(code, encoding="utf-8")
    found: dict[Path, list[Discovery]] = {}

    def discover(path: Path) -> Callable[[], object]:
        def run() -> None:
            found[path] = discover_paths([path], roots=[folder])  # a fresh index every time

        return run

    discover(py)()  # warm-up of both paths, not counted
    discover(nb)()
    times: dict[Path, list[float]] = {py: [], nb: []}
    for run in range(max(1, runs)):
        # each pair back to back, in turns file-first and notebook-first: whichever runs second
        # inherits the first's cache and allocator state, and neither side should always pay for it
        for path in (py, nb) if run % 2 == 0 else (nb, py):
            times[path].append(cpu_clock(discover(path)))
    count = {path: len(found[path][0].entrypoints) for path in (py, nb)}
    if count[py] != count[nb]:
        raise AssertionError(f"the notebook has {count[nb]} entrypoints, the file {count[py]}")
    return NotebookResult(
        notebook_lines=code.count("\n") + 1,
        file_lines=code.count("\n") + 1,
        notebook_bytes=nb.stat().st_size,
        notebook_seconds=statistics.median(times[nb]),
        file_seconds=statistics.median(times[py]),
        runs=runs,
        entrypoints=count[nb],
        pair_ratio=statistics.median(n / f for f, n in zip(times[py], times[nb], strict=True)),
    )


# -- (d) call sites ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CallSitesResult:
    scan_seconds: float  # a scan with a fresh index (every file discovered), which warms it
    entrypoints: int
    sampled: int
    seconds: list[float]  # CallSiteFinder.find of each sampled target, the index warm
    sites: int  # call sites found over the sample

    @property
    def median(self) -> float:
        return statistics.median(self.seconds) if self.seconds else 0.0

    @property
    def p90(self) -> float:
        ordered = sorted(self.seconds)
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))] if ordered else 0.0

    @property
    def ratio(self) -> float:
        return self.median / self.scan_seconds


def measure_callsites(dirs: Sequence[Path], roots: Sequence[Path], sample: int = 40) -> CallSitesResult:
    """The scan, then the call sites of ``sample`` of its entrypoints (every n-th) with one finder."""
    index = WorkspaceIndex(list(roots))
    classifier = Classifier(index)
    files = [file for folder in dirs for file in iter_python_files(folder)]
    entries = []

    def scan() -> None:
        for file in files:
            found = classifier.discover(file)
            entries.extend(found.entrypoints)

    scan_seconds = clock(scan)
    step = max(1, len(entries) // max(1, sample))
    chosen = entries[::step][:sample]
    finder = CallSiteFinder(index, dirs[0].resolve(), classifier)
    seconds: list[float] = []
    sites = 0
    for entry in chosen:
        start = time.perf_counter()
        sites += len(finder.find(entry))
        seconds.append(time.perf_counter() - start)
    return CallSitesResult(scan_seconds, len(entries), len(chosen), seconds, sites)


# -- report --------------------------------------------------------------------------------------------


def verdict(ratio: float, target: float) -> str:
    return "ok" if ratio <= target else "MISSED"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="scan flax only (a faster smoke run)")
    parser.add_argument("--scan", type=Path, action="append", help="scan these folders instead of flax and jax")
    parser.add_argument("--repeat", type=int, default=1, help="scan measurements, fastest counts (default 1)")
    parser.add_argument("--lines", type=int, default=5_000, help="lines of the edited model file (default 5000)")
    parser.add_argument("--edits", type=int, default=15, help="timed edits (default 15)")
    parser.add_argument("--parses", type=int, default=5, help="timed parses of the model file (default 5)")
    parser.add_argument("--runs", type=int, default=11, help="alternating notebook / file runs (default 11)")
    parser.add_argument("--targets", type=int, default=40, help="targets whose call sites are timed (default 40)")
    args = parser.parse_args(argv)

    if args.scan:
        dirs = [p.resolve() for p in args.scan]
        roots = dirs
        label = ", ".join(str(p) for p in dirs)
    else:
        names = ("flax",) if args.quick else ("flax", "jax")
        dirs = [package_dir(name) for name in names]
        roots = [dirs[0].parent]  # site-packages
        label = ", ".join(f"{name} {p}" for name, p in zip(names, dirs, strict=True))
    print(f"discovery benchmark: Python {sys.version.split()[0]}, libcst {importlib.metadata.version('libcst')}")

    scan = measure_scan(dirs, roots, args.repeat)
    print(f"(a) whole-tree scan of {label}")
    print(
        f"    {scan.files} files, {scan.lines:,} lines, {scan.size / 1e6:.1f} MB; both sides read every file from disk"
    )
    print(
        f"    libcst.parse_module, every file:    {scan.parse_seconds:9.3f} s  ({scan.parse_failures} failed to parse)"
    )
    print(
        f"    discover_paths, fresh index:        {scan.discover_seconds:9.3f} s  "
        f"({scan.discovered} files looked at, the rest cannot matter; {scan.entrypoints} entrypoints)"
    )
    print(f"    scan ratio {scan.ratio:.2f} (target <= {SCAN_TARGET}) {verdict(scan.ratio, SCAN_TARGET)}")

    edit = measure_edit(model_file(args.lines), args.edits, args.parses)
    print(f"(b) one-line edit in a {edit.lines:,}-line model file ({edit.entrypoints} entrypoints); medians")
    print(f"    libcst.parse_module, whole file:    {edit.parse_seconds:9.4f} s  (median of {edit.parses})")
    print(
        f"    set_text + discover after an edit:  {edit.edit_seconds:9.4f} s  "
        f"(median of {edit.edits}; {edit.misses_per_edit:g} statement(s) summarized per edit)"
    )
    print(f"    edit ratio {edit.ratio:.3f} (target <= {EDIT_TARGET}) {verdict(edit.ratio, EDIT_TARGET)}")

    nb = measure_notebook(model_file(args.lines), args.runs)
    print(
        f"(c) the model file as a notebook ({nb.notebook_bytes / 1e6:.1f} MB with outputs, {nb.entrypoints} "
        f"entrypoints) and its code as a .py file, each discovered from disk with a fresh index; "
        f"CPU time, medians of {nb.runs} pairs"
    )
    print(f"    .py file:  {nb.file_seconds:9.4f} s for {nb.file_lines:,} lines of code")
    print(f"    notebook:  {nb.notebook_seconds:9.4f} s for {nb.notebook_lines:,} lines of code")
    print(f"    per-line ratio {nb.ratio:.2f} (target <= {NOTEBOOK_TARGET}) {verdict(nb.ratio, NOTEBOOK_TARGET)}")
    calls = measure_callsites(dirs[:1], roots, args.targets)
    print(f"(d) call sites of {calls.sampled} of the {calls.entrypoints} entrypoints of {dirs[0]}, index warm")
    print(f"    scan with a fresh index:            {calls.scan_seconds:9.3f} s")
    print(
        f"    CallSiteFinder.find, per target:    {calls.median:9.3f} s median, {calls.p90:.3f} s p90, "
        f"{max(calls.seconds, default=0):.3f} s max ({calls.sites} sites)"
    )
    judged = verdict(calls.ratio, CALLSITES_TARGET)
    print(f"    call-site ratio {calls.ratio:.3f} (target <= {CALLSITES_TARGET}) {judged}; the scan does none of it")

    if not args.scan:
        for name in ("jax", "flax"):
            if name in sys.modules:
                print(f"error: {name} was imported during the benchmark", file=sys.stderr)
                return 1
        print("jax and flax were located without being imported, and never imported")
    print(
        f"discovery scan ratio {scan.ratio:.2f} (target <= {SCAN_TARGET}); "
        f"edit ratio {edit.ratio:.2f} (target <= {EDIT_TARGET}); "
        f"notebook per-line ratio {nb.ratio:.2f} (target <= {NOTEBOOK_TARGET}); "
        f"call-site ratio {calls.ratio:.3f} (target <= {CALLSITES_TARGET})"
    )
    met = scan.ratio <= SCAN_TARGET and edit.ratio <= EDIT_TARGET and nb.ratio <= NOTEBOOK_TARGET
    return 0 if met and calls.ratio <= CALLSITES_TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
