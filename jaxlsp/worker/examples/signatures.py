"""Call signatures at every boundary: the abstract call of each workspace function and module
class that runs during a capture or an example run, kept so that a later trace of that target
(or a live re-trace) has its inputs without running anything again.

While a capture runs with ``request["signatures"]``, every workspace file (under the root, not an
installed package) is compiled with a hook first in the body of each top-level function and of
each top-level class's ``__call__`` and ``__init__`` (after the docstring, at the first
statement's position: no other line or column moves, so the graph is the one an uninstrumented
trace gives). The hook reads the call's arguments from the frame and, the first time a target is
called with an array (a tracer or a concrete array) or as a module, writes the call in the recipe
form :mod:`.learned` makes for an example's first call: arrays as shapes and dtypes, Python
values, a Linen module's fields, the arguments an NNX or Equinox constructor was called with. A
call that cannot be written that way is skipped; the next call of the same target is tried, up to
:data:`TRIES`. Later calls of a recorded target cost one dictionary lookup.

Each signature also carries the files of the workspace frames that made the call (the caller's
chain, not the target's own file) with their sha256: the server drops a signature when one of
them changed, since the call it recorded may no longer be made. The target's own file is left
out on purpose: an edit inside a layer is re-traced on the inputs its caller gave it.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import hashlib
import importlib.machinery
import os
import pathlib
import sys
import threading
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, TypeVar, cast

from jaxlsp.worker.core.failures import Workspace, installed
from jaxlsp.worker.examples.calls import frame_arguments, without_defaults

if TYPE_CHECKING:
    from _pytest.assertion.rewrite import AssertionRewritingHook
    from jax.sharding import Sharding

    from jaxlsp.worker.examples.learned import Arguments

_Tree = TypeVar("_Tree")

HOOK_NAME = "__jaxlsp_signature__"
#: targets recorded in one capture, at most (a generous bound on what one result carries)
MAX_SIGNATURES = 512
#: calls of one target tried before it is given up (each unspellable: a model passed as argument)
TRIES = 4
_MAX_FILE_BYTES = 2_000_000  # larger workspace files are loaded as they are, uninstrumented


class Site:
    """One instrumented target: where it is defined and how it is named."""

    __slots__ = ("is_class", "name", "path")

    def __init__(self, path: str, name: str, is_class: bool) -> None:
        self.path = path
        self.name = name
        self.is_class = is_class


class Recorder:
    """The hooks' state for one capture: which targets are instrumented, what each recorded."""

    def __init__(self, workspace: Workspace, exclude: tuple[str, str] | None = None) -> None:
        self.workspace = workspace
        self.exclude = exclude  # (realpath, name): the capture's own target, which has its profile
        self.sites: list[Site] = []
        self.done: set[int] = set()  # site indexes recorded or given up: the hooks' fast path
        self.tries: dict[int, int] = {}
        # module classes whose call is recorded or given up (a class site's fast path: its
        # ``__call__`` also runs for subclasses that inherit it, each recorded on its own)
        self.done_types: set[type] = set()
        self.type_tries: dict[type, int] = {}
        # type -> [(instance, abstract constructor arguments)]: an NNX model is called as a copy
        # (split and merged by the abstract init), so the call finds its constructor by its type
        # and, when the type was built with other arguments too, by its parameters' shapes
        self.inits: dict[type, list[tuple[object, Arguments]]] = {}
        # classes whose constructions are not read any more: plain ones (a dataset built per
        # batch), and module classes with their 64 constructions kept (an ``__init__`` hook's fast path)
        self.done_inits: set[type] = set()
        self.records: list[dict[str, object]] = []
        # calls no recipe can spell, the first of each target, with the test that made it
        self.unspelled: list[dict[str, object]] = []
        self.unspelled_keys: set[tuple[str, str]] = set()
        self.hashes: dict[str, str | None] = {}
        self.instrumented: set[str] = set()
        self.last_new = 0.0  # time.monotonic() of the last new signature (an example run's idle stop)
        self.token = id(self)  # in the hooks this recorder compiled: another's are ignored
        self._busy = threading.local()

    # -- compiling ---------------------------------------------------------------------------
    def wants(self, path: str) -> bool:
        real = os.path.realpath(path)
        return (
            real.endswith(".py")
            and self.workspace.contains(real)
            and not installed(real)
            and os.sep + os.path.join("jaxlsp", "capture", "worker") + os.sep not in real
        )

    def compile(
        self, source: bytes, path: str, rewrite: Callable[[ast.Module], None] | None = None
    ) -> types.CodeType | None:
        """``source`` compiled with the hooks, or None when it has no target to hook (or cannot
        be parsed here: the loader's own compile then says why, as it would have). ``rewrite``:
        what the file's own loader does to its tree first (pytest's assertion rewriting)."""
        if len(source) > _MAX_FILE_BYTES:
            return None
        try:
            tree = ast.parse(source, filename=path)
        except (SyntaxError, ValueError):
            return None
        if rewrite is not None:
            rewrite(tree)
        real = os.path.realpath(path)
        if not self._instrument(tree, real):
            return None
        self.instrumented.add(real)
        return compile(tree, path, "exec", dont_inherit=True)

    def _instrument(self, tree: ast.Module, real: str) -> bool:
        hooked = False
        tests = _is_test_file(real)
        final = _final_definitions(tree)
        for stmt in tree.body:
            if isinstance(stmt, ast.FunctionDef | ast.ClassDef) and final.get(stmt.name) is not stmt:
                # A name defined again further down (lineax's 26 singledispatch registrations,
                # each a ``def _``): a trace of it runs what the module leaves bound to it, the
                # last one, so only that one's calls teach it; another's call fed to the last one
                # failed (``'DiagonalLinearOperator' object has no attribute 'operator1'``).
                continue
            if isinstance(stmt, ast.FunctionDef):
                if tests and (stmt.name.startswith("test") or _is_fixture(stmt)):
                    continue  # pytest calls it with fixtures: the test's own call is not the program's
                hooked = self._hook(stmt, real, stmt.name, False, "call") or hooked
            elif isinstance(stmt, ast.ClassDef):
                for inner in stmt.body:
                    if isinstance(inner, ast.FunctionDef) and inner.name == "__call__":
                        hooked = self._hook(inner, real, stmt.name, True, "call") or hooked
                    elif isinstance(inner, ast.FunctionDef) and inner.name == "__init__":
                        hooked = self._hook(inner, real, stmt.name, True, "init") or hooked
        return hooked

    def _hook(self, fn: ast.FunctionDef, real: str, name: str, is_class: bool, what: str) -> bool:
        if self.exclude == (real, name) or len(self.sites) >= MAX_SIGNATURES or _is_generator(fn):
            return False
        index = next((i for i, s in enumerate(self.sites) if s.path == real and s.name == name), None)
        if index is None:
            index = len(self.sites)
            self.sites.append(Site(real, name, is_class))
        body = fn.body
        docstring = isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant)
        at = 1 if docstring else 0  # after the docstring, which stays the function's __doc__
        anchor = body[min(at, len(body) - 1)]
        hook_args: list[ast.expr] = [ast.Constant(self.token), ast.Constant(index), ast.Constant(what)]
        positional = [*fn.args.posonlyargs, *fn.args.args]
        if is_class and positional:
            # the instance, passed as it is: its type is the fast path's key, with no frame read
            hook_args.append(ast.Name(positional[0].arg, ast.Load()))
        call = ast.Expr(ast.Call(ast.Name(HOOK_NAME, ast.Load()), hook_args, []))
        for node in ast.walk(call):
            ast.copy_location(node, anchor)
        body.insert(at, call)
        return True

    @contextlib.contextmanager
    def installed(self) -> Iterator[Recorder]:
        """The hooks in place: workspace files imported meanwhile (by any module name, the target's
        own file loaded by path too) are compiled instrumented; a bytecode cache is never read for
        them."""
        original = importlib.machinery.SourceFileLoader.get_code
        recorder = self

        def get_code(loader: importlib.machinery.SourceFileLoader, fullname: str) -> types.CodeType | None:
            path = loader.get_filename(fullname)
            plain = type(loader) is importlib.machinery.SourceFileLoader
            # jaxtyping's import hook (``--jaxtyping-packages``, ``install_import_hook``: how
            # jaxtyping-checked libraries load their package in their tests) gives the package a
            # loader of its own, which the workspace's calls then went through unrecorded
            rewrite = None if plain else _jaxtyping_rewrite(loader)
            if (plain or rewrite is not None) and recorder.wants(path):
                with contextlib.suppress(OSError):
                    code = recorder.compile(loader.get_data(path), path, rewrite)
                    if code is not None:
                        return code
            return original(loader, fullname)

        global CURRENT
        setattr(builtins, HOOK_NAME, self)
        importlib.machinery.SourceFileLoader.get_code = get_code  # type: ignore[method-assign,assignment]
        CURRENT = self
        try:
            yield self
        finally:
            CURRENT = None
            importlib.machinery.SourceFileLoader.get_code = original  # type: ignore[method-assign]
            # Modules compiled with hooks may outlive the capture in a process that goes on (an
            # in-process capture): their hooks then call a no-op, never a missing name.
            setattr(builtins, HOOK_NAME, _quiet)

    @contextlib.contextmanager
    def pytest_files(self) -> Iterator[None]:
        """Test files and ``conftest.py`` compiled with the hooks as well while pytest runs: pytest
        imports them with its own assertion-rewriting loader, not a ``SourceFileLoader``, so a
        target defined in a test file (a helper, a small module) was never recorded."""
        try:
            from _pytest.assertion import rewrite as pytest_rewrite
        except ImportError:
            yield
            return
        hook_class = pytest_rewrite.AssertionRewritingHook
        original = hook_class.exec_module
        recorder = self

        def exec_module(loader: AssertionRewritingHook, module: types.ModuleType) -> None:
            spec = module.__spec__
            origin = spec.origin if spec is not None else None
            if origin and recorder.wants(origin):
                config = getattr(loader, "config", None)
                code = None
                # a file our compile cannot take is left to pytest's own loader, as it would be
                with contextlib.suppress(Exception):
                    with open(origin, "rb") as f:
                        source = f.read()
                    code = recorder.compile(
                        source, origin, lambda tree: pytest_rewrite.rewrite_asserts(tree, source, origin, config)
                    )
                if code is not None:
                    with contextlib.suppress(Exception):  # as pytest notes a file it rewrote
                        loader._rewritten_names[module.__name__] = pathlib.Path(origin)
                    exec(code, module.__dict__)
                    return
            original(loader, module)

        hook_class.exec_module = exec_module  # type: ignore[method-assign,assignment]
        try:
            yield
        finally:
            hook_class.exec_module = original  # type: ignore[method-assign]

    # -- the hook ----------------------------------------------------------------------------
    def __call__(self, token: int, index: int, what: str, *instance: object) -> None:
        if token != self.token:
            return  # a module another capture of this process compiled (an in-process capture)
        owner: type | None = None
        if what == "init":
            if instance and type(instance[0]) in self.done_inits:
                return
        elif self.sites[index].is_class:
            # A class's ``__call__`` runs for its subclasses too (tinygp's ``Kernel.__call__``
            # for every kernel): the call is the instance's class's, recorded and done per class.
            owner = type(instance[0]) if instance else type(None)
            if owner in self.done_types:
                return
        elif index in self.done:
            return
        frame = sys._getframe(1)
        if getattr(self._busy, "on", False):
            return  # a target called while a call is being written (a field's __init__, say)
        self._busy.on = True
        try:
            if what == "init":
                self._init(frame)
            elif owner is not None:
                self._class_call(index, owner, frame)
            else:
                self._call(index, frame)
        except Exception:  # a hook never changes what the user's code does
            if owner is not None:
                self._give_up_type(owner)
            else:
                self._give_up(index)
        finally:
            self._busy.on = False

    def _class_call(self, index: int, owner: type, frame: types.FrameType) -> None:
        """A ``__call__`` hooked in ``sites[index]``'s class, run for an instance of ``owner``:
        recorded as ``owner``'s call when ``owner`` is a top-level class of a workspace file (the
        hooked class itself, or a subclass that inherits the method), else given up for it."""
        site = self.sites[index]
        if owner.__qualname__ == site.name and _defined_in(owner) == site.path:
            where = site
        else:
            path = _defined_in(owner)
            if path is None or "." in owner.__qualname__ or not self.wants(path):
                self.done_types.add(owner)  # a class defined in a function, or not the workspace's
                return
            if self.exclude == (path, owner.__qualname__):
                self.done_types.add(owner)  # the capture's own target has its profile
                return
            where = Site(path, owner.__qualname__, True)
        if self._call(index, frame, where):
            self.done_types.add(owner)
        else:
            self._give_up_type(owner)

    def _give_up_type(self, owner: type) -> None:
        self.type_tries[owner] = self.type_tries.get(owner, 0) + 1
        if self.type_tries[owner] >= TRIES:
            self.done_types.add(owner)

    def _init(self, frame: types.FrameType) -> None:
        from jaxlsp.worker.loading import targets

        args, kwargs = frame_arguments(frame)
        if not args:
            return
        if targets.infer_kind(args[0]) not in ("nnx", "equinox"):
            self.done_inits.add(type(args[0]))  # a plain class (a dataset, say): nothing kept of it
            return
        made = self.inits.setdefault(type(args[0]), [])
        if all(instance is not args[0] for instance, _ in made):
            made.append((args[0], (abstract(args[1:]), abstract(kwargs))))
        if len(made) >= 64:
            self.done_inits.add(type(args[0]))

    def _constructed(self, instance: object) -> Arguments | None:
        """The abstract constructor arguments ``instance`` (or the model it is a copy of) was made
        with; None when they were not seen or cannot be told apart."""
        made = self.inits.get(type(instance), [])
        for original, init in made:
            if original is instance:
                return init
        distinct: list[tuple[object, Arguments]] = []
        for original, init in made:
            if all(repr(init) != repr(seen) for _, seen in distinct):
                distinct.append((original, init))
        if len(distinct) == 1:
            return distinct[0][1]
        shapes = _leaf_shapes(instance)
        matching = [init for original, init in distinct if shapes is not None and _leaf_shapes(original) == shapes]
        return matching[0] if len(matching) == 1 else None

    def _give_up(self, index: int) -> None:
        self.tries[index] = self.tries.get(index, 0) + 1
        if self.tries[index] >= TRIES:
            self.done.add(index)

    def _call(self, index: int, frame: types.FrameType, where: Site | None = None) -> bool:
        """Record the call in ``frame`` as ``where``'s (the hooked site's by default); whether
        it was recorded. A function site that could not be is tried again up to :data:`TRIES`."""
        from jaxlsp.worker.examples import learned
        from jaxlsp.worker.loading import targets

        site = where or self.sites[index]
        args, kwargs = frame_arguments(frame)
        profile: dict[str, object] = {}
        init: Arguments | None = None
        if site.is_class:
            if not args:
                return False
            instance, call_args, call_kwargs = args[0], list(args[1:]), dict(kwargs)
            kind = targets.infer_kind(instance)
            if kind == "function":
                return False  # a plain class: not a module target
            obj = instance
            if kind == "linen":
                streams, mutable = _linen_scope(instance)
                if streams:
                    profile["rngs"] = streams
                if mutable:
                    profile["mutable"] = mutable
            elif kind in ("nnx", "equinox"):
                init = self._constructed(instance)
            called = type(instance).__dict__.get("__call__") or type(instance).__call__
            call_args, call_kwargs = without_defaults(called, call_args, call_kwargs, True)
        else:
            kind = "function"
            obj = frame.f_globals.get(site.name)
            if not _has_array(args, kwargs):
                self._give_up(index)  # a pure-Python helper (or not a JAX call this time)
                return False
            call_args, call_kwargs = without_defaults(obj, list(args), dict(kwargs), False)
        call_args, call_kwargs = abstract(call_args), abstract(call_kwargs)
        table = learned.profile_table(
            kind, obj, init, call_args, call_kwargs, profile, site.path, site.name, self._constructed
        )
        if table is None:
            self._unspellable(site, kind, frame)
            if not site.is_class:
                self._give_up(index)
            return False
        if not site.is_class:
            self.done.add(index)
        callers = self._callers(frame)
        line = callers[0] if callers else None
        own = site.path
        import time

        self.last_new = time.monotonic()
        self.records.append(
            {
                "path": site.path,
                "name": site.name,
                "kind": kind,
                "table": table,
                "callsite": {"path": line[0], "line": line[1]} if line else None,
                "sources": {p: h for p, h in ((p, self._hash(p)) for p, _ in callers if p != own) if h is not None},
                "config": learned.run_config(),  # what the call ran under (x64, precision, mesh)
                # the test that made it: replayed when the spelled call cannot trace (a value check)
                "test": _current_test(),
            }
        )
        return True

    def _unspellable(self, site: Site, kind: str, frame: types.FrameType) -> None:
        """Note, once per target, a call no recipe can spell (a term holding a Python function,
        an object): the example that reached it still teaches the target, which replays that
        example up to the call (issue 56.7). The pytest test running it says which one."""
        key = (site.path, site.name)
        if key in self.unspelled_keys or len(self.unspelled) >= MAX_SIGNATURES:
            return
        self.unspelled_keys.add(key)
        callers = self._callers(frame)
        line = callers[0] if callers else None
        self.unspelled.append(
            {
                "path": site.path,
                "name": site.name,
                "kind": kind,
                "test": _current_test(),
                "callsite": {"path": line[0], "line": line[1]} if line else None,
                "sources": {
                    p: h for p, h in ((p, self._hash(p)) for p, _ in callers if p != site.path) if h is not None
                },
            }
        )

    def _callers(self, frame: types.FrameType) -> list[tuple[str, int]]:
        """The workspace frames that made the call, innermost first."""
        out: list[tuple[str, int]] = []
        here = frame.f_back
        while here is not None and len(out) < 64:
            file = here.f_code.co_filename
            if not file.startswith("<"):
                real = os.path.realpath(file)
                if self.wants(real):
                    out.append((real, here.f_lineno))
            here = here.f_back
        return out

    def _hash(self, path: str) -> str | None:
        if path not in self.hashes:
            try:
                with open(path, "rb") as f:
                    self.hashes[path] = hashlib.sha256(f.read()).hexdigest()
            except OSError:
                self.hashes[path] = None
        return self.hashes[path]


#: the recorder of the capture in progress, if any (an example run's result carries its records)
CURRENT: Recorder | None = None


def _quiet(token: int, index: int, what: str, *instance: object) -> None:
    """The hook once no capture records: does nothing."""


def collected() -> list[dict[str, object]]:
    """The signatures the capture in progress recorded so far."""
    return list(CURRENT.records) if CURRENT is not None else []


def _current_test() -> str | None:
    """The pytest node id of the test running now (``tests/test_x.py::test_y[a]``, pytest's own
    ``PYTEST_CURRENT_TEST`` without its phase), or None outside a test."""
    current = os.environ.get("PYTEST_CURRENT_TEST")
    if not current:
        return None
    node, _, phase = current.rpartition(" ")
    return node if node and phase.startswith("(") else current


def _defined_in(cls: type) -> str | None:
    """The real path of the file that defines ``cls`` (its module's), if it has one."""
    module = sys.modules.get(cls.__module__)
    file = getattr(module, "__file__", None)
    return os.path.realpath(file) if isinstance(file, str) else None


def _jaxtyping_rewrite(loader: object) -> Callable[[ast.Module], None] | None:
    """For jaxtyping's import-hook loader, what it does to a module's tree before compiling it
    (its checking decorators and ``import jaxtyping``), so that the file is compiled with both
    that and the signature hooks; None for any other loader (left to load the file its own way)."""
    kind = type(loader)
    if kind.__name__ != "_JaxtypingLoader" or not kind.__module__.startswith("jaxtyping."):
        return None
    transformer = getattr(sys.modules.get(kind.__module__), "JaxtypingTransformer", None)
    typechecker = getattr(loader, "_typechecker", None)
    if transformer is None or typechecker is None:
        return None  # another jaxtyping than the one read here: its own loader, unrecorded as before

    def rewrite(tree: ast.Module) -> None:
        transformer(typechecker=typechecker).visit(tree)
        ast.fix_missing_locations(tree)  # its decorators and import come without positions

    return rewrite


def _final_definitions(tree: ast.Module) -> dict[str, ast.stmt]:
    """Each top-level name a ``def`` or ``class`` binds, with the last statement that binds it."""
    final: dict[str, ast.stmt] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            final[stmt.name] = stmt
    return final


def _is_test_file(path: str) -> bool:
    """A file pytest collects tests from by default, or a ``conftest.py``."""
    name = os.path.basename(path)
    return name == "conftest.py" or ((name.startswith("test_") or name.endswith("_test.py")) and name.endswith(".py"))


def _is_fixture(fn: ast.FunctionDef) -> bool:
    """``@pytest.fixture`` / ``@fixture(...)``: pytest's to call."""
    for decorator in fn.decorator_list:
        node = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
        if name == "fixture":
            return True
    return False


def _is_generator(fn: ast.FunctionDef) -> bool:
    """A generator (or one that holds a nested one: left alone as well, to be sure)."""
    return any(isinstance(node, ast.Yield | ast.YieldFrom) for node in ast.walk(fn))


def _linen_scope(module: object) -> tuple[list[str], list[str] | bool | None]:
    """The rng streams and mutable collections of the scope a bound Linen module was called in
    (as ``firstcall._unbound_linen`` reads them, without cloning the module mid-trace)."""
    scope = getattr(module, "scope", None)
    if scope is None:
        return [], None
    streams = sorted(str(k) for k in (getattr(scope, "rngs", None) or {}) if k != "params")
    given = getattr(scope, "mutable", False)
    if bool(getattr(scope, "get_flag", lambda *_: False)("initializing", False)):
        return streams, True
    if given is True or type(given).__name__ == "DenyList":
        root = getattr(scope, "root", scope)
        return streams, sorted(str(c) for c in getattr(root, "_variables", {}) if c != "params") or True
    if isinstance(given, str):
        return streams, [given]
    if isinstance(given, list | tuple):
        return streams, [str(c) for c in given]
    return streams, None


def _leaf_shapes(module: object) -> tuple[tuple[tuple[int, ...], str], ...] | None:
    """The shapes and dtypes of a module's arrays, in order (an NNX module through its state)."""
    import jax

    try:
        nnx = sys.modules.get("flax.nnx")
        tree = nnx.state(module) if nnx is not None and isinstance(module, nnx.Module) else module
        leaves = jax.tree_util.tree_leaves(tree)
    except Exception:
        return None
    return tuple((tuple(x.shape), str(x.dtype)) for x in leaves if hasattr(x, "shape") and hasattr(x, "dtype"))


def _has_array(args: Iterable[object], kwargs: Mapping[str, object]) -> bool:
    import jax
    import numpy as np

    leaves = jax.tree_util.tree_leaves((list(args), dict(kwargs)))
    return any(isinstance(x, jax.Array | np.ndarray) for x in leaves)


def abstract(tree: _Tree) -> _Tree:
    """Arrays and tracers in a pytree as ShapeDtypeStructs (their abstract value: a tracer's
    sharding is never asked for, which some tracers refuse); other leaves as they are."""
    import jax
    import numpy as np

    sds: Callable[..., jax.ShapeDtypeStruct] = jax.ShapeDtypeStruct  # untyped in jax

    def leaf(x: object) -> object:
        if isinstance(x, jax.Array | np.ndarray):
            aval = getattr(x, "aval", None)
            shape, dtype = (aval.shape, aval.dtype) if aval is not None else (x.shape, x.dtype)
            if aval is None:  # a NumPy array: the type JAX converts it to where the call runs
                dtype = jax.dtypes.canonicalize_dtype(dtype)
            weak = bool(getattr(aval if aval is not None else x, "weak_type", False))
            sharding = _explicit_sharding(aval)
            if sharding is not None:
                return sds(tuple(shape), dtype, weak_type=weak, sharding=sharding)
            return sds(tuple(shape), dtype, weak_type=weak)
        return x

    return cast("_Tree", jax.tree_util.tree_map(leaf, tree))  # the same structure, arrays made abstract


def _explicit_sharding(aval: object) -> Sharding | None:
    """The sharding that is part of a value's type under a mesh with Explicit axes (its aval's,
    never the tracer's own, which some tracers refuse); None otherwise."""
    sharding = getattr(aval, "sharding", None)
    mesh = getattr(sharding, "mesh", None)
    spec = getattr(sharding, "spec", None)
    if mesh is None or spec is None or getattr(mesh, "empty", True) or all(p is None for p in spec):
        return None
    return cast("Sharding", sharding)
