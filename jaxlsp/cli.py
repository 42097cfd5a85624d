"""The ``jaxlsp`` command line: ``discover``, ``serve``, ``trace``, ``examples``, ``env``, ``diff`` and
``export`` over one engine."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from jaxlsp import __version__

if TYPE_CHECKING:
    from jaxlsp.capture.launch.early import EarlyWorker


def _discover(args: argparse.Namespace) -> int:
    from jaxlsp.discovery import Classifier, WorkspaceIndex, iter_python_files, may_matter

    missing = [p for p in args.paths if not Path(p).exists()]
    if missing:
        print(f"jaxlsp discover: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    roots = [Path.cwd(), *(Path(p) for p in args.paths if Path(p).is_dir())]
    index = WorkspaceIndex(roots)
    classifier = Classifier(index)
    items: list[dict[str, object]] = []
    drivers: list[dict[str, object]] = []
    for arg in args.paths:
        for file in iter_python_files(Path(arg)):
            text = index.text(file)
            if text is None or not may_matter(file, text):
                continue
            found = classifier.discover(file)
            cells = index.cells(file)
            items.extend(e.to_json(str(file), cells) for e in found.entrypoints)
            if args.drivers:
                drivers.extend(e.to_json(str(file), cells) for e in found.drivers)
    if args.json:
        json.dump(items + drivers, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    for item in items:
        print(f"{_where(item)}: {item['kind']:<8} {item['name']}")
    if drivers:
        print("\ndrivers (JAX use is incidental; no lens):")
        for item in drivers:
            print(f"{_where(item)}: {item['kind']:<8} {item['name']}")
    print(f"{len(items)} entrypoint(s)", file=sys.stderr)
    return 0


def _where(item: dict[str, object]) -> str:
    """``file.py:12``, or in a notebook ``nb.ipynb:cell 3:12`` (cell index as in --json, 0-based)."""
    cell = f"cell {item['cell']}:" if "cell" in item else ""
    return f"{item['path']}:{cell}{item['line']}"


def _serve(args: argparse.Namespace) -> int:
    from jaxlsp.server import serve

    if args.tcp:
        host, _, port = args.tcp.rpartition(":")
        if not host or not port.isdigit():
            print(f"jaxlsp serve: --tcp expects HOST:PORT, got {args.tcp!r}", file=sys.stderr)
            return 2
        serve(tcp=(host, int(port)))
    else:
        serve()
    return 0


def _trace(args: argparse.Namespace) -> int:
    # The worker starts first (its interpreter, own modules and jax load while the CLI imports,
    # reads the recipe and checks the environment); it gets its request only once those pass.
    from jaxlsp.capture.launch import early as early_worker

    path, sep, _ = args.target.rpartition("::")
    early = None
    if sep and path and not (args.repeat is not None and not args.time):
        early = early_worker.start(
            Path(path),
            early_worker.workspace_root_for(Path(path), Path.cwd()),
            python=args.python,
            device=args.device,
            recipe=Path(args.recipe) if args.recipe else None,
        )
    try:
        return _trace_with(args, early)
    finally:
        if early is not None:
            early.discard()


def _trace_with(args: argparse.Namespace, early: EarlyWorker | None) -> int:
    from jaxlsp.capture.engine import parse_target, workspace_root_for
    from jaxlsp.capture.launch.options import CaptureOptions
    from jaxlsp.capture.request import TimeOptions, TraceFailure, TraceRequest, ValuesOptions
    from jaxlsp.capture.service import trace_once
    from jaxlsp.graph import collector, export, io
    from jaxlsp.graph.report import render_summary, render_values
    from jaxlsp.worker.protocol import ErrorKind

    values = None
    timed = None
    if args.repeat is not None and not args.time:
        print("jaxlsp trace: --repeat goes with --time", file=sys.stderr)
        return 2
    if args.nodes and not (args.values or args.save_values):
        print("jaxlsp trace: --nodes goes with --values (or --save-values)", file=sys.stderr)
        return 2
    if args.dim and not (args.values or args.save_values or args.time):
        print("jaxlsp trace: --dim goes with --values (or --save-values) or --time", file=sys.stderr)
        return 2
    try:
        dims = _dims(args.dim or [])
    except ValueError as exc:
        print(f"jaxlsp trace: {exc}", file=sys.stderr)
        return 2
    if args.values or args.save_values:
        save = Path(args.save_values) if args.save_values else None
        values = ValuesOptions(save=save, nodes=list(args.nodes or []), dims=dims)
    if args.time:
        repeat = 5 if args.repeat is None else args.repeat
        if not 1 <= repeat <= 1000:
            print(f"jaxlsp trace: --repeat expects a number of runs from 1 to 1000, got {repeat}", file=sys.stderr)
            return 2
        timed = TimeOptions(repeat=repeat, dims=dims)
    try:
        file, name = parse_target(args.target)
        req = TraceRequest(
            file=file,
            name=name,
            workspace_root=workspace_root_for(file, Path.cwd()),
            profile=args.profile,
            recipe=Path(args.recipe) if args.recipe else None,
            python=args.python,
            device=args.device,
            devices=args.devices,
            topology=args.topology,
            limits=_limits(args),
            costs=bool(args.costs or args.xla_compare),
            xla_compare=bool(args.xla_compare),
            compiled=bool(args.compiled),
            values=values,
            time=timed,
            paths_from_recipe=True,
            replay=not args.no_replay,
            source=args.source,
            cwd=Path.cwd(),
            root=Path(args.root) if args.root else None,
        )
        options = (
            CaptureOptions(timeout=args.timeout, example_timeout=args.timeout) if args.timeout else CaptureOptions()
        )
        # What reads every node and value as a model object: the expanded file, the HTML view, the
        # analysis and compiled tables, the values' statistics. Without them the worker's compact
        # form is checked and written as it came, and the summary read from its columns (100,000
        # equations: the decode and the encode back were 20 s of a 125 s cold trace).
        whole = bool(
            args.expanded or args.html or args.costs or args.xla_compare or args.precision or args.compiled or values
        )
        outcome = trace_once(req, options, notify=lambda line: print(line, flush=True), early=early, direct=not whole)
    except TraceFailure as failure:
        print(f"jaxlsp trace: {failure.paragraph()}", file=sys.stderr)
        if failure.needs is not None:
            print("\nA profile to complete and add to jaxlsp.toml:\n", file=sys.stderr)
            print(failure.needs.to_json().get("toml", ""), file=sys.stderr)
        if failure.examples:
            print("Or learn the inputs from a run of one of these (jaxlsp trace ... --from EXAMPLE):", file=sys.stderr)
            for choice in failure.examples:
                print(f"  {choice['example']}  ({choice['kind']}, {choice['path']})", file=sys.stderr)
        if failure.logs:
            print(f"\n--- worker output (tail) ---\n{failure.logs}", file=sys.stderr)
        return {ErrorKind.NEEDS_INPUT: 3, ErrorKind.REFUSED: 2}.get(failure.kind, 1)
    graph = outcome.graph  # with outcome.compact: the small parts only (no nodes, no values)
    made = outcome.compact
    # The file's JSON is a fresh tree of objects as large as the graph, all surviving until it is
    # written: with the collector on, its passes walked them again and again (10k equations:
    # io.write 1.2-1.5 s -> 0.65 s paused, on this machine under load).
    with collector.paused():
        if args.output and made is not None:
            io.write_text(made.text(), args.output)
        elif args.output:
            io.write(graph, args.output, compact=not args.expanded)
        if args.html:
            Path(args.html).write_text(export.to_html(graph), encoding="utf-8")
    print(render_summary(graph, None if made is None else made.packed.rows()))
    line = outcome.inputs_line()
    if line:
        print(line)
    if args.costs or args.xla_compare or args.precision:
        from jaxlsp.graph.analysis import render_analysis

        print()
        print(render_analysis(graph, bool(args.costs or args.xla_compare), bool(args.precision)))
    if args.compiled:
        from jaxlsp.graph.compiled import render as render_compiled

        print()
        print(render_compiled(graph))
    if graph.execution is not None:
        print()
        print(render_values(graph))
    if graph.time is not None:
        from jaxlsp.graph.timing import render as render_time

        print()
        print(render_time(graph.time))
    capture = outcome.capture
    timings = capture.result.get("timings", {})
    phases = ", ".join(f"{k} {v:.2f}s" for k, v in timings.items())
    print(f"\ntraced in {capture.wall:.2f}s ({capture.via}; {phases}) with {capture.python} ({outcome.route})")
    replayed = capture.result.get("replayed")
    if replayed:
        print(f"{replayed:,} repeated module calls replayed, not run again (--no-replay traces every call)")
    for label, path in (("graph", args.output), ("html", args.html)):
        if path:
            print(f"wrote {label}: {path}")
    saved = capture.result.get("saved")
    if saved:
        missing = (
            f" ({len(saved['missing'])} not computed: {', '.join(saved['missing'][:5])})"
            if saved.get("missing")
            else ""
        )
        widened = {key: tuple(pair) for key, pair in (saved.get("widened") or {}).items()}
        for was, stored in sorted(set(widened.values())):  # bfloat16 and the like: no NumPy dtype
            keys = [key for key, pair in widened.items() if pair == (was, stored)]
            missing += f" ({was} stored as {stored}: {', '.join(keys[:5])})"
        print(f"wrote values: {args.save_values} ({len(saved.get('keys', []))} arrays){missing}")
    if args.save:
        return _save(outcome)
    if args.compiled and (graph.compiled is None or graph.compiled.get("error")):
        # the graph was made (and written), the compiled program was not: not a success
        why = (graph.compiled or {}).get("error", "this capture path does not compile (a run of an example)")
        print(f"jaxlsp trace: compiling {args.target} failed: {why}", file=sys.stderr)
        return 1
    return 0


def _save(outcome: object) -> int:
    """``--save``: the profile the inputs came from, written into jaxlsp.toml (format kept, atomic)."""
    from jaxlsp.capture.engine import TraceOutcome
    from jaxlsp.recipes.save import SaveError, save_profile

    assert isinstance(outcome, TraceOutcome)
    learned = outcome.learned()
    if learned is None or outcome.origin is None:
        print("nothing to save: the inputs came from a jaxlsp.toml profile already")
        return 0
    base = outcome.origin.base or outcome.origin.root
    try:
        saved = save_profile(learned, {}, base=base)
    except SaveError as exc:
        print(f"jaxlsp trace: not saved: {exc}", file=sys.stderr)
        return 1
    print(f"saved profile {saved.profile} in {saved.path}{' (new file)' if saved.created else ''}")
    return 0


def _examples(args: argparse.Namespace) -> int:
    from jaxlsp.capture.engine import TraceFailure, parse_target, workspace_root_for
    from jaxlsp.capture.inputs import plan
    from jaxlsp.discovery import Classifier, WorkspaceIndex
    from jaxlsp.discovery.callsites.finder import CallSiteFinder
    from jaxlsp.discovery.callsites.sites import relative
    from jaxlsp.discovery.roots import project_root
    from jaxlsp.recipes import NeedsInput, RecipeError, render_profile
    from jaxlsp.recipes.propose import propose_site

    try:
        file, name = parse_target(args.target)
    except TraceFailure as failure:
        print(f"jaxlsp examples: {failure.message}", file=sys.stderr)
        return 2
    if not file.is_file():
        print(f"jaxlsp examples: no such file: {file}", file=sys.stderr)
        return 2
    root = Path(args.root).resolve() if args.root else project_root(file, workspace_root_for(file, Path.cwd()))
    index = WorkspaceIndex([root])
    classifier = Classifier(index)
    found = classifier.discover(file.resolve())
    entry = next((e for e in (*found.entrypoints, *found.drivers) if e.name == name), None)
    if entry is None and file.suffix == ".py":  # a method (``Term.vf``) is a target too
        from jaxlsp.discovery.methods import method_entry

        entry = method_entry(file.resolve(), name, file.read_text(encoding="utf-8", errors="replace"))
    if entry is None:
        print(f"jaxlsp examples: {name} is not a JAX function, module class or method in {file}", file=sys.stderr)
        return 2
    sites = CallSiteFinder(index, root, classifier).find(entry)
    items: list[dict[str, object]] = []
    for site in sites:
        item = site.to_json(root)
        if site.kind == "script" and site.example is not None:  # as auto runs it: with its documented arguments
            item["example"] = plan.choices([site], root)[0]["example"]
        if site.static:
            try:
                made = propose_site(entry, site, where=site.where(root), base=root)
                table = made.proposal if isinstance(made, NeedsInput) else made.table
                missing = made.missing if isinstance(made, NeedsInput) else []
                item["profile"] = render_profile(name.replace(".", "_"), table, missing=missing)
            except RecipeError as exc:
                item["refused"] = str(exc)
        items.append(item)
    if args.json:
        json.dump(items, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    if not items:
        print(f"no call site of {name} under {relative(root, Path.cwd())}")  # as graphs name paths
        return 0
    for n, item in enumerate(items, 1):
        state = "complete" if item["complete"] else ("run to learn" if not item["static"] else "partial")
        example = f"  [{item['example']}]" if item["example"] else ""
        via = f"  ({item['via']})" if item.get("via") else ""
        print(f"{n}. {_where(item)} ({item['kind']}) {state}{example}{via}")
        for missing in item["missing"]:  # type: ignore[attr-defined]
            print(f"     missing {missing['where']}: {missing['why']}")
        if item.get("refused"):
            print(f"     refused: {item['refused']}")
        if item.get("profile") and item["complete"]:
            print("     " + str(item["profile"]).rstrip().replace("\n", "\n     "))
    return 0


def _dims(items: list[str]) -> dict[str, int]:
    """``--dim NAME=SIZE`` items as a mapping; ValueError naming a malformed one."""
    out: dict[str, int] = {}
    for item in items:
        name, sep, size = item.partition("=")
        if not sep or not name.isidentifier() or not size.isdigit() or int(size) <= 0:
            raise ValueError(f"--dim expects NAME=SIZE with a positive size, got {item!r}")
        out[name] = int(size)
    return out


def _limits(args: argparse.Namespace) -> dict[str, int]:
    given = {"equations": args.max_equations, "values": args.max_values, "bytes": args.max_bytes}
    return {k: v for k, v in given.items() if v}


def _learn(args: argparse.Namespace) -> int:
    """``jaxlsp learn [PATH...]``: run the workspace's tests and documented scripts once each and
    keep the call signatures of every target they reach (capture/inputs/learning.py)."""
    import json

    from jaxlsp.capture.engine import workspace_root_for
    from jaxlsp.capture.environment.interpreters import InterpreterError, select_interpreter
    from jaxlsp.capture.inputs import learning
    from jaxlsp.capture.inputs.examplecache import ExampleCache
    from jaxlsp.capture.inputs.importers import ImportGraph
    from jaxlsp.capture.inputs.signatures import SignatureStore
    from jaxlsp.discovery.roots import project_root

    paths = [Path(p) for p in args.paths] or [Path.cwd()]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        print(f"jaxlsp learn: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    first = paths[0].resolve()
    workspace = workspace_root_for(first if first.is_file() else first / "_", Path.cwd())
    anchor = first if first.is_file() else first / "_"
    root = Path(args.root).resolve() if args.root else project_root(anchor, workspace)
    try:
        python = select_interpreter(workspace_root=workspace, request=args.python).python
    except InterpreterError as exc:
        print(f"jaxlsp learn: {exc}", file=sys.stderr)
        return 2
    graph = ImportGraph(workspace)
    examples = learning.find_examples(paths, root, graph=graph)
    if not examples:
        where = ", ".join(map(str, paths))
        what = "imports" if all(p.is_file() for p in paths) else "under"
        print(f"jaxlsp learn: no test file or documented script {what} {where}", file=sys.stderr)
        return 1

    def progress(done: int, total: int, learned: int, example: learning.ExampleOutcome) -> None:
        took = f"{example.seconds:.1f} s"
        print(f"[{done}/{total}] {example.text}: {example.outcome}, {example.learned} learned ({took})")
        if example.outcome not in ("finished", "stopped", "cached"):
            print(f"    {example.message}")
        print(f"      {learned} targets learned so far", flush=True)

    timeout = args.timeout  # None: the default, which grows to the budget's share (learning.example_limit)
    if not args.json:
        print(f"{len(examples)} examples: {', '.join(str(e['text']) for e in examples)}", flush=True)
    report = learning.learn(
        root, examples, python, example_timeout=timeout, budget=args.budget or learning.BUDGET,
        idle=args.idle or learning.IDLE, store=SignatureStore(workspace), progress=None if args.json else progress,
        cache=None if args.again else ExampleCache(workspace), graph=graph, jobs=args.jobs,
    )  # fmt: skip
    if args.json:
        print(json.dumps(report.json(), indent=2))
    else:
        summary = report.json()
        print(
            f"learned {len(report.targets)} targets from {len(report.examples)} examples in {report.seconds:.1f} s"
            f" ({summary['ran']} ran, {summary['cached']} cached: nothing they load changed)"
        )
        for target in report.targets:
            print(f"  {target}")
        if report.stopped:
            print(f"stopped early: {report.stopped}")
    return 0 if report.targets else 1


def _env(args: argparse.Namespace) -> int:
    from jaxlsp.capture.environment import userpath
    from jaxlsp.capture.environment.compatibility import CACHE
    from jaxlsp.capture.environment.install import plan_install
    from jaxlsp.capture.environment.interpreters import (
        OWN,
        InterpreterError,
        explain,
        project_env_hint,
        select_interpreter,
    )

    userpath.add_workspace(Path.cwd())  # the workspace it checks for: its PYTHONPATH entries stay off
    try:
        selection = select_interpreter(workspace_root=Path.cwd(), request=args.python)
    except InterpreterError as exc:
        print(f"jaxlsp env: {exc}", file=sys.stderr)
        return 2
    report = CACHE.check(selection, args.kind, args.device, refresh=True)  # asked for: a fresh look
    data = report.to_json()
    data["why"] = explain(selection, Path.cwd())
    found = ("jax", "jaxlib", *report.needs) if report.needs else ("jax", "jaxlib", "flax", "equinox")
    data["sources"] = {p: report.probe.source(p) for p in found if report.probe.packages.get(p)}
    # jaxlsp's own interpreter without JAX (a pipx or uv tool install): the project gets its own
    # environment rather than JAX installed into the tool's.
    own_lacks_jax = selection.route == OWN and not report.probe.packages.get("jax")
    if own_lacks_jax:
        data["hint"] = project_env_hint(Path.cwd())
    pod = None
    if args.topology:
        from jaxlsp.capture.environment.podcheck import check_pod

        pod = check_pod(selection.python, args.topology)
        data["topology"] = pod.to_json()
    if report.requirements:
        plan = plan_install(selection, report.requirements, has_pip=bool(report.probe.packages.get("pip")))
        data["install"] = plan.text
    if args.json:
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(report.message())
        print(f"why this interpreter: {data['why']}")
        if data["sources"]:
            print(f"where: {report.probe.sourced(found)}")
        for problem in report.problems:
            print(f"- {problem.severity}: {problem.message} (fix: {problem.fix})")
        if own_lacks_jax:
            print(f"\nto trace this project, {data['hint']}")
        elif "install" in data:
            print(f"\nto install what is missing, run:\n  {data['install']}")
        if pod is not None:
            print(pod.message())
    return 0 if report.ok and (pod is None or pod.ok) else 1


def _export(args: argparse.Namespace) -> int:
    from jaxlsp.graph import export, io

    try:
        graph = io.read(args.graph)
    except (OSError, ValueError) as exc:
        print(f"jaxlsp export: cannot read {args.graph}: {exc}", file=sys.stderr)
        return 2
    if args.format in ("json", "compact"):
        text = io.dumps(graph, compact=args.format == "compact")
    elif args.format == "dot":
        text = export.to_dot(graph)
    else:
        text = export.to_html(graph)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


def _diff(args: argparse.Namespace) -> int:
    from jaxlsp.graph import io
    from jaxlsp.graph.diff import diff, render_diff

    graphs = []
    for path in (args.before, args.after):
        try:
            graphs.append(io.read(path))
        except (OSError, ValueError) as exc:
            print(f"jaxlsp diff: cannot read {path}: {exc}", file=sys.stderr)
            return 2
    found = diff(graphs[0], graphs[1])
    if args.html:
        from jaxlsp.graph.export import to_html

        Path(args.html).write_text(to_html(graphs[1], base=graphs[0]), encoding="utf-8")
    if args.json:
        json.dump(found.json(), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        print(render_diff(found))
    return 0 if found.same else 1


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="jaxlsp", description="See what a JAX program really is.")
    p.add_argument("--version", action="version", version=f"jaxlsp {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("discover", help="list JAX functions and Flax / Equinox modules, without importing anything")
    d.add_argument("paths", nargs="+", metavar="PATH", help="files or folders (searched recursively)")
    d.add_argument("--json", action="store_true", help="print a JSON array")
    d.add_argument("--drivers", action="store_true", help="also list driver functions (incidental JAX use)")
    d.set_defaults(func=_discover)

    s = sub.add_parser("serve", help="run the language server (stdio by default)")
    s.add_argument("--stdio", action="store_true", help="talk over stdin/stdout (the default)")
    s.add_argument("--tcp", metavar="HOST:PORT", help="listen on a TCP address instead")
    s.set_defaults(func=_serve)

    t = sub.add_parser("trace", help="trace FILE::NAME into a graph (runs the target's code in a worker)")
    t.add_argument("target", metavar="FILE::NAME", help="the file and the function or class (Class.method too)")
    t.add_argument("--profile", help="the jaxlsp.toml profile to use (default: the one for the target)")
    t.add_argument("--recipe", help="the jaxlsp.toml to use (default: the nearest at or above the file)")
    t.add_argument(
        "--python", help="the interpreter to capture in (default: recipe, .venv, $CONDA_PREFIX, $VIRTUAL_ENV, this one)"
    )
    t.add_argument("--device", help="cpu, cuda:N, tpu or tpu:N (overrides the profile)")
    t.add_argument(
        "--topology",
        metavar="NAME",
        help="compile for this TPU pod (v5e:16x16; needs libtpu in the capture interpreter) instead of the "
        "profile's topology; the profile's mesh must cover its devices",
    )
    t.add_argument(
        "--devices",
        type=int,
        metavar="N",
        help="trace with N virtual CPU devices, for pmap, shard_map and meshes (overrides the profile; CPU only)",
    )
    t.add_argument(
        "--timeout", type=float, help="seconds before the worker is killed (default 60; 300 for a run of an example)"
    )
    t.add_argument(
        "--no-replay",
        action="store_true",
        help="trace every Linen module call; by default a call that repeats an earlier one (a model's N "
        "equal layers) replays its equations",
    )
    t.add_argument("--max-equations", type=int, metavar="N", help="refuse graphs with more equations (500000)")
    t.add_argument("--max-values", type=int, metavar="N", help="refuse graphs with more values (1000000)")
    t.add_argument("--max-bytes", type=int, metavar="N", help="refuse graphs whose compact JSON is larger (268435456)")
    t.add_argument(
        "--costs",
        action="store_true",
        help="measure XLA's FLOPs, bytes and transcendentals of every equation; print them per module, and memory",
    )
    t.add_argument(
        "--xla-compare",
        action="store_true",
        help="with --costs: also XLA's whole-program cost and memory analysis, beside ours (slower: compiles)",
    )
    t.add_argument(
        "--compiled",
        action="store_true",
        help="also compile for the profile's devices: the collectives XLA inserted (by line and module), fusions, "
        "per-device shapes, costs and peak memory",
    )
    t.add_argument(
        "--precision", action="store_true", help="print dtype conversions and matmul precision settings per module"
    )
    t.add_argument(
        "-o",
        "--output",
        metavar="GRAPH.json",
        help="write the graph here, in the compact form (version 2, docs/graph-format.md; "
        "jaxlsp export --format json expands it)",
    )
    form = t.add_mutually_exclusive_group()
    form.add_argument(
        "--expanded", action="store_true", help="write the -o graph in the expanded form (version 1) instead"
    )
    # The default since the compact form became the file's; kept so that scripts passing it still run.
    form.add_argument("--compact", action="store_true", help=argparse.SUPPRESS)
    t.add_argument("--html", metavar="GRAPH.html", help="write an offline HTML view here")
    t.add_argument(
        "--values",
        action="store_true",
        help="also run the graph on the profile's inputs: statistics on every value, the first NaN's line, "
        "a replay check and (gradient profiles) gradient norms",
    )
    t.add_argument(
        "--time",
        action="store_true",
        help="also compile the program and run it on the profile's inputs under the profiler: the step's "
        "measured time, per module and source line (implies the costs, which split a fusion's time)",
    )
    t.add_argument(
        "--repeat", type=int, metavar="K", help="with --time: the runs profiled after one warm-up (default 5)"
    )
    t.add_argument(
        "--save-values",
        metavar="OUT.npz",
        help="with --values: write values to this .npz, by label (the graph's inputs and outputs, or --nodes)",
    )
    t.add_argument(
        "--nodes",
        nargs="+",
        metavar="ID",
        help="what --save-values writes: node ids (their outputs), value ids or port labels",
    )
    t.add_argument(
        "--dim",
        action="append",
        metavar="NAME=SIZE",
        help="with --values or --time: a size for a symbolic dimension of the profile (repeatable)",
    )
    t.add_argument(
        "--from",
        dest="source",
        metavar="auto|PATH[::TEST]",
        help="where the inputs come from: auto (the default without a profile: a call site in the workspace, "
        "else a run of an example) or an example to run up to the target's first call (a test, or a script "
        "with its arguments in one quoted string)",
    )
    t.add_argument("--save", action="store_true", help="save the profile the inputs came from into jaxlsp.toml")
    t.add_argument("--root", help="the project root examples run from (default: the nearest folder with "
                   "jaxlsp.toml, pyproject.toml, setup.py, setup.cfg or .git)")  # fmt: skip
    t.set_defaults(func=_trace)

    x = sub.add_parser("examples", help="list the call sites of FILE::NAME in the workspace, ranked (nothing runs)")
    x.add_argument("target", metavar="FILE::NAME", help="the file and the function or class")
    x.add_argument("--json", action="store_true", help="print a JSON array")
    x.add_argument("--root", help="the project root to search (default: as for trace --from)")
    x.set_defaults(func=_examples)

    n = sub.add_parser(
        "learn", help="run the workspace's tests and documented scripts once; keep every reached target's inputs"
    )
    n.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="folders (their examples) or files (the examples whose imports reach them); default: the current folder",
    )
    n.add_argument("--json", action="store_true", help="print the summary as JSON")
    n.add_argument("--python", help="the interpreter to run them in (default: as jaxlsp trace chooses)")
    n.add_argument("--root", help="the project root they run from (default: found from PATH)")
    n.add_argument("--timeout", type=float, help="seconds one example may run (default 120, or its budget share)")
    n.add_argument("--budget", type=float, help="seconds for the whole run (default 900)")
    n.add_argument("--idle", type=float, help="seconds without a new signature that stop an example (default 20)")
    n.add_argument("--jobs", type=int, help="examples run side by side (default: the machine's cores)")
    n.add_argument("--again", action="store_true", help="run every example, even one whose sources did not change")
    n.set_defaults(func=_learn)

    v = sub.add_parser("env", help="check the capture environment (interpreter, jax versions, backends)")
    v.add_argument("--python", help="the interpreter to check (default: .venv, $CONDA_PREFIX, $VIRTUAL_ENV, this one)")
    v.add_argument("--device", default="cpu", help="the device traces will use: cpu, cuda:N, tpu or tpu:N")
    v.add_argument("--kind", choices=["function", "linen", "nnx", "equinox"], help="the target kind (flax, equinox)")
    v.add_argument("--topology", metavar="NAME", help="also check that the interpreter can compile for this TPU pod")
    v.add_argument("--json", action="store_true", help="print the report as JSON")
    v.set_defaults(func=_env)

    f = sub.add_parser("diff", help="what changed between two saved graphs (exit 0: the same, 1: different)")
    f.add_argument("before", metavar="A.json", help="the older graph")
    f.add_argument("after", metavar="B.json", help="the newer graph")
    f.add_argument("--json", action="store_true", help="print the changes as JSON")
    f.add_argument("--html", metavar="DIFF.html", help="write B's offline viewer page with the changes marked")
    f.set_defaults(func=_diff)

    e = sub.add_parser("export", help="re-render a saved graph")
    e.add_argument("graph")
    e.add_argument("--format", choices=["json", "compact", "dot", "html"], default="json")
    e.add_argument("-o", "--output")
    e.set_defaults(func=_export)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
