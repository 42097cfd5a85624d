"""Running an example (a pytest test, a script, a module) with the target's file instrumented.

:class:`Instrument` puts the first-call hook (``__jaxlsp_first_call__``) first in the watched
function's body; :class:`TargetFinder` gives the target's file a loader that compiles it so, under
any module name; :func:`run_example` runs the example as its user would (pytest from the root,
``python script.py ARGS``, an import) and says how it ended when the hook never stopped it. The
hook itself (worker/examples/firstcall.py) raises :class:`Delivered` to unwind an in-process run.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import importlib
import importlib.machinery
import importlib.util
import os
import sys
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from jaxlsp.worker.core.failures import CaptureError, Workspace
from jaxlsp.worker.examples import signatures
from jaxlsp.worker.protocol import ExampleSpec

if TYPE_CHECKING:
    import pytest

HOOK_NAME = "__jaxlsp_first_call__"

#: A parsed file's other rewriting before it is compiled (pytest's assertion rewriting):
#: ``rewrite(tree, source, path)`` changes ``tree`` in place.
Rewrite = Callable[[ast.Module, bytes, str], None]


class Watched(Protocol):
    """What the runners need of the hook: the target's file, and how to compile it instrumented."""

    path: str
    workspace: Workspace

    def compile(self, source: bytes, path: str, rewrite: Rewrite | None = None) -> types.CodeType: ...


class Delivered(BaseException):
    """Unwinds an in-process run once the result is known (a worker process exits instead)."""


class Instrument:
    """Puts ``__jaxlsp_first_call__("call")`` first in the watched function's body (after its
    docstring), and ``("init")`` first in ``__init__`` of a watched class."""

    def __init__(self, owner: list[str], method: str | None) -> None:
        self.owner = owner
        self.method = method

    def apply(self, tree: ast.Module) -> bool:
        scope: list[ast.stmt] = tree.body
        node: ast.stmt | None = None
        for i, part in enumerate(self.owner):
            node = _find_definition(scope, part)
            if node is None:
                return False
            if i < len(self.owner) - 1:
                if not isinstance(node, ast.ClassDef):
                    return False
                scope = node.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return self.method is None and _insert(node, "call")
        if not isinstance(node, ast.ClassDef):
            return False
        found = False
        own = False
        wanted = self.method or "__call__"
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == wanted:
                own = True
                found = _insert(stmt, "call") or found
            elif isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
                _insert(stmt, "init")
            elif isinstance(stmt, ast.Assign | ast.AnnAssign) and wanted in _assigned_names(stmt):
                # ``__call__ = forward`` is its own, which the hook cannot enter; an annotation alone
                # (equinox's ``__call__: AbstractClassVar[Callable]``) defines nothing
                own = own or isinstance(stmt, ast.Assign) or stmt.value is not None
        if not own and node.bases:
            _inherit(node, wanted)
            found = True
        return found


def _find_definition(body: list[ast.stmt], name: str) -> ast.stmt | None:
    found: ast.stmt | None = None
    for stmt in body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and stmt.name == name:
            found = stmt  # the last definition wins, as at run time
        elif isinstance(stmt, ast.If | ast.Try):
            for inner in (stmt.body, getattr(stmt, "orelse", []), getattr(stmt, "finalbody", [])):
                found = _find_definition(inner, name) or found
    return found


def _inherit(cls: ast.ClassDef, method: str) -> None:
    """A class that inherits the watched method (equinox's ``Conv2d(Conv)``, a Linen module
    deriving another with new defaults) gets one that calls the hook and then its base's, only
    when a base has it (``HOOK.inherits(bases, name)`` at class creation), so that a class with
    none stays uncallable."""
    methods = tuple(
        s.name
        for s in cls.body
        if isinstance(s, ast.FunctionDef) and not (s.name.startswith("__") and s.name != method)
    )
    source = (
        f"if {HOOK_NAME}.inherits(({', '.join(ast.unparse(b) for b in cls.bases)},), {method!r}, {methods!r}):\n"
        f"    def {method}(self, *args, **kwargs):\n"
        f"        {HOOK_NAME}('call')\n"
        f"        return super().{method}(*args, **kwargs)\n"
    )
    added = ast.parse(source).body
    anchor = cls.body[-1]
    for stmt in added:
        for node in ast.walk(stmt):
            ast.copy_location(node, anchor)
    cls.body.extend(added)


def _assigned_names(stmt: ast.Assign | ast.AnnAssign) -> set[str]:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    return {t.id for t in targets if isinstance(t, ast.Name)}


def inherits(bases: tuple[object, ...], method: str) -> bool:
    """Whether a class with ``bases`` gets ``method`` from one of them (``object`` aside)."""
    for base in bases:
        for klass in getattr(base, "__mro__", ()):
            if klass is not object and method in vars(klass):
                return True
    return False


def _insert(fn: ast.FunctionDef | ast.AsyncFunctionDef, what: str) -> bool:
    if isinstance(fn, ast.AsyncFunctionDef):
        return False
    body = fn.body
    docstring = body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant)
    at = 1 if docstring else 0
    anchor = body[min(at, len(body) - 1)]
    call = ast.Expr(ast.Call(ast.Name(HOOK_NAME, ast.Load()), [ast.Constant(what)], []))
    ast.copy_location(call, anchor)
    ast.fix_missing_locations(call)
    for node in ast.walk(call):
        ast.copy_location(node, anchor)
    body.insert(at, call)
    return True


class _HookedLoader(importlib.machinery.SourceFileLoader):
    """Loads the target's file compiled with the hooks, never from a bytecode cache."""

    hook: Watched
    rewrite: Rewrite | None = None  # pytest's assertion rewriting, for a target defined in a test file

    def get_code(self, fullname: str) -> types.CodeType:
        return self.hook.compile(self.get_data(self.path), self.path, self.rewrite)


def _assertion_rewriter(loader: object) -> Rewrite | None:
    """For pytest's assertion-rewriting loader (the one a test file is imported with), a function
    that rewrites a parsed file's asserts as that loader would; else None. A target defined inside
    a test file (a helper vector field, a small module) is loaded by that loader: before, the
    finder gave up on it, the test file ran uninstrumented and the run never saw the call."""
    kind = type(loader)
    if kind.__name__ != "AssertionRewritingHook" or not kind.__module__.startswith("_pytest."):
        return None
    try:
        from _pytest.assertion.rewrite import rewrite_asserts
    except ImportError:
        return None
    config = getattr(loader, "config", None)

    def rewrite(tree: ast.Module, source: bytes, path: str) -> None:
        rewrite_asserts(tree, source, path, config)

    return rewrite


class TargetFinder:
    """Finds the target's file under any module name and gives it the hooked loader."""

    def __init__(self, hook: Watched) -> None:
        self.hook = hook
        stem = os.path.splitext(os.path.basename(hook.path))[0]
        self.last = os.path.basename(os.path.dirname(hook.path)) if stem == "__init__" else stem

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.rpartition(".")[2] != self.last:
            return None  # only a module of that name can be the target's file
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is None:
                continue
            origin = spec.origin
            # a source file, also when another import hook loads it (jaxtyping's loader is a
            # SourceFileLoader that rewrites the file: the target's file is compiled ours alone)
            plain = isinstance(spec.loader, importlib.machinery.SourceFileLoader)
            rewrite = None if plain else _assertion_rewriter(spec.loader)
            if origin and (plain or rewrite is not None) and os.path.realpath(origin) == self.hook.path:
                loader = _HookedLoader(fullname, origin)
                loader.hook = self.hook
                loader.rewrite = rewrite
                spec.loader = loader
                return spec
            return None
        return None


@contextlib.contextmanager
def target_code(hook: Watched) -> Iterator[None]:
    """The target's file compiled with the hooks by any loader of source files that loads it: an
    import hook put in front of :class:`TargetFinder` after it (jaxtyping's ``install_import_hook``
    around a ``conftest.py``'s ``import pkg``, GPJax's tests) gave it a loader of its own, and
    the run never saw the call ("... was never imported by the run")."""
    original = importlib.machinery.SourceFileLoader.get_code

    def get_code(loader: importlib.machinery.SourceFileLoader, fullname: str) -> types.CodeType | None:
        path = loader.get_filename(fullname)
        if os.path.realpath(path) == hook.path:
            return hook.compile(loader.get_data(path), path)  # ours alone, as TargetFinder's loader
        return original(loader, fullname)

    importlib.machinery.SourceFileLoader.get_code = get_code  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        importlib.machinery.SourceFileLoader.get_code = original  # type: ignore[method-assign]


def run_example(
    example: ExampleSpec, hook: Watched, root: str, first_cases_first: bool = False
) -> tuple[str, BaseException | None, str]:
    """Run ``example`` as its user would; ``first_cases_first``: a test file runs one case of each
    test function before the second case of any (a learning run, see :class:`_FirstCasesFirst`)."""
    kind = example.get("kind")
    path = os.path.realpath(str(example["path"]))
    if kind == "test":
        return _run_pytest(example, hook, root, first_cases_first)
    if path.endswith(".ipynb"):  # "Run all", as Jupyter would
        return _exec_notebook(path, hook)
    if kind == "script":
        sys.path[:] = [p for p in sys.path if p not in ("", root)]
        sys.argv[:] = [path, *[str(a) for a in example.get("argv", [])]]
        return _exec_main(path, hook, root)
    from jaxlsp.worker.loading.loading import module_name_for

    name, package_root = module_name_for(path)
    for folder in (root, package_root):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    try:
        importlib.import_module(name)
    except Delivered:
        raise
    except SystemExit as exc:
        return "exited", None, f" (it exited with status {exc.code})"
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        return "failed", exc, ""
    return "finished", None, ""


def _package_run(path: str, source: bytes) -> tuple[str, str] | None:
    """The package a script lies in (its folder holds ``__init__.py``) and that package's root,
    when the script is to run as ``python -m pkg.script``: ``pkg/train.py`` importing ``pkg.*``
    or ``from . import``, and one beside a local ``optax.py`` that must not shadow the installed
    optax. None (``python path``) outside a package, and for a script that imports by its bare
    name a module found only beside it (``import utils`` with ``pkg/utils.py``, no installed
    ``utils``): it was written to run as a plain file."""
    from jaxlsp.worker.loading.loading import module_name_for

    folder = os.path.dirname(path)
    if not os.path.isfile(os.path.join(folder, "__init__.py")):
        return None
    name, package_root = module_name_for(path)
    package = name.rpartition(".")[0]
    if not package:
        return None
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError:
        return None
    for top in _bare_imports(tree):
        beside = os.path.isfile(os.path.join(folder, f"{top}.py")) or os.path.isfile(
            os.path.join(folder, top, "__init__.py")
        )
        if beside and not _installed(top, folder):
            return None
    return package, package_root


def _bare_imports(tree: ast.Module) -> set[str]:
    """The top-level names a module imports absolutely (``import a.b``, ``from a import b``)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def _installed(top: str, beside: str) -> bool:
    """Whether module ``top`` is found somewhere other than the folder ``beside``."""
    if top in sys.builtin_module_names:
        return True
    here = os.path.realpath(beside)
    elsewhere = [p for p in sys.path if p and os.path.realpath(p) != here]
    try:
        return importlib.machinery.PathFinder.find_spec(top, elsewhere) is not None
    except (ImportError, ValueError):
        return False


def _exec_main(path: str, hook: Watched, root: str) -> tuple[str, BaseException | None, str]:
    """``python path`` (or ``python -m pkg.script``: :func:`_package_run`) in this process: a
    fresh ``__main__``, instrumented when it is the target's file. The workspace root (and its
    ``src`` folder) go last on ``sys.path``, as an editable install of the repository's own
    package puts them: a script that imports that package (``from mylib import model`` in
    ``tools/run.py``) imports it, and an installed package still wins."""
    with open(path, "rb") as f:
        source = f.read()
    module = types.ModuleType("__main__")
    module.__file__ = path
    package = _package_run(path, source)
    if package is None:
        sys.path.insert(0, os.path.dirname(path))  # python path: the script's folder first
    else:
        module.__package__ = package[0]
        # last: an installed package named as a source folder there (jax's own checkout) still wins
        if package[1] not in sys.path:
            sys.path.append(package[1])
    for folder in (root, os.path.join(root, "src")):
        if root and os.path.isdir(folder) and folder not in sys.path:
            sys.path.append(folder)
    module.__dict__["__builtins__"] = builtins
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    try:
        own = path == hook.path  # the script defines the target itself
        code = hook.compile(source, path) if own else compile(source, path, "exec", dont_inherit=True)
        exec(code, module.__dict__)
    except Delivered:
        raise
    except SystemExit as exc:
        code_ = exc.code
        if code_ in (None, 0):
            return "finished", None, ""
        return "exited", None, f" (it exited with status {code_}: {_last_stderr_hint()})"
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        return "failed", exc, ""
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved
    return "finished", None, ""


def _exec_notebook(path: str, hook: Watched) -> tuple[str, BaseException | None, str]:
    """A notebook run as Jupyter's "Run all" runs it: its code cells in order in one fresh
    ``__main__``, from the notebook's folder (Jupyter's current folder, first on ``sys.path``),
    IPython lines neutralised (jaxlsp.notebook), the target's cells compiled with the hook. A cell
    that does not parse is skipped; the first cell that raises ends the run."""
    from jaxlsp.worker.loading.notebooks import open_notebook

    everything, lines = open_notebook(path, hook.workspace, "example")
    folder = os.path.dirname(path)
    os.chdir(folder)
    sys.path[:] = [p for p in sys.path if p != ""]
    sys.path.insert(0, folder)
    sys.argv[:] = [path]
    module = types.ModuleType("__main__")
    module.__file__ = path
    module.__dict__["__builtins__"] = builtins
    module.__dict__.setdefault("display", _display)  # IPython's, which notebooks call bare
    module.__dict__.setdefault("get_ipython", _get_ipython)  # ``'google.colab' in str(get_ipython())``
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    own = path == hook.path
    try:
        for block in everything.blocks:
            # padded so that the cell's lines are the module's (linecache, frames, the hook's tree)
            source = "\n" * block.start + "\n".join(lines[block.start : block.end + 1]) + "\n"
            try:
                code = hook.compile(source.encode(), path) if own else compile(source, path, "exec", dont_inherit=True)
            except SyntaxError:
                continue
            try:
                exec(code, module.__dict__)
            except Delivered:
                raise
            except SystemExit as exc:
                if exc.code in (None, 0):
                    return "finished", None, ""
                return "exited", None, f" (cell {block.cell} exited with status {exc.code})"
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt):
                    raise
                return "failed", exc, f" (in cell {block.cell})"
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved
    return "finished", None, ""


def _display(*objects: object, **_: object) -> None:
    print(*objects)


class _Shell:
    """What ``get_ipython()`` gives a notebook run outside IPython: not Colab, and every magic
    or shell call (``run_line_magic``, ``system``) a no-op, as the neutralised lines are."""

    def __str__(self) -> str:
        return "<jaxlsp notebook run: no IPython>"

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None


def _get_ipython() -> _Shell:
    return _Shell()


def _last_stderr_hint() -> str:
    return "see the output below"


class _Reporter:
    """A pytest plugin that keeps what went wrong before the target was called."""

    def __init__(self, hook: Watched) -> None:
        self.hook = hook
        self.failures: list[tuple[str, str, BaseException | None, str]] = []  # (node id, phase, exception, text)
        self.collected = 0
        self.outcomes: dict[str, int] = {}
        self.skip_reason = ""

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.failures.append((report.nodeid or "collection", "collect", None, str(report.longreprtext)))

    def pytest_collection(self, session: pytest.Session) -> None:
        """Before the test files import anything: import hooks that plugins or ``conftest.py``
        files put first in ``sys.meta_path`` (jaxtyping's ``--jaxtyping-packages``, as equinox's
        own tests use it) would load the target's file without the first-call hook; the
        target's finder goes back in front of them."""
        for finder in [f for f in sys.meta_path if isinstance(f, TargetFinder)]:
            sys.meta_path.remove(finder)
            sys.meta_path.insert(0, finder)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = len(session.items)  # after -k deselected the others

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and report.skipped):
            self.outcomes[report.outcome] = self.outcomes.get(report.outcome, 0) + 1
            if report.skipped and not self.skip_reason:
                reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else str(report.longrepr)
                self.skip_reason = str(reason).removeprefix("Skipped: ")

    def summary(self) -> str:
        """``2 test(s): 1 passed, 1 skipped (why)``: what the run did instead of calling the target."""
        counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(self.outcomes.items()))
        why = f" ({self.skip_reason})" if self.skip_reason else ""
        return f"{self.collected} test(s): {counts or 'none ran'}{why}"

    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> None:
        import pytest

        info = call.excinfo
        if info is None or call.when == "teardown":
            return
        skipped = (pytest.skip.Exception, pytest.xfail.Exception)
        if isinstance(info.value, (*skipped, Delivered)):
            return
        self.failures.append((item.nodeid, call.when, info.value, ""))


class _FirstCasesFirst:
    """A pytest plugin that runs the first case of every test function before the second case of
    any (``test_a[18]``, ``test_b[50]``, then ``test_a[34]``...), each function's cases in their
    order. A learning run of a test file ends at its time limit, and the cases of one parametrized
    test mostly repeat its calls at other sizes: in pytest's order, a file whose first test builds
    five model sizes spent the whole limit there, and the models its later tests build were never
    called (jax-resnet: 5 of 14 called targets learned). The later cases still run, so sizes that
    disagree are still seen when there is time. A file with a parameter above function scope keeps
    pytest's order, which groups its cases to set that fixture up once."""

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        if any(_wider_parameter(item) for item in items):
            return
        seen: dict[tuple[str, str], int] = {}
        ranks: dict[int, int] = {}
        for item in items:
            parent = item.parent.nodeid if item.parent is not None else ""
            function = (parent, str(getattr(item, "originalname", None) or item.name))
            ranks[id(item)] = seen.get(function, 0)
            seen[function] = ranks[id(item)] + 1
        items.sort(key=lambda item: ranks[id(item)])  # stable: the first cases keep pytest's order


def _wider_parameter(item: pytest.Item) -> bool:
    """Whether a parameter of ``item`` belongs to a fixture scoped above the function."""
    scopes = getattr(getattr(item, "callspec", None), "_arg2scope", None)  # pytest's, private
    if not isinstance(scopes, Mapping):
        return False
    return any(str(getattr(scope, "value", scope)) != "function" for scope in scopes.values())


def _last_line(text: str) -> str:
    return text.strip().splitlines()[-1] if text.strip() else ""


def _other_causes(failures: list[tuple[str, str, BaseException | None, str]]) -> str:
    """Why each other file or test of the run failed (``; collect of pkg/test_b.py: E ...``), so
    that an error that none reached the target names every cause, not the first one's alone."""
    causes: list[str] = []
    for node, phase, exc, text in failures:
        why = f"{type(exc).__name__}: {exc}".splitlines()[0] if exc is not None else _last_line(text)
        causes.append(f"{phase} of {node}: {why}")
    return "".join(f"; {c}" for c in causes)


def _selection(ids: list[str]) -> list[str]:
    """pytest arguments that select ``ids``: node ids of tests become their files and a ``-k`` of
    their names, so that a parametrized test (``test_x[a]``, absl's ``test_x0``) is found by the
    name written in the source, and a name pytest does not know selects nothing instead of
    failing the whole run. A whole file among test ids (the runs of several sites together) is
    selected by its module's name, which ``-k`` matches for every test in it."""
    if not any("::" in i for i in ids):
        return ids
    files: list[str] = []
    names: list[str] = []
    for node in ids:
        file, sep, rest = node.partition("::")
        if file not in files:
            files.append(file)
        name = rest.rsplit("::", 1)[-1] if sep else os.path.basename(file)
        if name not in names:
            names.append(name)
    return [*files, "-k", " or ".join(names)]


def _run_pytest(
    example: ExampleSpec, hook: Watched, root: str, first_cases_first: bool = False
) -> tuple[str, BaseException | None, str]:
    try:
        import pytest
    except ImportError:
        raise CaptureError(
            "refused",
            f"running {example['text']} needs pytest, which is not installed in {sys.executable}: "
            "install it there (pip install pytest) or choose a script",
        ) from None
    sys.path[:] = [p for p in sys.path if p not in ("", root)]
    sys.path.insert(0, root)  # python -m pytest puts the current folder first
    src = os.path.join(root, "src")
    if root and os.path.isdir(src) and src not in sys.path:
        # a src layout's package (tinygp's src/tinygp), as an editable install puts it: last, so
        # that an installed package still wins; a fresh clone's tests import it
        sys.path.append(src)
    reporter = _Reporter(hook)
    args = [
        *_selection([str(t) for t in example.get("tests") or [example["path"]]]),
        "-q",
        "-s",
        "-p",
        "no:cacheprovider",
        # one file that fails to import (a package this machine lacks) must not stop the others
        # from running: pytest would otherwise stop before the first test
        "--continue-on-collection-errors",
        # the warm spare preloaded installed libraries, pytest plugins among them (jaxtyping's):
        # pytest's warning that it cannot rewrite their asserts is ours, not the user's, and a
        # project's ``filterwarnings = error`` (interpax's) made it fail every run in the spare
        "-W",
        "ignore::pytest.PytestAssertRewriteWarning",
    ]
    if importlib.util.find_spec("xdist") is not None:
        args += ["-p", "no:xdist"]
    recorder = signatures.CURRENT
    with recorder.pytest_files() if recorder is not None else contextlib.nullcontext():
        plugins: list[object] = [reporter, _FirstCasesFirst()] if first_cases_first else [reporter]
        status = pytest.main(args, plugins=plugins)
    if reporter.failures:
        node, phase, exc, text = reporter.failures[0]
        where = f" ({phase} of {node})" if phase != "call" else ""
        others = _other_causes(reporter.failures[1:])
        if exc is not None:
            return "failed", exc, where + others
        return "failed", None, f"{where}: {_last_line(text)}{others}"
    if reporter.collected == 0:
        return "finished", None, f" (pytest collected no test; exit status {int(status)})"
    return "finished", None, f" (pytest: {reporter.summary()})"
