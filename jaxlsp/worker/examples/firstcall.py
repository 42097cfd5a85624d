"""Learning a target's inputs from a run of one of the workspace's own examples.

The profile's ``example`` names a pytest test (run as ``python -m pytest`` would from the
workspace root: the root first on ``sys.path``, ``conftest.py`` files and pytest's configuration
honoured), a script (run as ``__main__``, with its arguments) or a module (imported, so that its
top-level code runs). Before it starts, the target's file is instrumented wherever it is imported
from (any module name: an import hook matches the file, not the name; a script that defines the
target itself is compiled instrumented): the first statement of the target function (the module's
``__call__``, or the method asked for) calls :func:`_first_call`, which takes the call's
arguments and instance from the frame, makes them abstract (arrays -> shapes and dtypes; Python
values kept), traces the target on exactly that call in a fresh thread (so nothing of the
example's own tracing or Flax context is active there) and stops the run: the result goes out on
the result pipe and the process ends at once, so nothing of the run's later work happens. A Linen
module called inside ``init``/``apply`` is bound: an unbound clone of it is initialised
abstractly, with the rng streams and mutable collections of the caller's scope.

``__init__`` of an NNX or Equinox target is instrumented too, so that the constructor arguments
become part of the learned profile (:mod:`.learned`). A run that ends without calling the target,
fails before it, or exits is a structured ``example`` error naming the example and the user's line.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import os
import sys
import threading
import time
import types
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, TypedDict, cast

from jaxlsp.worker.core.failures import CaptureError, Workspace, first_paragraph, from_exception, user_frame_of
from jaxlsp.worker.examples import runners
from jaxlsp.worker.examples.calls import frame_arguments, without_defaults
from jaxlsp.worker.examples.runners import (
    HOOK_NAME,
    Delivered,
    Instrument,
    Rewrite,
    TargetFinder,
    run_example,
    target_code,
)
from jaxlsp.worker.protocol import ErrorKind, ExampleSpec, PathRoots, WorkerRequest, WorkerResult
from jaxlsp.worker.tracing import limits

if TYPE_CHECKING:
    from typing import NotRequired  # Python 3.11: the worker also runs on 3.10

    import jax


class CallSite(TypedDict):
    """The user's line that made the call (``WorkerResult.callsite``)."""

    path: str
    line: int  # in a notebook: the line in its cell
    cell: NotRequired[int]
    function: str


class Hook:
    """The state of one example run: what to watch for, what was seen."""

    def __init__(
        self, request: WorkerRequest, workspace: Workspace, timings: dict[str, float], device: jax.Device | None
    ) -> None:
        self.request = request
        self.workspace = workspace
        self.timings = timings
        self.device = device
        target = request["target"]
        self.path = os.path.realpath(str(target["path"]))
        self.name = str(target["name"])
        self.kind: str | None = target.get("kind")
        profile = request["profile"]
        parts = self.name.split(".")
        method = profile.get("method")
        self.owner: list[str]
        self.method: str | None
        if len(parts) > 1 and not parts[-1][:1].isupper():
            self.owner, self.method = parts[:-1], parts[-1]  # ``Class.method``
        elif method:
            self.owner, self.method = parts, str(method)
        else:
            self.owner, self.method = parts, None  # a function, or a class's __call__
        self.example: ExampleSpec = profile["example"].copy()
        self.fired = False
        self.result: WorkerResult | None = None
        # id(instance) -> constructor arguments
        self.inits: dict[int, tuple[list[object], dict[str, object]]] = {}
        self.started = time.perf_counter()
        self.instrumented = False
        self.missing: str | None = None  # the watched method, when the target class has none

    # -- instrumentation -------------------------------------------------------------------------------
    def compile(self, source: bytes, path: str, rewrite: Rewrite | None = None) -> types.CodeType:
        """``source`` of the target's file compiled with the first-call (and init) hooks (and,
        with ``rewrite``, the file's other changes: pytest's assertion rewriting of a test file)."""
        tree = ast.parse(source, filename=path)
        if rewrite is not None:
            rewrite(tree, source, path)
        found = Instrument(self.owner, self.method).apply(tree)
        self.instrumented = self.instrumented or found
        return compile(tree, path, "exec", dont_inherit=True)

    # -- the hook --------------------------------------------------------------------------------------
    def inherits(self, bases: tuple[object, ...], method: str, methods: tuple[str, ...] = ()) -> bool:
        """Asked as the target's class is made: whether it inherits the watched method. When
        not, nothing can call it: the run stops here, as the target's file is imported, with an
        answer that names the class's own methods (each a target), instead of running every
        test to its end (300 s, for an Equinox term with only ``vf``) to say the same."""
        found = runners.inherits(bases, method)
        if not found:
            self.missing = method
            if not self.fired and threading.current_thread().name != _TRACE_THREAD:
                self.fired = True
                where = _relative(self.path, self.workspace.root)
                choices = ", ".join(f"{where}::{self.name}.{m}" for m in methods)
                message = f"{self.name} has no {method} of its own or from a base: nothing calls it" + (
                    f"; trace one of its methods: {choices}" if choices else ""
                )
                deliver(self.request, {"ok": False, "error": {"kind": ErrorKind.REFUSED, "message": message}}, self)
        return found

    def __call__(self, what: str) -> None:
        if self.fired or threading.current_thread().name == _TRACE_THREAD:
            return
        frame = sys._getframe(1)  # the instrumented function that called this hook
        args, kwargs = frame_arguments(frame)
        if what == "init":
            if args:
                from jaxlsp.worker.loading.inputs import abstractify

                self.inits.setdefault(id(args[0]), (abstractify(args[1:]), abstractify(kwargs)))
            return
        self.fired = True
        self.timings["run"] = time.perf_counter() - self.started
        callsite = self._callsite(frame)
        from jaxlsp.worker.core.phases import announce

        announce(self.request, "trace")
        from jaxlsp.worker.tracing import jaxcompat

        # read here: the named axes of a surrounding vmap belong to this thread's JAX context
        axes = jaxcompat.bound_axes()
        mesh = jaxcompat.surrounding_mesh()  # so is the mesh of ``with jax.set_mesh(mesh):``
        own_caches = jaxcompat.own_caches()  # the target's own jit is in flight in this thread
        box: dict[str, WorkerResult] = {}

        def work() -> None:
            try:
                with own_caches(), mesh() if mesh is not None else contextlib.nullcontext():
                    box["result"] = self._trace(frame.f_globals, args, kwargs, callsite, axes)
            except CaptureError as exc:
                box["result"] = {"ok": False, "error": exc.info()}
            except MemoryError:
                box["result"] = {
                    "ok": False,
                    "error": {"kind": ErrorKind.MEMORY, "message": "the trace ran out of memory"},
                }
            except BaseException as exc:  # the worker's own failure: still a result
                box["result"] = {
                    "ok": False,
                    "error": {
                        "kind": ErrorKind.INTERNAL,
                        "message": f"the capture worker failed: {first_paragraph(exc)}",
                    },
                }

        thread = threading.Thread(target=work, name=_TRACE_THREAD, daemon=True)
        thread.start()
        thread.join()
        result: WorkerResult = box.get("result") or {
            "ok": False,
            "error": {"kind": ErrorKind.INTERNAL, "message": "no result"},
        }
        result.setdefault("timings", self.timings)
        deliver(self.request, result, self)

    def _callsite(self, frame: types.FrameType) -> CallSite:
        """The user's line that made the call: the innermost workspace frame outside the target."""
        here: types.FrameType | None = frame.f_back
        while here is not None:
            file = here.f_code.co_filename
            if self.workspace.contains(file) and not _in_jaxlsp(file):
                path, function = os.path.realpath(file), here.f_code.co_name
                cell = self.workspace.in_cell(file, here.f_lineno)
                if cell is not None:  # a notebook's module line: the cell, and the line in it
                    return {"path": path, "line": cell[1], "cell": cell[0], "function": function}
                return {"path": path, "line": here.f_lineno, "function": function}
            here = here.f_back
        return {"path": self.path, "line": frame.f_code.co_firstlineno, "function": frame.f_code.co_name}

    def _trace(
        self,
        namespace: dict[str, object],
        args: list[object],
        kwargs: dict[str, object],
        callsite: CallSite,
        axes: list[tuple[Hashable, int]],
    ) -> WorkerResult:
        """Trace the hooked call on abstract copies of its arguments, with ``axes`` (the named
        axes bound around the call, ``vmap(..., axis_name="batch")``) bound again."""
        import jax

        from jaxlsp.worker.core.phases import announce
        from jaxlsp.worker.examples import learned
        from jaxlsp.worker.loading import targets
        from jaxlsp.worker.loading.inputs import abstractify
        from jaxlsp.worker.program import requested
        from jaxlsp.worker.tracing.assemble import graph_from_jaxpr, graph_json

        t0 = time.perf_counter()
        profile: dict[str, object] = {"name": None, "device": self.request["profile"].get("device", "cpu")}
        profile.update(
            seed=int(self.request["profile"].get("seed", 0)), x64=bool(getattr(jax.config, "jax_enable_x64", False))
        )
        owner = _lookup(namespace, self.owner)
        plain_method = False  # a method of a class that is no module: no profile can rebuild its instance
        if self.method is None and not isinstance(owner, type) and targets.infer_kind(owner) == "function":
            kind = "function"
            # a function (infer_kind): callable
            obj: object = _untied(cast("Callable[..., object]", owner)) if owner is not None else None
            method = None
            call_args, call_kwargs = args, kwargs
        else:
            if not args:
                raise CaptureError("internal", f"the hooked method of {self.name} got no instance")
            instance, call_args, call_kwargs = args[0], args[1:], kwargs
            kind = targets.infer_kind(instance)
            method = None if self.method in (None, "__call__") else self.method
            obj = instance
            if kind == "function" and method is not None:
                # a plain class's method (``Solver.step``): traced as the method bound to the very
                # instance the run called it on (what the instance holds are the graph's constants)
                obj = types.MethodType(_untied(getattr(type(instance), method)), instance)
                plain_method = True
                method = None
            if kind == "linen":
                obj, streams, mutable = _unbound_linen(instance)
                if streams:
                    profile["rngs"] = streams
                if mutable:
                    profile["mutable"] = mutable
            if method is not None:
                profile["method"] = method
        if obj is None:
            raise CaptureError("internal", f"{self.name} is not defined in the module that was called")
        called = obj if kind == "function" else getattr(type(args[0]), self.method or "__call__", None)
        call_args, call_kwargs = without_defaults(called, list(call_args), dict(call_kwargs), kind != "function")
        call_args, call_kwargs = abstractify(call_args), abstractify(call_kwargs)
        made = targets.Construction(obj, kind != "function")
        # A call inside init draws a stream its caller did not give from the params stream (an
        # init with one key: Dropout takes "dropout" from it): targets.params_stream_serves.
        while True:
            try:
                plan = targets.make_plan(kind, made, profile, method, (call_args, call_kwargs))
                traced = targets.traceable(plan, call_args, call_kwargs, None)
                self.timings["init"] = time.perf_counter() - t0
                t0 = time.perf_counter()
                with jax.default_device(self.device) if self.device is not None else contextlib.nullcontext():
                    closed, out_shape = jax.make_jaxpr(traced.fn, axis_env=axes or None, return_shape=True)(
                        *traced.operands
                    )
                break
            except CaptureError:
                raise
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt | MemoryError):
                    raise
                stream = targets.params_stream_serves(kind, profile, exc)
                if stream is not None:
                    profile["rngs"] = [*cast("list[str]", profile.get("rngs", [])), stream]
                    continue
                where = f"{_relative(callsite['path'], self.workspace.root)}:{callsite['line']}"
                context = f"tracing {self.name} as called at {where} ({self.example['text']}) failed"
                raise from_exception("trace", exc, self.workspace, context) from None
        self.timings["trace"] = time.perf_counter() - t0
        limits.check_jaxpr(closed, self.request.get("limits"))
        announce(self.request, "build")
        table = (
            None
            if plain_method
            else learned.profile_table(
                kind,
                obj,
                self.inits.get(id(args[0])) if kind in ("nnx", "equinox") and args else None,
                call_args,
                call_kwargs,
                profile,
                self.path,
                self.name,
            )
        )
        # The graph file holds relative paths only: the example as written (relative to the root)
        # and the call's line relative to the root; the absolute ones go to the server beside it.
        root = self.workspace.root
        shown = {**callsite, "path": _relative(callsite["path"], root)}
        example = {"kind": self.example["kind"], "text": self.example["text"]}
        used = {**profile, "inputs": {}, "load": "module", "example": example, "callsite": shown}
        from jaxlsp.graph import collector

        files = {callsite["path"], self.example_file()}
        extra: dict[str, object] = {}
        with collector.paused():
            labels = targets.output_labels(plan, traced, out_shape)
            built, builder = graph_from_jaxpr(
                self.request, self.path, self.workspace, self.timings, time.perf_counter(), closed, labels,
                plan, traced, files, used, kind, extra,
            )  # fmt: skip
            requested.measure(self.request, built, builder, closed, traced, used, self.timings)
            graph = graph_json(built, self.request, self.timings)
        learned_profile: dict[str, object] = {"from": self.example["text"]}
        if table is not None:
            learned_profile["table"] = table
        result: WorkerResult = {"ok": True, "graph": graph, "callsite": dict(callsite), "learned": learned_profile}
        roots = extra.get("roots")
        if roots is not None:
            result["roots"] = cast("PathRoots", roots)  # assemble's {base, packages}
        return result

    def example_file(self) -> str:
        return str(self.example.get("path", ""))


_TRACE_THREAD = "jaxlsp-trace-at-first-call"


def _relative(path: str, root: str) -> str:
    try:
        return os.path.relpath(path, root) if root else path
    except ValueError:
        return path


def _in_jaxlsp(path: str) -> bool:
    return os.sep + os.path.join("jaxlsp", "capture", "worker") + os.sep in path


def _lookup(namespace: dict[str, object], parts: list[str]) -> object:
    obj = namespace.get(parts[0])
    for part in parts[1:]:
        obj = getattr(obj, part, None)
    return obj


def _untied(fn: Callable[..., object]) -> Callable[..., object]:
    """The target function as a fresh object: a ``jax.jit`` wrapper is traced through a new
    ``jax.jit`` of a copy of its function. The example's thread is paused inside the target's
    first trace, and JAX's jit cache holds that function's entry locked until the trace ends: the
    same wrapper traced here would wait on it forever (a deadlock, seen with ``@jax.jit def
    train_step`` in flax/examples/nnx_toy_examples). A copy is another cache key; it keeps the
    wrapper's static arguments (``static_argnums=3`` for a ``ctable`` in flax/examples/seq2seq)."""
    import inspect

    import jax

    raw = inspect.unwrap(fn)
    if raw is fn or not inspect.isfunction(raw):
        return fn
    copy = types.FunctionType(raw.__code__, raw.__globals__, raw.__name__, raw.__defaults__, raw.__closure__)
    copy.__kwdefaults__ = raw.__kwdefaults__
    copy.__qualname__ = raw.__qualname__
    copy.__module__ = raw.__module__
    jitted = type(fn).__module__.startswith(("jax", "jaxlib")) and hasattr(fn, "lower")
    if not jitted:
        return copy
    info = getattr(fn, "_jit_info", None)
    numbers = tuple(getattr(info, "static_argnums", ()) or ())
    names = tuple(getattr(info, "static_argnames", ()) or ())
    return jax.jit(copy, static_argnums=numbers or None, static_argnames=names or None)


def _unbound_linen(module: object) -> tuple[object, list[str], list[str] | bool | None]:
    """An unbound copy of a (bound) Linen module, with the rng streams and the mutable collections
    of the scope it was called in (``init`` makes every collection mutable)."""
    streams: list[str] = []
    mutable: list[str] | bool | None = None
    scope = getattr(module, "scope", None)
    if scope is None:
        return module, streams, mutable
    streams = sorted(str(k) for k in (getattr(scope, "rngs", None) or {}) if k != "params")
    given = getattr(scope, "mutable", False)
    initializing = bool(getattr(scope, "get_flag", lambda *_: False)("initializing", False))
    if initializing:
        mutable = True  # called inside init: traced as init runs it (targets._linen_initializing)
    elif given is True or type(given).__name__ == "DenyList":
        root = getattr(scope, "root", scope)
        mutable = sorted(str(c) for c in getattr(root, "_variables", {}) if c != "params") or True
    elif isinstance(given, str):
        mutable = [given]
    elif isinstance(given, list | tuple):
        mutable = [str(c) for c in given]
    clone_of: Callable[..., object] = getattr(module, "clone")  # a Linen module's  # noqa: B009
    try:
        clone = clone_of(parent=None, name=None, _deep_clone=True)
    except TypeError:
        clone = clone_of(parent=None, _deep_clone=True)
    return clone, streams, mutable


def deliver(request: WorkerRequest, result: WorkerResult, hook: Hook | None = None) -> None:
    """Send the result and end the process (a worker), or unwind the run (in-process)."""
    import json

    fd = request.get("resultFd")
    if not isinstance(fd, int) or fd < 0:
        if hook is not None:
            hook.result = result
        raise Delivered()
    data = json.dumps(result, allow_nan=False, separators=(",", ":")).encode("utf-8")
    data = limits.check_bytes(data, request.get("limits"))
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
        os.close(fd)
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(0)


def capture_at_first_call(
    request: WorkerRequest,
    workspace: Workspace,
    timings: dict[str, float],
    device: jax.Device | None,
    extra: dict[str, object],
) -> dict[str, object] | None:
    """Run the profile's example until the target's first call and trace that call; see the
    module docstring. Returns only in-process (or raises a :class:`CaptureError`)."""
    hook = Hook(request, workspace, timings, device)
    example = hook.example
    if not os.path.exists(str(example.get("path", ""))):
        raise CaptureError("example", f"running {example.get('text')}: no such file: {example.get('path')}")
    root = workspace.root or os.getcwd()
    os.chdir(root)  # as the user runs it: the workspace is the current folder
    previous = getattr(builtins, HOOK_NAME, None)
    setattr(builtins, HOOK_NAME, hook)
    finder = TargetFinder(hook)
    sys.meta_path.insert(0, finder)
    argv = sys.argv[:]
    from jaxlsp.worker.core.phases import announce

    announce(request, "run")
    try:
        with target_code(hook):
            outcome = run_example(example, hook, root)
    except Delivered:
        outcome = None
    finally:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(finder)
        if previous is None:
            with contextlib.suppress(AttributeError):
                delattr(builtins, HOOK_NAME)
        sys.argv[:] = argv
    if hook.result is not None:
        result = hook.result
        if not result.get("ok"):
            error = result.get("error")
            if error is None:  # a failed result names its error: never
                raise CaptureError("internal", "", None)
            raise CaptureError(error["kind"], str(error["message"]), error.get("frame"))
        extra.update(callsite=result.get("callsite"), learned=result.get("learned"), roots=result.get("roots"))
        graph: dict[str, object] = result["graph"]
        return graph
    raise _not_called(hook, outcome)


def _not_called(hook: Hook, outcome: tuple[str, BaseException | None, str] | None) -> CaptureError:
    text = hook.example["text"]
    what, exc, detail = outcome if outcome is not None else ("finished", None, "")
    hint = ""
    if hook.missing is not None:
        hint = (
            f"; {hook.name} has no {hook.missing} of its own or from a base: nothing calls it"
            ' (trace one of its methods: `method = "..."` in a profile)'
        )
    elif not hook.instrumented:
        hint = (
            f"; {hook.path} was never imported by the run, or {hook.name} is not defined there"
            if what == "finished"
            else ""
        )
    if exc is not None:
        error = from_exception(
            "example", exc, hook.workspace, f"running {text} failed before it called {hook.name}{detail}"
        )
        error.message += hint
        return error
    return CaptureError("example", f"running {text} {what} without calling {hook.name}{detail}{hint}")


def frame_of(exc: BaseException, workspace: Workspace) -> dict[str, object] | None:
    return user_frame_of(exc, workspace)
