"""Repeated Linen module calls traced once: a later call that repeats an earlier one replays its
equations instead of running its Python.

A language model's layers are one module class called N times, with equal fields, on values of
equal types, from one line of a loop. Tracing each call runs the same Flax and ``jax.numpy``
Python to stage the same equations, and that Python is most of a large model's trace (a 98-layer
decoder's ``make_jaxpr`` in the worker: 0.6 s, 0.09 s with replay). :class:`CallReplay`, a hook on
every Linen method call, records the equations the first call of a kind stages
(jaxcompat.segment: as data, holding no tracer) and, for a later call that matches it in
everything those equations depend on, stages them again on the later call's inputs
(jaxcompat.replay): the jaxpr a trace of that call gives, equation by equation, with the later
call's name stack and the tracebacks a trace of it records (the call stack above is part of the
match, so they are the same frames). Under ``jax.grad`` a call runs under jax's direct
linearization, which stages primal and tangent equations in two traces: both are recorded and
replayed, with the residuals the tangent trace takes in (jaxcompat.linear_segment). Inside a scan
body, a broadcast operand the body already took in counts as an input. Flax's ``nn.scan`` first
runs its body under jax's partial evaluation (to find the loop's invariant outputs; half a
scanned model's trace): there a call's operations on known values (a broadcast operand) stage
equations in the enclosing trace, which stay in the program, and those on unknown ones make the
evaluation's recipes; both are recorded and replayed (jaxcompat.partial_segment).

What a call's equations depend on, all of it matched (the key):
- the module's class and method, and every field but ``name`` and ``parent`` (hints.token:
  scalars by type and value, functions by code, globals and closure; an array or a dict field
  is no key, and the call runs);
- its arguments: the pytree structure, each traced value's type (shape, dtype, weak type,
  sharding), every other leaf by value; aliasing among the traced values; under a gradient, which
  have tangents and which primals the tangent trace already took in;
- the variables its scope sees (paths, structure, types), all of them traced values;
- jax's trace context and equation context, and the Python call stack above the call.

A call is never recorded or replayed when it could depend on more: its scope has RNG streams
(``make_rng`` folds the module's path into its key) or mutable collections (``sow``, batch
statistics, an init), it is ``setup`` or its class has one, it is the root module's call, a value
it reads is a constant or no input, it stages an effect or a new argument, or any class whose
method ran in it comes from a file that reads a module's identity or state that changes between
calls (:data:`IDENTITY`: ``self.name``, ``self.path``, ``self.scope``, ``self.parent``,
``global``, ``nonlocal``, Python's own random numbers, the clock). A target with a jaxtyping
contract check never replays (worker/process/trace.py: a replayed call would skip its checks). What stays
trusted is what the key cannot see: a module whose Python reads mutable state of another file. A
capture can turn replay off (the request's ``replay: false``, the CLI's ``--no-replay``).

With a structure hint (hints.HintCheck), a replayed call counts as reading the variables the call
it repeats read, at its own path: the key holds their types, which the recorded call's check
compared with their initialisers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from jaxlsp.worker.reuse.hints import HintCheck, token
from jaxlsp.worker.tracing import jaxcompat

if TYPE_CHECKING:
    import jax
    from flax.core.scope import Scope
    from flax.linen import Module
    from jax.extend.core import Var
    from jax.tree_util import PyTreeDef

#: Source that may make two calls of one module class with equal fields and inputs stage different
#: equations: a read of the module's identity, a global write, Python's random numbers, the clock.
IDENTITY = re.compile(
    r"\bself\.(?:name|path|scope|parent)\b"
    r"|\bgetattr\(\s*self\s*,"
    r"|\b(?:id|hash)\(\s*self\s*\)"
    r"|^\s*(?:global|nonlocal)\s+\w"
    r"|(?<![\w.])(?:np|numpy)\.random\."
    r"|(?<![\w.])random\.(?:random|randint|randrange|choice|choices|shuffle|sample|uniform|gauss|seed|getrandbits)\("
    r"|(?<![\w.])time\.(?:time|time_ns|perf_counter|monotonic|process_time)\(",
    re.M,
)

_MISSING = object()
#: A module method whose recorded call staged fewer equations is run by Flax from then on: keying
#: such a call (its variables, fields and call stack) costs about what tracing it does.
MIN_EQUATIONS = 12
#: ... and so is one whose calls could not be recorded this many times.
MAX_REFUSALS = 8


@dataclass
class _Entry:
    """A recorded call: its equations, its result's structure, the variables it read (as
    ``(collection, path below the module)``) and the classes whose methods ran in it."""

    segment: jaxcompat.Segment | jaxcompat.LinearSegment | jaxcompat.PartialSegment
    out_tree: PyTreeDef
    reads: list[tuple[str, tuple[str, ...]]]
    classes: frozenset[type]


#: The traces a call can be recorded and replayed under (jaxcompat): a staging trace, a gradient's
#: linearization, a partial evaluation over a staging trace.
STAGE, LINEAR, PARTIAL = "stage", "linear", "partial"


@dataclass
class _Call:
    key: tuple[object, ...]
    # the mode's trace: jax's DynamicJaxprTrace, LinearizeTrace or JaxprTrace, which only jaxcompat
    # may name (jax._src); each jaxcompat function of a mode takes its own
    trace: Any
    mode: str
    # the call's traced values: argument leaves, then its variables' leaves (under a gradient,
    # jaxcompat.linearized_input's tuples, in a partial evaluation partial_input's)
    inputs: list[object]
    originals: list[object]  # the values passed, in the same order (a scan body's input: an enclosing trace's)
    # their jaxpr variables, in the same order (under a gradient, the primals'; in a partial
    # evaluation, a known value's ``("k", id)`` too)
    variables: list[object]
    prefix: tuple[jaxcompat.NameItem, ...]  # the name stack the call's equations are staged under
    tangents: tuple[jaxcompat.NameItem, ...] | None = None  # under a gradient: the tangent equations' name stack


class CallReplay:
    """Records the equations of each kind of Linen module call once and replays them for the
    calls that repeat it (module docstring), called for every Linen method call while
    :func:`replaying` (:func:`install`). One per trace attempt: a thrown-away attempt's records
    go with it."""

    def __init__(self, linen: ModuleType, check: HintCheck | None = None) -> None:
        self.linen = linen  # flax.linen.module
        self.check = check
        self.entries: dict[tuple[object, ...], _Entry | None] = {}  # None: a call of this key is never replayed
        self.replayed = 0
        self._recording: list[set[type]] = []  # per call being recorded: the classes run in it
        self._files: dict[str, bool] = {}  # source file -> free of IDENTITY
        self._refused: dict[tuple[type, str], int] = {}  # (class, method) -> calls not recorded
        self._skip: set[tuple[type, str]] = set()  # run by Flax: small, or refused too often

    def call(
        self,
        original: Callable[..., object],
        module: Module,
        fun: Callable[..., object],
        args: tuple[object, ...],
        kwargs: dict[str, object],
    ) -> object:
        """``module``'s method ``fun`` called on ``args``: run by Flax (``original``), recorded,
        or replayed."""
        for classes in self._recording:
            classes.add(type(module))
        linen = self.linen
        try:
            method = linen._get_fn_name(fun)
            context = linen._context
            capturing = bool(context.capture_stack and context.capture_stack[-1])  # capture_intermediates
            plain = method != "setup" and module.scope is not None and not capturing and not context.call_info_stack
        except Exception:  # another Flax's machinery: Flax runs the call
            plain = False
        if not plain:
            return original(module, fun, args, kwargs)
        kind = (type(module), method)
        if kind in self._skip:
            return original(module, fun, args, kwargs)
        trace: object  # a staging trace, a linearization or a partial evaluation (mode)
        trace, mode = jaxcompat.staging_trace(), STAGE
        if trace is None:
            trace, mode = jaxcompat.linearize_trace(), LINEAR  # a gradient's forward pass
        if trace is None:
            trace, mode = jaxcompat.partial_trace(), PARTIAL  # nn.scan's first pass over its body
        if trace is None:  # a JVP, a vmap, eager evaluation: every call runs
            return original(module, fun, args, kwargs)
        call = self._call(trace, mode, module, method, args, kwargs)
        if call is None:
            self._refuse(kind)
            return original(module, fun, args, kwargs)
        own = linen._derive_profiling_name(module, fun) if linen._use_named_call else None  # install() checked both
        entry = self.entries.get(call.key, _MISSING)
        if entry is _MISSING:
            return self._record(call, kind, own, module, original, fun, args, kwargs)
        if entry is None:
            return original(module, fun, args, kwargs)
        assert isinstance(entry, _Entry)
        import jax

        if isinstance(entry.segment, jaxcompat.LinearSegment):
            assert call.tangents is not None
            inputs = cast("list[jaxcompat.LinearInput]", call.inputs)  # the mode's: linearized_input's
            outputs = jaxcompat.linear_replay(call.trace, entry.segment, inputs, call.prefix, call.tangents, own)
        elif isinstance(entry.segment, jaxcompat.PartialSegment):
            partial = cast("list[jaxcompat.PartialInput]", call.inputs)  # the mode's: partial_input's
            outputs = jaxcompat.partial_replay(call.trace, entry.segment, partial, call.prefix, own)
        else:
            outputs = jaxcompat.replay(call.trace, entry.segment, call.inputs, call.prefix, own, call.originals)
        for classes in self._recording:
            classes.update(entry.classes)
        if self.check is not None and entry.reads:
            base = tuple(cast("Scope", module.scope).path)  # a plain call's module is bound
            self.check.note_reads([(col, *base, *rest) for col, rest in entry.reads])
        self.replayed += 1
        return jax.tree_util.tree_unflatten(entry.out_tree, outputs)

    def _call(
        self, trace: Any, mode: str, module: Module, method: str, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> _Call | None:
        """The call's key and inputs in ``trace`` (of the kind ``mode`` names), or None when it is
        neither recorded nor replayed."""
        import jax

        try:
            scope = cast("Scope", module.scope)  # unbound (None): AttributeError, the call runs
            if (
                scope.parent is None
                or scope.rngs
                or scope.mutable
                or getattr(type(module), "_compact_name_scope_methods")  # noqa: B009  # not in Flax's stubs
            ):
                return None
            if type(module).setup is not self.linen.Module.setup:
                return None  # a setup runs inside the call (and reads variables) the first time only
        except Exception:  # another Flax's scopes
            return None
        context = jaxcompat.staging_context()
        prefix = jaxcompat.current_name_stack()
        if context is None or prefix is None:
            return None
        try:
            leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
            inputs: list[object] = []
            originals: list[object] = []
            variables: list[object] = []
            statics: list[object] = []
            for leaf in leaves:
                staged = self._input(leaf, trace, mode)
                if staged is not None:
                    originals.append(leaf)
                    inputs.append(staged[0])
                    variables.append(staged[1])
                    statics.append(staged[2])
                elif isinstance(leaf, jax.core.Tracer | self.linen.Module):
                    return None  # a constant, a value of a trace not taken in yet, a module
                else:
                    statics.append(token(leaf))
            pairs, variables_tree = jax.tree_util.tree_flatten_with_path(module.variables)
            for path, leaf in pairs:
                staged = self._input(leaf, trace, mode)
                if staged is None:
                    return None
                originals.append(leaf)
                inputs.append(staged[0])
                variables.append(staged[1])
                statics.append((jax.tree_util.keystr(path), staged[2]))
            first: dict[object, int] = {}
            aliases = tuple(first.setdefault(var, i) for i, var in enumerate(variables))
            if mode == LINEAR:  # which inputs share a tangent, too
                seen: dict[object, int] = {}
                linearized = cast("list[jaxcompat.LinearInput]", inputs)  # the mode's: linearized_input's
                aliases += tuple(
                    -1 if item[3] is None else seen.setdefault(item[3], i) for i, item in enumerate(linearized)
                )
            fields = []
            for f in dataclasses.fields(module):
                if f.name in ("parent", "name"):
                    continue
                value = getattr(module, f.name)
                if _holds_module(value, self.linen.Module):
                    return None  # a submodule passed in: its scope is another module's
                fields.append((f.name, token(value)))
            key: tuple[object, ...] = (type(module), method, tuple(fields), tree, variables_tree, tuple(statics))
            key += (aliases, context, mode)
            if mode == PARTIAL:  # over a staging trace or a gradient's linearization
                key += (type(trace.parent_trace),)
            tangents: tuple[jaxcompat.NameItem, ...] | None = None
            if mode == LINEAR:
                tangents = jaxcompat.tangent_prefix(trace)
                key += (trace.is_vjp, len(prefix) - len(tangents))
            hash(key)
        except Exception:  # no key for a field or an argument (an array, a dict), or another Flax
            return None
        return _Call(key, trace, mode, inputs, originals, variables, prefix, tangents)

    @staticmethod
    def _input(leaf: object, trace: Any, mode: str) -> tuple[object, object, object] | None:
        """``(input, its variable, its part of the key)`` for a traced value, None for another."""
        if mode == PARTIAL:
            partial = jaxcompat.partial_input(leaf, trace)
            aval = (
                cast("jax.core.Tracer[jax.core.Trace]", leaf).aval if partial is not None else None
            )  # an input: a tracer
            return None if partial is None else (partial, partial[2], (aval, partial[3]))
        if mode == STAGE:
            staged = jaxcompat.staged_input(leaf, trace)
            # an enclosing trace's value the body took in is a constant there (jax may fold
            # operations on it), its own value not: two keys
            return None if staged is None else (staged[0], staged[1], (staged[0].aval, staged[0] is not leaf))
        got = jaxcompat.linearized_input(leaf, trace)
        if got is None:
            return None
        primal, var, tangent, _, lifted = got
        return got, var, (primal.aval, None if tangent is None else tangent.aval, lifted)

    def _record(
        self,
        call: _Call,
        kind: tuple[type, str],
        own: str | None,
        module: Module,
        original: Callable[..., object],
        fun: Callable[..., object],
        args: tuple[object, ...],
        kwargs: dict[str, object],
    ) -> object:
        import jax

        check = self.check
        mark: object  # the mode's (jaxcompat's marks differ by mode)
        if call.mode == LINEAR:
            mark = jaxcompat.linear_mark(call.trace)
        elif call.mode == PARTIAL:
            mark = jaxcompat.partial_mark(call.trace)
        else:
            mark = jaxcompat.frame_mark(call.trace)
        before = (len(check.reads), check.created, len(check.repairs)) if check is not None else None
        classes: set[type] = {type(module)}
        self._recording.append(classes)
        try:
            out = original(module, fun, args, kwargs)
        finally:
            self._recording.pop()
        for outer in self._recording:
            outer.update(classes)
        entry: _Entry | None = None
        outputs, out_tree = jax.tree_util.tree_flatten(out)
        reads = self._reads(module, before)
        if reads is not None and all(self._identity_free(cls) for cls in classes):
            segment: jaxcompat.Segment | jaxcompat.LinearSegment | jaxcompat.PartialSegment | None
            if call.tangents is not None:
                segment = jaxcompat.linear_segment(
                    call.trace,
                    cast("jaxcompat.LinearMark", mark),
                    cast("list[jaxcompat.LinearInput]", call.inputs),  # the mode's: linearized_input's
                    outputs,
                    call.prefix,
                    call.tangents,
                    own,
                )
                size = 0 if segment is None else len(segment.primal) + len(segment.tangent)
            elif call.mode == PARTIAL:
                partial = jaxcompat.partial_segment(
                    call.trace,
                    cast("jaxcompat.PartialMark", mark),
                    cast("list[jaxcompat.PartialInput]", call.inputs),  # the mode's: partial_input's
                    outputs,
                    call.prefix,
                    own,
                )
                segment = partial
                size = 0 if partial is None else len(partial.known) + len(partial.unknown)
            else:
                segment = jaxcompat.segment(
                    call.trace,
                    cast("jaxcompat.FrameMark", mark),
                    cast("list[Var]", call.variables),  # a staging trace's: its inputs' variables
                    outputs,
                    call.prefix,
                    own,
                    call.originals,
                )
                size = 0 if segment is None else len(segment.eqns)
            if segment is not None and size < MIN_EQUATIONS:
                self._skip.add(kind)
            elif segment is not None:
                entry = _Entry(segment, out_tree, reads, frozenset(classes))
        if entry is None:
            self._refuse(kind)
        self.entries[call.key] = entry
        return out

    def _refuse(self, kind: tuple[type, str]) -> None:
        count = self._refused[kind] = self._refused.get(kind, 0) + 1
        if count >= MAX_REFUSALS:
            self._skip.add(kind)

    def _reads(self, module: Module, before: tuple[int, bool, int] | None) -> list[tuple[str, tuple[str, ...]]] | None:
        """The hinted variables the call read, below its own path; None when the call created or
        repaired one (that trace is thrown away or checked again) or read one outside its scope."""
        check = self.check
        if check is None or before is None:
            return []
        if check.created or len(check.repairs) != before[2]:
            return None
        base = tuple(cast("Scope", module.scope).path)  # a plain call's module is bound
        out: list[tuple[str, tuple[str, ...]]] = []
        for path in check.reads[before[0] :]:
            if tuple(path[1 : 1 + len(base)]) != base:
                return None
            out.append((path[0], tuple(path[1 + len(base) :])))
        return out

    def _identity_free(self, cls: type) -> bool:
        """Whether no class in ``cls``'s MRO comes from a file that matches :data:`IDENTITY`
        (Flax's ``Module`` itself excepted: its machinery is what names and scopes calls)."""
        for klass in cls.__mro__:
            if klass is object or klass.__module__ in ("flax.linen.module", "typing", "abc"):
                continue
            try:
                path = inspect.getsourcefile(klass)
            except TypeError:
                return False
            if path is None:
                return False
            known = self._files.get(path)
            if known is None:
                try:
                    with open(path, encoding="utf-8", errors="replace") as handle:
                        known = IDENTITY.search(handle.read()) is None
                except OSError:
                    known = False
                self._files[path] = known
            if not known:
                return False
        return True


def _holds_module(value: object, module_type: type, depth: int = 0) -> bool:
    if isinstance(value, module_type):
        return True
    if depth < 4 and isinstance(value, tuple | list):
        return any(_holds_module(item, module_type, depth + 1) for item in value)
    if depth < 4 and isinstance(value, dict):
        return any(_holds_module(item, module_type, depth + 1) for item in value.values())
    return False


_ACTIVE: list[CallReplay] = []  # the replay of the trace in progress (one at a time: a capture is one thread)
_INSTALLED: list[Callable[..., object]] = []  # Flax's own _call_wrapped_method, once ours replaced it


def install() -> bool:
    """Put :class:`CallReplay`'s hook in front of Flax's ``Module._call_wrapped_method`` for good
    (it calls Flax's own when no replay is active): once a process, by the warm spare before it
    forks (worker/process/warm.py ``warm``), so that a capture changes no Flax class. False when this
    Flax's module machinery is not the one known (every call is then traced)."""
    if _INSTALLED:
        return True
    try:
        from flax.linen import module as linen
    except ImportError:
        return False
    module_type: object = getattr(linen, "Module", None)
    original = module_type.__dict__.get("_call_wrapped_method") if isinstance(module_type, type) else None
    known = ("_get_fn_name", "_context", "_derive_profiling_name", "_use_named_call")
    if original is None or not all(hasattr(linen, name) for name in known):
        return False

    def _call_wrapped_method(
        self: Module, fun: Callable[..., object], args: tuple[object, ...], kwargs: dict[str, object]
    ) -> object:
        if not _ACTIVE:
            return original(self, fun, args, kwargs)
        return _ACTIVE[-1].call(original, self, fun, args, kwargs)

    replaced = cast("type[Module]", module_type)  # checked above: a class with that method
    replaced._call_wrapped_method = _call_wrapped_method  # type: ignore[method-assign]  # for good (once a process)
    _INSTALLED.append(original)
    return True


@contextlib.contextmanager
def replaying(check: HintCheck | None = None) -> Iterator[CallReplay | None]:
    """Within the block, repeated Linen module calls replay (None: a Flax whose module machinery
    this does not know; every call is traced)."""
    if not install():
        yield None
        return
    from flax.linen import module as linen

    replay = CallReplay(linen, check)
    _ACTIVE.append(replay)
    try:
        yield replay
    finally:
        _ACTIVE.remove(replay)
