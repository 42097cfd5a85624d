"""Loading the target's file by path (package-qualified when it is in a package) and resolving refs.

A notebook target (``.ipynb``) is loaded as its code cells up to the target's cell
(:mod:`jaxlsp.worker.loading.notebooks`), under its file stem.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import sys
import weakref
from types import ModuleType
from typing import Literal, NoReturn

from jaxlsp.notebook import is_notebook
from jaxlsp.worker.core.failures import CaptureError, Workspace, from_exception, imported_since, installed
from jaxlsp.worker.core.paths import is_own
from jaxlsp.worker.loading.notebooks import NotebookRun, run_notebook

LoadMode = Literal["module", "definitions", "cells"]


def module_name_for(path: str) -> tuple[str, str]:
    """``(module name, package root)`` for a file: dotted through folders holding ``__init__.py``."""
    folder, filename = os.path.split(os.path.abspath(path))
    stem = os.path.splitext(filename)[0]
    if is_notebook(path):  # a notebook is never part of a package
        return stem, folder
    parts = [] if stem == "__init__" else [stem]
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        parent, name = os.path.split(folder)
        if not name.isidentifier() or parent == folder:
            break
        parts.insert(0, name)
        folder = parent
    if not parts:  # a top-level __init__.py outside any package
        parts = [os.path.basename(os.path.dirname(os.path.abspath(path)))]
    return ".".join(parts), folder


# Modules this worker loaded with their top level reduced to definitions: never the module a
# later full load may reuse (its statements did not run).
_DEFINITIONS_ONLY: weakref.WeakSet[ModuleType] = weakref.WeakSet()


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def setup_sys_path(target_path: str, workspace_root: str, site_folders: list[str] | None = None) -> None:
    """The target's folder first, then ``site_folders`` (where the call site the inputs came from
    imports from: a test file's folder, as pytest puts it there), then the workspace root and its
    ``src`` folder last."""
    folder = os.path.dirname(os.path.abspath(target_path))
    root = os.path.abspath(workspace_root) if workspace_root else ""
    extra = [os.path.abspath(f) for f in site_folders or [] if os.path.abspath(f) not in (folder, root)]
    ours = {folder, root, *extra}
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) not in ours and p != ""]
    _drop_user_path_inside(root)
    sys.path[0:0] = [folder, *dict.fromkeys(extra)]
    if root:
        sys.path.append(root)
        src = os.path.join(root, "src")
        if os.path.isdir(src) and src not in sys.path:
            # a src layout's package (src/tinygp), where an editable install or pytest's
            # ``pythonpath`` puts it: a test file's target imports it; an installed one still wins
            sys.path.append(src)


def _drop_user_path_inside(root: str) -> None:
    """Take off ``sys.path`` the user's ``PYTHONPATH`` entries (capture/environment/userpath.py) inside the
    workspace root: the client keeps them off already, this holds for a warm spare started before
    it knew this workspace. Nothing a workspace controls is searched ahead of its own root."""
    if not root:
        return
    import json

    try:
        entries = json.loads(os.environ.get("JAXLSP_USER_PATH") or "{}").get("path") or []
    except (ValueError, AttributeError):
        return
    real_root = os.path.realpath(root).rstrip(os.sep) + os.sep
    inside = {p for p in entries if isinstance(p, str) and (os.path.realpath(p) + os.sep).startswith(real_root)}
    if inside:
        sys.path[:] = [p for p in sys.path if p not in inside]


# The files the capture opens for reading (the ``open`` audit event), while a Loader records.
_READS: set[str] | None = None
_HOOKED = False


def _audit(event: str, args: tuple[object, ...]) -> None:
    if event != "open" or _READS is None:
        return
    try:
        path, mode, flags = args
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return  # a descriptor
        if isinstance(mode, str):
            if any(c in mode for c in "wax+"):
                return  # what the program writes is its output, not what it read
        elif not isinstance(flags, int) or flags & os.O_ACCMODE != os.O_RDONLY:
            return
        _READS.add(os.path.abspath(path))
    except Exception:  # an audit hook must never fail the open it hears
        pass


def _record_reads() -> set[str]:
    """Start recording the files opened for reading (the hook is installed once a process)."""
    global _READS, _HOOKED
    if not _HOOKED:
        sys.addaudithook(_audit)
        _HOOKED = True
    _READS = set()
    return _READS


class Loader:
    """Loads the target module once and resolves ``module:Name`` references against it."""

    def __init__(self, target_path: str, workspace: Workspace, name: str = "", cell: int | None = None):
        self.path = os.path.abspath(target_path)
        self.name = name  # the target (which cell of a notebook defines it)
        self.cell = cell  # a notebook target's cell, when the request names it
        self.notebook: NotebookRun | None = None  # what running a notebook's cells left
        self.workspace = workspace
        self.module_name, self.package_root = module_name_for(self.path)
        self.stem = os.path.splitext(os.path.basename(self.path))[0]
        self.module: ModuleType | None = None
        self.files: set[str] = set()  # files of modules that refs and factories named
        self._reads = _record_reads()  # what loading and tracing open: a config file decides widths
        self.skipped: dict[str, int] = {}  # load = "definitions": top-level names left unset, by line
        # the modules already loaded: one outside the workspace is a source only when this capture
        # imported it (a process that ran captures before, a test's own modules, are not the target's)
        self._before = set(sys.modules)

    def skipped_name(self, exc: BaseException) -> str | None:
        """The top-level name a ``definitions`` load left unset whose NameError ``exc`` is, else None."""
        name = getattr(exc, "name", None) if isinstance(exc, NameError) else None
        return name if isinstance(name, str) and name in self.skipped else None

    def skipped_hint(self, exc: BaseException) -> str:
        """For a NameError of a top-level name a ``definitions`` load left unset: why, and what to do."""
        name = self.skipped_name(exc)
        if name is None:
            return ""
        line = self.skipped[name]
        where = f"line {line} of {os.path.basename(self.path)}"
        found = self.workspace.in_cell(self.path, line)
        if found is not None:
            where = f"cell {found[0]} line {found[1]} of {os.path.basename(self.path)}"
        instead = (
            'load = "cells" to run the cells above the target first'
            if found is not None
            else 'load = "module" if importing the file is safe'
        )
        return (
            f"; {name} is set at {where} by a statement that "
            'load = "definitions" does not run (it calls code or needs a value that was not run): use '
            f"{instead}, or build what the target needs in an init or inputs factory"
        )

    def load(self, mode: LoadMode) -> ModuleType:
        if self.module is not None:
            return self.module
        try:
            self._register_parents()
            self.module = self._exec_target(mode)
        except CaptureError:
            raise
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt | MemoryError):
                raise
            error = from_exception("import", exc, self.workspace, f"importing {self.path} failed")
            error.message += self.skipped_hint(exc)
            error.skipped = self.skipped_name(exc)
            raise error from None
        return self.module

    def _register_parents(self) -> None:
        parts = self.module_name.split(".")[:-1]
        folder = self.package_root
        for i in range(len(parts)):
            name = ".".join(parts[: i + 1])
            folder = os.path.join(folder, parts[i])
            existing = sys.modules.get(name)
            if existing is not None and folder in [os.path.abspath(p) for p in getattr(existing, "__path__", [])]:
                continue
            init = os.path.join(folder, "__init__.py")
            spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[folder])
            if spec is None or spec.loader is None:
                raise CaptureError("import", f"cannot load package {name} from {init}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                sys.modules.pop(name, None)
                raise
            if i > 0:
                setattr(sys.modules[".".join(parts[:i])], parts[i], module)

    def _exec_target(self, mode: LoadMode) -> ModuleType:
        name = self.module_name
        if is_notebook(self.path):
            return self._exec_notebook(mode)
        existing = sys.modules.get(name)
        file = getattr(existing, "__file__", None)
        reusable = mode == "definitions" or existing not in _DEFINITIONS_ONLY
        if existing is not None and reusable and isinstance(file, str) and _same_file(file, self.path):
            # Its package's __init__ imported it already (equimo's ``tabular/layers/__init__``
            # imports ``blocks``): loading it again by path would make a second module object
            # of one file, whose registration decorators fail ("already registered") or fill
            # a registry the first one never reads.
            return existing
        spec = importlib.util.spec_from_file_location(name, self.path)
        if spec is None or spec.loader is None:
            raise CaptureError("import", f"cannot load {self.path} as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            if mode == "definitions":
                with open(self.path, "rb") as f:
                    source = f.read()
                tree = ast.parse(source, filename=self.path)
                kept = definitions_only(tree.body)
                kept_ids = {id(stmt) for stmt in kept}
                for stmt in tree.body:
                    if id(stmt) not in kept_ids:
                        for target in assigned_names(stmt):
                            self.skipped.setdefault(target, stmt.lineno)
                self.skipped.update(run_definitions(kept, self.path, module.__dict__))
                _DEFINITIONS_ONLY.add(module)
            else:
                spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        if "." in name:
            parent, _, child = name.rpartition(".")
            if parent in sys.modules:
                setattr(sys.modules[parent], child, module)
        return module

    def _exec_notebook(self, mode: LoadMode) -> ModuleType:
        module = ModuleType(self.module_name)
        module.__file__ = self.path
        sys.modules[self.module_name] = module
        try:
            self.notebook = run_notebook(
                self.path,
                module.__dict__,
                mode=mode,
                name=self.name,
                cell=self.cell,
                workspace=self.workspace,
                definitions=run_definitions,
                reduce=definitions_only,
                unset=assigned_names,
            )
        except BaseException:
            sys.modules.pop(self.module_name, None)
            raise
        self.skipped.update(self.notebook.skipped)
        return module

    def import_module(self, name: str) -> ModuleType:
        """A module by name; the target's own name (qualified or stem) gives the target module."""
        if name in (self.module_name, self.stem) and self.module is not None:
            return self.module
        try:
            module = importlib.import_module(name)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt | MemoryError):
                raise
            raise from_exception("import", exc, self.workspace, f"importing {name} failed") from None
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and self.workspace.contains(file):
            self.files.add(os.path.realpath(file))
        return module

    def imported_files(self) -> set[str]:
        """The real paths of the workspace modules loaded in this capture (the target's imports,
        theirs, and any a factory or the trace imported), with the files refs named and the
        workspace files the program opened for reading until now: a module that gives no frame
        (a config of constants, a package's ``__init__``) or a data file (``config.json``) still
        decides the program, so editing it must make the graph stale and re-trace it live. A
        module is the user's wherever it lies (a folder beside the workspace put on ``sys.path``):
        only the standard library, installed packages and jaxlsp's own are left out (issue 45)."""
        global _READS
        if _READS is self._reads:
            _READS = None  # what is opened from here on is ours (hashing, linecache)
        found = set(self.files)
        for path in self._reads:
            if (
                "__pycache__" not in path
                and not path.endswith((".pyc", ".so"))
                and self.workspace.contains(path)
                and not is_own(path)
                and os.path.isfile(path)
            ):
                found.add(os.path.realpath(path))
        for module in imported_since():
            file = getattr(module, "__file__", None)
            if not isinstance(file, str) or not file.endswith(".py") or is_own(file):
                continue
            real = os.path.realpath(file)
            if self.workspace.contains(real) or (not installed(real) and module.__name__ not in self._before):
                found.add(real)
        return found

    def resolve(self, ref: str) -> object:
        """``module:Name`` (``Name`` may be dotted) to the object."""
        module_name, sep, attr = ref.partition(":")
        if not sep or not module_name or not attr:
            raise CaptureError("import", f"bad reference {ref!r}: expected 'module:Name'")
        return resolve_attr(self.import_module(module_name), attr, ref)


def resolve_attr(obj: object, dotted: str, what: str) -> object:
    for part in dotted.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise CaptureError("import", f"{what}: {part!r} not found") from None
    return obj


class MissingImport:
    """Stands for a name whose top-level import failed in a ``definitions`` load; any use says so."""

    def __init__(self, module: str, line: int, error: str):
        self._jaxlsp_missing = (module, line, error)

    def _fail(self) -> NoReturn:
        module, line, error = self._jaxlsp_missing
        raise ModuleNotFoundError(
            f'{module} could not be imported ({error}); load = "definitions" went past its import at '
            f"line {line} because nothing at the top level needed it, but the traced code uses it: install the "
            "missing package in the interpreter that traces",
            name=module,
        )

    def __getattr__(self, name: str) -> NoReturn:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        self._fail()

    def __call__(self, *args: object, **kwargs: object) -> NoReturn:
        self._fail()

    def __repr__(self) -> str:
        return f"<missing module {self._jaxlsp_missing[0]}>"


def run_definitions(body: list[ast.stmt], path: str, namespace: dict[str, object]) -> dict[str, int]:
    """Runs the kept statements one by one and returns the names left unset, by line.

    A top-level import that fails (a plotting or dataset package that is not installed, a name that a
    newer version removed) binds :class:`MissingImport` placeholders instead of failing; a call-free
    assignment that fails (it reads a name whose statement was skipped: ``x = X_test[idxs]``) is
    skipped in turn.
    """
    skipped: dict[str, int] = {}
    flags = future_flags(body)  # each statement compiles alone: the file's ``from __future__`` still holds
    for stmt in body:
        code = compile(ast.Module(body=[stmt], type_ignores=[]), path, "exec", flags=flags, dont_inherit=True)
        try:
            exec(code, namespace)
        except ImportError as exc:  # a package not installed, or a name a newer version removed
            if not isinstance(stmt, ast.Import | ast.ImportFrom):
                raise
            for name, module in _bound_names(stmt):
                namespace[name] = MissingImport(module, stmt.lineno, str(exc))
        except Exception:
            if not isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
                raise
            for name in assigned_names(stmt):
                skipped.setdefault(name, stmt.lineno)
    return skipped


def future_flags(body: list[ast.stmt]) -> int:
    """The compiler flags of the module's ``from __future__`` imports (``annotations``: an annotation
    that names what the load skipped, ``F = TypeVar(...)``, is never evaluated)."""
    import __future__

    flags = 0
    for stmt in body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
            for alias in stmt.names:
                feature = getattr(__future__, alias.name, None)
                flags |= int(getattr(feature, "compiler_flag", 0))
    return flags


def assigned_names(stmt: ast.stmt) -> list[str]:
    """Top-level names a statement assigns (assignment, ``for`` and ``with`` targets)."""
    targets: list[ast.AST] = []
    if isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, ast.AnnAssign | ast.AugAssign | ast.For | ast.AsyncFor):
        targets = [stmt.target]
    elif isinstance(stmt, ast.With | ast.AsyncWith):
        targets = [item.optional_vars for item in stmt.items if item.optional_vars is not None]
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def _bound_names(stmt: ast.Import | ast.ImportFrom) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for alias in stmt.names:
        if isinstance(stmt, ast.Import):
            name = alias.asname or alias.name.partition(".")[0]
            out.append((name, alias.name if alias.asname else name))
        elif alias.name != "*":
            out.append((alias.asname or alias.name, f"{'.' * stmt.level}{stmt.module or ''}.{alias.name}"))
    return out


_DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def definitions_only(body: list[ast.stmt]) -> list[ast.stmt]:
    """Imports, definitions, call-free assignments, and ``try``/``if`` blocks reduced to those."""
    kept: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, _DEFINITIONS):
            kept.append(stmt)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
            value = stmt.value
            if value is None or not _has_call(stmt):
                kept.append(stmt)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            kept.append(stmt)  # docstrings
        elif isinstance(stmt, ast.Try):
            inner = definitions_only(stmt.body)
            if inner:
                stmt.body = inner
                for handler in stmt.handlers:
                    handler.body = definitions_only(handler.body) or [ast.Pass()]
                stmt.orelse = definitions_only(stmt.orelse)
                stmt.finalbody = definitions_only(stmt.finalbody)
                kept.append(stmt)
        elif isinstance(stmt, ast.If) and not _is_main_guard(stmt) and not _has_call(stmt.test):
            inner = definitions_only(stmt.body)
            orelse = definitions_only(stmt.orelse)
            if inner or orelse:
                stmt.body = inner or [ast.Pass()]
                stmt.orelse = orelse
                kept.append(stmt)
    for stmt in kept:
        ast.fix_missing_locations(stmt)
    return kept


def _has_call(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call | ast.Await | ast.Yield | ast.YieldFrom) for n in ast.walk(node))


def _is_main_guard(stmt: ast.If) -> bool:
    test = stmt.test
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )
