"""The ``jaxlsp`` command line: ``discover``, ``serve``, ``trace`` and ``export`` over one engine."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from jaxlsp import __version__


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
            items.extend(e.to_json(str(file)) for e in found.entrypoints)
            if args.drivers:
                drivers.extend(e.to_json(str(file)) for e in found.drivers)
    if args.json:
        json.dump(items + drivers, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    for item in items:
        print(f"{item['path']}:{item['line']}: {item['kind']:<8} {item['name']}")
    if drivers:
        print("\ndrivers (JAX use is incidental; no lens):")
        for item in drivers:
            print(f"{item['path']}:{item['line']}: {item['kind']:<8} {item['name']}")
    print(f"{len(items)} entrypoint(s)", file=sys.stderr)
    return 0


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


def _not_yet(args: argparse.Namespace) -> int:
    print(
        f"jaxlsp {args.command}: tracing is not available yet in jaxlsp {__version__}: the capture "
        "engine has not landed. `jaxlsp discover` works today.",
        file=sys.stderr,
    )
    return 3


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

    t = sub.add_parser("trace", help="trace FILE::NAME into a graph (not available yet)")
    t.add_argument("target", metavar="FILE::NAME")
    t.add_argument("--profile")
    t.add_argument("--recipe")
    t.add_argument("--python")
    t.add_argument("--device")
    t.add_argument("--timeout", type=float)
    t.add_argument("-o", "--output")
    t.add_argument("--html")
    t.set_defaults(func=_not_yet)

    e = sub.add_parser("export", help="re-render a saved graph (not available yet)")
    e.add_argument("graph")
    e.add_argument("--format", choices=["json", "dot", "html"], default="json")
    e.add_argument("-o", "--output")
    e.set_defaults(func=_not_yet)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
