"""Structure hints: a Linen re-trace on the variables structure the last capture's init gave.

:func:`variables_structure` spells a Linen variables tree as JSON (shapes, dtypes, weak types and
Flax's partitioning boxes), the hint a capture leaves for the next; :func:`from_structure` reads
it back. :class:`HintCheck` checks, as the trace reads each hinted variable, that an init of the
model as it is now would give the same, and repairs variables of other shapes; the capture
(worker/process/trace.py) initialises for real whenever a hint neither holds nor is repaired.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    import jax
    from flax.core.meta import Partitioned
    from flax.core.scope import Scope

#: An initialiser's call as :class:`HintCheck` caches its output: the initialiser's token, its
#: arguments' and keyword arguments' tokens (:func:`token`), whether it takes a key first.
InitKey = tuple[object, object, object, bool]


class HintStale(Exception):
    """The hinted variables are not what an init of the model as it is now would make."""


_RESHAPING_LIFTS = ("scan(", "vmap(", "map_variables(")  # Flax's lift names in a debug path


class HintRepaired(Exception):
    """A repairing trace (:attr:`HintCheck.repair`) met parameters the hint did not have, or
    variables it had with other shapes, and carried on with the shapes their initialisers give:
    ``structure`` is the hint with those, to trace with again (the trace that met them is no
    graph)."""

    def __init__(self, structure: object, repaired: list[str]) -> None:
        super().__init__(", ".join(repaired))
        self.structure = structure


class HintCheck:
    """Checks, while a Linen ``apply`` is traced on hinted variables, that they are the ones
    ``jax.eval_shape(model.init)`` of the model as it is now would give, without running that init
    (a whole forward pass more, the size of the trace itself).

    Each parameter or variable the call reads is compared (shape, dtype, weak type) with its own
    initialiser's abstract output, as Flax's ``Scope.param`` compares shapes, with the outputs
    cached by initialiser and arguments (a transformer's thousand parameters come from a handful
    of distinct ones); a mismatch stops the trace at once (:class:`HintStale`). After the trace,
    :meth:`held` is true only when the call read every hinted leaf and created none: an init makes
    exactly the variables its call reads, so anything else (a layer removed, a new one, a variable
    only ``init`` touches, a read without an initialiser) is not known to match, and the caller
    then initialises for real.

    With :attr:`repair` a parameter that does not match, or is not in the hint, and a hinted
    variable of another collection that does not match (a BatchNorm's statistics after a width
    edit) do not stop the trace: the call goes on with zeros of the shape their initialisers give
    (the trace is then thrown away, :meth:`repaired_structure`), so that an edit of a width or a
    dtype, or a layer added, costs a second trace instead of a real init and a trace. Only
    initialisers that give an array, plain or in a partitioning box the structure spells
    (:func:`variables_structure`), are repaired; a weak-typed output, a variable of another
    collection the hint lacks (it may be one only ``apply`` makes, which is no input), and
    anything inside ``nn.scan``, ``nn.vmap`` or ``nn.map_variables`` still stop it (inside
    ``nn.remat`` or ``nn.jit`` is repaired); the second trace checks the repaired hint as
    strictly as any: a repair can cost time, never a wrong graph."""

    def __init__(self, structure: object, repair: bool = False) -> None:
        self.structure = structure
        self.expected = frozenset(_leaf_paths(structure, ()))
        self.seen: set[tuple[str, ...]] = set()
        self.reads: list[
            tuple[str, ...]
        ] = []  # the leaves read, in order (a replayed call's share, worker/reuse/replay.py)
        self.created = False
        self.repair = repair
        # leaf path -> the ShapeDtypeStruct it needs (or a partitioning box of one)
        self.repairs: dict[tuple[str, ...], object] = {}
        # initialiser key -> its abstract output; the attempts of one capture share it (a repair's
        # second trace reads the same initialisers as the first)
        self.outputs: dict[InitKey, object] = {}
        # id -> (initialiser, kept; token; stable)
        self._fn_tokens: dict[int, tuple[Callable[..., object], object, str | None]] = {}
        self.initialisers_run = 0  # the abstract runs of initialisers the cache could not spare
        # library initialisers' outputs from the last capture of the target, and this one's
        # (stable_key -> [shape, dtype, weak type]): spared the abstract runs of each capture
        self.carried: Mapping[str, object] = {}
        self.learned: dict[str, list[object]] = {}
        self._carried_keys: set[InitKey] = set()  # keys of :attr:`outputs` that came from :attr:`carried`

    def held(self) -> bool:
        return not self.created and not self.repairs and self.seen == self.expected

    def repaired_structure(self) -> object:
        """The hint with the repaired variables' shapes, when the trace repaired some and read
        every other hinted leaf (a leaf left unread may be a layer removed or a variable only
        ``init`` makes: not known, so no structure); else None."""
        if not self.repairs or self.created or not self.expected <= self.seen | self.repairs.keys():
            return None
        out = copy.deepcopy(self.structure)
        for path, want in self.repairs.items():
            at = cast("dict[str, object]", out)  # a hint that held this far: a mapping of collections
            for key in path[:-1]:
                inner = at.setdefault(key, {})
                if not isinstance(inner, dict):
                    return None
                at = inner
            at[path[-1]] = variables_structure(want)
        return out

    def substitute(
        self,
        scope: Scope,
        name: str,
        init_fn: Callable[..., object],
        args: Sequence[object],
        kwargs: Mapping[str, object],
        col: str = "params",
        keyed: bool = True,
    ) -> object:
        """For a repairing trace: zeros of the shape ``init_fn`` gives the variable ``col``/``name``
        of ``scope`` (a parameter's initialiser takes a key first), noted as a repair;
        :class:`HintStale` when it is not an array's, plain or boxed."""
        import jax

        where = f"{col}/{'/'.join((*scope.path, name))}"
        # Inside a lifted transform that reshapes variables (nn.scan, nn.vmap, nn.map_variables)
        # the hint holds the stacked parameter, its initialiser one slice of it. Flax names each
        # lift around the module it wraps in the debug path ("scan(ScanBlock_0)"), all of them
        # (a remat inside a scan: "scan(Stage_0)", "remat(Block_0)"); a Flax without debug paths
        # is trusted outside lifts only.
        debug = getattr(scope, "debug_path", None)
        if scope.root.path if debug is None else any(lift in str(part) for part in debug for lift in _RESHAPING_LIFTS):
            raise HintStale(where)
        want, _ = self._initialised(init_fn, args, kwargs, keyed, carried=False)
        leaf = variables_structure(want) if not isinstance(want, Mapping) else None
        if not isinstance(leaf, list) or leaf[2]:  # a tree, symbolic, weak-typed, another box: not repaired
            raise HintStale(where)
        self.repairs[(col, *scope.path, name)] = want
        if isinstance(want, jax.ShapeDtypeStruct):
            return jax.lax.full(want.shape, 0, want.dtype)
        box = cast("Partitioned[jax.ShapeDtypeStruct]", want)  # variables_structure spelled a box of one
        return box.replace_boxed(jax.lax.full(box.value.shape, 0, box.value.dtype))

    def verify(
        self,
        scope: Scope,
        col: str,
        name: str,
        init_fn: Callable[..., object],
        args: Sequence[object],
        kwargs: Mapping[str, object],
        keyed: bool,
    ) -> None:
        """Compare the hinted ``col``/``name`` of ``scope`` with ``init_fn``'s abstract output."""
        import jax

        value = scope.get_variable(col, name)
        got_leaves, got_tree = jax.tree_util.tree_flatten(value)

        def differs(want: object) -> bool:
            want_leaves, want_tree = jax.tree_util.tree_flatten(want)
            return cast(object, got_tree) != want_tree or any(
                _aval(a) != _aval(b) for a, b in zip(got_leaves, want_leaves, strict=True)
            )

        # a carried output only ever confirms a match: a mismatch is the initialiser's own to say
        want, carried = self._initialised(init_fn, args, kwargs, keyed)
        if differs(want) and carried:
            want, _ = self._initialised(init_fn, args, kwargs, keyed, carried=False)
        if differs(want):
            raise HintStale(f"{col}/{'/'.join((*scope.path, name))}")
        self.note_reads(list(_leaf_paths(value, (col, *scope.path, name))))

    def note_reads(self, paths: list[tuple[str, ...]]) -> None:
        """Hinted leaves read and checked (or, for a replayed call, read by the call it repeats)."""
        self.seen.update(paths)
        self.reads.extend(paths)

    def _initialised(
        self,
        init_fn: Callable[..., object],
        args: Sequence[object],
        kwargs: Mapping[str, object],
        keyed: bool,
        carried: bool = True,
    ) -> tuple[object, bool]:
        """``init_fn``'s abstract output on ``args``, and whether it is the last capture's
        (:attr:`carried`, taken only when ``carried``); else cached per capture, or run under
        ``jax.eval_shape``."""
        import jax

        def run() -> object:
            return init_fn(jax.random.key(0), *args, **kwargs) if keyed else init_fn(*args, **kwargs)

        try:
            known = self._fn_tokens.get(id(init_fn))  # most reads share their initialiser object
            if known is None or known[0] is not init_fn:
                known = self._fn_tokens[id(init_fn)] = (init_fn, token(init_fn), library_function(init_fn))
            key: InitKey | None = (known[1], token(tuple(args)), token(tuple(sorted(kwargs.items()))), keyed)
            hash(key)
        except (TypeError, ValueError):  # arrays among the arguments, a mutable closure: not cached
            key, known = None, None
        if key is not None and key in self.outputs and (carried or key not in self._carried_keys):
            return self.outputs[key], key in self._carried_keys
        stable = None if known is None or known[2] is None else stable_key(known[2], args, kwargs, keyed)
        out = _carried(self.carried.get(stable)) if stable is not None and carried else None
        taken = out is not None
        if taken:
            if key is not None:
                self._carried_keys.add(key)
        else:
            if key is not None:
                self._carried_keys.discard(key)
            self.initialisers_run += 1
            out = jax.eval_shape(run)
        if stable is not None and type(out) is jax.ShapeDtypeStruct and out.sharding is None:
            self.learned[stable] = [list(out.shape), out.dtype.name, bool(out.weak_type)]
        if key is not None:
            self.outputs[key] = out
        return out, taken

    @contextlib.contextmanager
    def checking(self) -> Iterator[None]:
        """Flax's ``Scope.param`` and ``Scope.variable`` checking each hinted variable they read."""
        try:
            from flax.core import meta
            from flax.core.scope import Scope
        except ImportError:
            raise HintStale("flax.core.scope") from None
        param_, variable_ = Scope.__dict__.get("param"), Scope.__dict__.get("variable")
        if param_ is None or variable_ is None:
            raise HintStale("another Flax")
        check = self

        def param(
            self: Scope,
            name: str,
            init_fn: Callable[..., object],
            *init_args: object,
            unbox: bool = True,
            **init_kwargs: object,
        ) -> object:
            if not self.has_variable("params", name):
                if check.repair:
                    self.reserve(name, "params")
                    value = check.substitute(self, name, init_fn, init_args, init_kwargs)
                    return meta.unbox(value) if unbox else value
                check.created = True
                return param_(self, name, init_fn, *init_args, unbox=unbox, **init_kwargs)
            self.reserve(name, "params")
            try:
                check.verify(self, "params", name, init_fn, init_args, init_kwargs, True)
                value = self.get_variable("params", name)
            except HintStale:
                if not check.repair:
                    raise
                value = check.substitute(self, name, init_fn, init_args, init_kwargs)
            return meta.unbox(value) if unbox else value  # as Flax's own param: a box's constraint

        def variable(
            self: Scope,
            col: str,
            name: str,
            init_fn: Callable[..., object] | None = None,
            *init_args: object,
            **kwargs: object,
        ) -> object:
            if not self.has_variable(col, name):
                check.created = True
            elif init_fn is not None:
                rest = {k: v for k, v in kwargs.items() if k != "unbox"}
                try:
                    check.verify(self, col, name, init_fn, init_args, rest, False)
                except HintStale:
                    # Only a hinted variable of another shape (a width feeding a BatchNorm):
                    # one the hint lacks may be one only ``apply`` makes, never an input.
                    if not check.repair:
                        raise
                    value = check.substitute(self, name, init_fn, init_args, rest, col=col, keyed=False)
                    return _Substitute(value, bool(kwargs.get("unbox", True)), meta.unbox)
            return variable_(self, col, name, init_fn, *init_args, **kwargs)

        Scope.param = param  # type: ignore[method-assign,assignment]  # replaced for the block only
        Scope.variable = variable  # type: ignore[method-assign,assignment]
        try:
            yield
        finally:
            Scope.param = param_  # type: ignore[method-assign]
            Scope.variable = variable_  # type: ignore[method-assign]


class _Substitute:
    """A repaired variable (``Scope.variable``'s stand-in) for a trace that is thrown away: it reads
    zeros of its initialiser's shape and keeps what the module writes to it, as Flax's ``Variable``
    would in a mutable collection, without touching the scope."""

    def __init__(self, value: object, unbox: bool, unboxing: Callable[[object], object]) -> None:
        self._value = value
        self._unbox = unboxing if unbox else None

    @property
    def value(self) -> object:
        return self._value if self._unbox is None else self._unbox(self._value)

    @value.setter
    def value(self, value: object) -> None:
        self._value = value

    def is_mutable(self) -> bool:
        return True


class _Same:
    """An object as a cache key by identity (its own ``__eq__`` may say a class equals a dtype)."""

    __slots__ = ("obj",)

    def __init__(self, obj: object) -> None:
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


def token(x: object, depth: int = 0) -> object:
    """A hashable key for ``x`` as an initialiser or one of its arguments (or a module's field,
    worker/reuse/replay.py), equal to another's only when the two give the same output: scalars and
    strings by type and value, tuples item by
    item, a Python function by its code, globals, defaults and closure (Flax's partitioning
    wrappers and a module's inline ``lambda`` are new function objects at every call, the same
    function each time), ``functools.partial`` by its parts, classes and plain objects by
    identity, a dataclass (a Flax module, a config) by its type and fields but its parent; a list
    by its items now, as the initialiser is run now; TypeError for anything else (an array, a
    dict), never cached. An initialiser is taken to be a function of its arguments, code and
    closure, as Flax's own shape check takes it."""
    if x is None or type(x) in (bool, int, float, complex, str, bytes):
        return (type(x), x)
    if type(x) in (tuple, list):  # a list's items as they are now: the initialiser runs now
        if depth >= 8:
            raise TypeError("too deep to key")
        return (type(x), *(token(item, depth + 1) for item in cast("Sequence[object]", x)))
    if depth < 8 and type(x) is types.FunctionType:
        cells = tuple(cell.cell_contents for cell in x.__closure__ or ())  # an empty cell: ValueError
        return (
            types.FunctionType,
            x.__code__,
            id(x.__globals__),
            token(x.__defaults__, depth + 1),
            token(tuple(sorted((x.__kwdefaults__ or {}).items())), depth + 1),
            token(cells, depth + 1),
        )
    if depth < 8 and type(x) is functools.partial:
        keywords = tuple(sorted(x.keywords.items()))
        return (functools.partial, token(x.func, depth + 1), token(x.args, depth + 1), token(keywords, depth + 1))
    kind = type(x)
    if isinstance(x, type) or (kind.__eq__ is object.__eq__ and kind.__hash__ is object.__hash__):
        return _Same(x)
    if depth < 8 and dataclasses.is_dataclass(x):  # Flax's DenseGeneral wraps its init in a closure of self
        fields = ((f.name, token(getattr(x, f.name), depth + 1)) for f in dataclasses.fields(x) if f.name != "parent")
        return (type(x), *fields)
    import numpy as np

    if isinstance(x, np.dtype):
        return (np.dtype, x.str, x.name)
    raise TypeError(f"no cache key for {type(x).__name__}")


# -- Library initialisers' outputs, carried from one capture to the next ------------------------------

#: The packages whose initialisers' outputs a capture may take from the last one: their code does
#: not change while a server runs them (the key holds their versions), and their initialisers are
#: functions of their arguments and closures (a workspace's own may read globals an edit changes).
_LIBRARIES = ("jax", "flax")
_LIBRARY_DIRS: list[str] = []


def _library_dirs() -> list[str]:
    if not _LIBRARY_DIRS:
        import importlib.util
        import os

        for name in _LIBRARIES:
            spec = importlib.util.find_spec(name)
            for place in (spec.submodule_search_locations or []) if spec is not None else []:
                # a code object's file is spelled as it was imported: the real path, or through a link
                _LIBRARY_DIRS.extend({os.path.join(place, ""), os.path.join(os.path.realpath(place), "")})
    return _LIBRARY_DIRS


def library_function(fn: object, depth: int = 0) -> str | None:
    """A stable spelling of an initialiser defined in jax or Flax, with its defaults and closure
    (``lecun_normal()`` is ``variance_scaling``'s inner function over its scale, mode and
    distribution), as text another process spells the same; None for any other function or a
    closure over anything but numbers, text, dtypes and such functions."""
    import json

    try:
        if type(fn) is not types.FunctionType:
            return None
        return json.dumps(_spelled(fn, depth, 6, functions=True), separators=(",", ":"))
    except (TypeError, ValueError, AttributeError):
        return None


def _spelled(x: object, depth: int, limit: int, functions: bool = False) -> object:
    """``x`` as JSON data another process spells the same: numbers, text, None, dtypes, tuples and
    lists of them to ``limit`` levels, and with ``functions`` a library's function by module, name
    and line with its defaults and closure; TypeError for anything else."""
    if x is None or type(x) in (bool, int, float, str):
        return [type(x).__name__, x]
    if type(x) in (tuple, list) and depth < limit:
        return [type(x).__name__, [_spelled(item, depth + 1, limit, functions) for item in cast("Sequence[object]", x)]]
    if functions and type(x) is types.FunctionType and depth < limit:
        code = x.__code__
        if not any(code.co_filename.startswith(d) for d in _library_dirs()):
            raise TypeError("no library function")
        cells = [cell.cell_contents for cell in x.__closure__ or ()]
        kwdefaults = sorted((x.__kwdefaults__ or {}).items())
        return [
            "fn",
            f"{x.__module__}:{code.co_qualname}:{code.co_firstlineno}",
            _spelled(x.__defaults__, depth + 1, limit, functions),
            [[k, _spelled(v, depth + 1, limit, functions)] for k, v in kwdefaults],
            [_spelled(c, depth + 1, limit, functions) for c in cells],
        ]
    dtype = _dtype_name(x)
    if dtype is not None:
        return ["dtype", dtype]
    raise TypeError(f"no stable spelling for {type(x).__name__}")


def _dtype_name(x: object) -> str | None:
    """The dtype ``x`` names, when it is a numpy dtype or a scalar type (``jnp.float32``)."""
    import numpy as np

    if isinstance(x, np.dtype):
        return x.name
    if isinstance(x, type) and (issubclass(x, np.generic) or hasattr(x, "dtype")):
        try:
            return np.dtype(getattr(x, "dtype", x)).name
        except TypeError:
            return None
    return None


def stable_key(function: str, args: Sequence[object], kwargs: Mapping[str, object], keyed: bool) -> str | None:
    """The key of a library initialiser's call on ``args`` (a shape, a dtype) as the next capture
    spells it too, with the libraries' versions; None for arguments with no stable spelling."""
    import json

    try:
        from jaxlsp.worker.core.versions import versions

        spelled = [_spelled(tuple(args), 0, 4), [[k, _spelled(v, 0, 4)] for k, v in sorted(kwargs.items())], keyed]
        return json.dumps([sorted(versions().items()), function, spelled], separators=(",", ":"))
    except (TypeError, ValueError):
        return None


def _carried(entry: object) -> jax.ShapeDtypeStruct | None:
    """A carried output ``[shape, dtype, weak type]`` as the abstract value it stands for; None
    when it is not one (a garbled request)."""
    import numpy as np

    try:
        shape, dtype, weak = cast("Sequence[object]", entry)  # else TypeError: no such entry
        if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            return None
        if type(weak) is not bool or not isinstance(dtype, str):
            return None
        return _shape_dtype_struct()(tuple(shape), np.dtype(dtype), weak_type=weak)
    except (TypeError, ValueError):
        return None


def _aval(x: object) -> tuple[tuple[int, ...], str, bool]:
    return (tuple(getattr(x, "shape", ())), str(getattr(x, "dtype", type(x))), bool(getattr(x, "weak_type", False)))


def _leaf_paths(tree: object, prefix: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """The key paths of a variables tree's leaves (nested mappings; any other value is a leaf)."""
    if isinstance(tree, Mapping):
        for key, sub in tree.items():
            yield from _leaf_paths(sub, (*prefix, str(key)))
    else:
        yield prefix


def variables_structure(tree: object) -> object:
    """A Linen variables tree as JSON: nested objects of ``[shape, dtype, weak]`` leaves, a boxed
    variable (``nn.Partitioned``, ``nn.LogicallyPartitioned``: how ``nn.with_partitioning`` and
    ``nn.with_logical_partitioning`` declare shardings) as ``[shape, dtype, weak, box]``
    (:func:`_box_json`); None when it holds anything else (another box, one with its own mesh,
    symbolic sizes), which is then never hinted."""
    import jax

    if isinstance(tree, Mapping):
        out: dict[str, object] = {}
        for key, sub in tree.items():
            leaf = variables_structure(sub)
            if not isinstance(key, str) or leaf is None:
                return None
            out[key] = leaf
        return out
    if isinstance(tree, jax.ShapeDtypeStruct) and all(type(d) is int for d in tree.shape):
        return [list(tree.shape), str(tree.dtype), bool(getattr(tree, "weak_type", False))]
    box = _box_json(tree)
    if box is not None:
        leaf = variables_structure(cast("Partitioned[object]", tree).value)
        if isinstance(leaf, list):
            return [*leaf, box]
    return None


def _boxes() -> dict[str, type]:
    """Flax's partitioning boxes by name, the ones a structure spells (none without Flax)."""
    try:
        from flax.core.meta import Partitioned
        from flax.linen.spmd import LogicallyPartitioned
    except ImportError:
        return {}
    return {"Partitioned": Partitioned, "LogicallyPartitioned": LogicallyPartitioned}


_BOX_FIELDS = {"Partitioned": ("value", "names", "mesh"), "LogicallyPartitioned": ("value", "names", "mesh", "rules")}


def _box_json(x: object) -> dict[str, object] | None:
    """A partitioning box's metadata as JSON (``{"box", "names", "rules"}``), when ``x`` is exactly
    one of Flax's two (a subclass may mean more), with the fields this Flax has always had and no
    mesh of its own (a mesh object is no JSON); else None. The metadata is part of the box's
    pytree structure, which the hint check compares, so it must come back equal, tuples as
    tuples: :func:`_aux_json`."""
    name = next((n for n, cls in _boxes().items() if type(x) is cls), None)
    if name is None:
        return None
    box = cast("Partitioned[object]", x)
    if tuple(f.name for f in dataclasses.fields(box)) != _BOX_FIELDS[name] or box.mesh is not None:
        return None
    out: dict[str, object] = {"box": name}
    for key in _spelled_fields(name):
        spelled = _aux_json(getattr(box, key))
        if spelled is _NOT_JSON:
            return None
        out[key] = spelled
    return out


def _spelled_fields(box: str) -> tuple[str, ...]:
    return tuple(f for f in _BOX_FIELDS[box] if f not in ("value", "mesh"))


_NOT_JSON = object()


def _aux_json(x: object) -> object:
    """Axis names and rules as JSON that :func:`_aux_value` turns back into equal values: a tuple
    as a list, a list as ``{"list": [...]}``; strings, integers, booleans and None as they are."""
    if x is None or type(x) in (str, int, bool):
        return x
    if type(x) in (tuple, list):
        items = [_aux_json(item) for item in cast("Sequence[object]", x)]
        if any(item is _NOT_JSON for item in items):
            return _NOT_JSON
        return items if type(x) is tuple else {"list": items}
    return _NOT_JSON


def _aux_value(x: object) -> object:
    if isinstance(x, list):
        return tuple(_aux_value(item) for item in x)
    if isinstance(x, dict):
        if set(x) != {"list"} or not isinstance(x["list"], list):
            raise ValueError(f"not axis metadata: {x!r}")
        return [_aux_value(item) for item in x["list"]]
    if x is None or type(x) in (str, int, bool):
        return x
    raise ValueError(f"not axis metadata: {x!r}")


def from_structure(structure: object) -> object:
    """The variables tree of :func:`variables_structure`'s JSON (ShapeDtypeStruct leaves, boxed
    as they were); None when the JSON is not such a structure."""
    import jax.numpy as jnp

    if isinstance(structure, dict):
        out: dict[str, object] = {}
        for key, sub in structure.items():
            value = from_structure(sub)
            if value is None:
                return None
            out[key] = value
        return out
    if isinstance(structure, list) and len(structure) in (3, 4) and isinstance(structure[0], list):
        shape, dtype, weak = structure[:3]
        try:
            leaf = _shape_dtype_struct()(tuple(int(d) for d in shape), jnp.dtype(dtype), weak_type=bool(weak))
            return leaf if len(structure) == 3 else _boxed(leaf, structure[3])
        except (TypeError, ValueError):
            return None
    return None


def _boxed(leaf: jax.ShapeDtypeStruct, box: object) -> object:
    """``leaf`` in the box :func:`_box_json` spelled; ValueError when it spells none."""
    cls = _boxes().get(str(box.get("box"))) if isinstance(box, dict) else None
    spelled = cast("dict[str, object]", box)  # a box's name found in it: a mapping
    if cls is None or set(spelled) != {"box", *_spelled_fields(cast(str, spelled["box"]))}:
        raise ValueError(f"not a partitioning box: {box!r}")
    return cls(leaf, **{key: _aux_value(value) for key, value in spelled.items() if key != "box"})


def _shape_dtype_struct() -> Callable[..., jax.ShapeDtypeStruct]:
    """``jax.ShapeDtypeStruct``, whose constructor jax leaves unannotated."""
    import jax

    return cast("Callable[..., jax.ShapeDtypeStruct]", jax.ShapeDtypeStruct)
