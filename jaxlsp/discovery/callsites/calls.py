"""One call of a target read into a :class:`~jaxlsp.discovery.callsites.sites.CallSite`: :class:`CallReader`.

Given a call that names the target (``model(x)``, ``model.apply(variables, x, train=False)``,
``model.init(key, x)``, ``f(x)``, through ``jax.jit`` / ``jax.vmap`` wrappers and partials), it
matches the callee against the target (an instance of the target class, one of its methods, the
function), works out the constructor's and the call's arguments as recipe input specs (what the
worker fills, ``rngs`` and ``key``, left out; a ``vmap``'s leading axis taken off), and notes what
a run would see otherwise: an expected error around the call, a JAX context manager, an NNX or
Equinox instance changed before it. Which example the site belongs to comes from
:class:`~jaxlsp.discovery.callsites.reach.Reach`; finding the calls is :mod:`callsites`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import libcst as cst

from jaxlsp.discovery.callsites.literals import (
    CALL_WITH_REST,
    Arr,
    Bound,
    Built,
    Lit,
    Map,
    Partial,
    Ref,
    Seq,
    Unknown,
    Value,
    Wrapped,
)
from jaxlsp.discovery.callsites.namespaces import Scope
from jaxlsp.discovery.callsites.reach import Reach, header_name
from jaxlsp.discovery.callsites.sites import CallSite, Missing, SiteKind, SiteTarget
from jaxlsp.discovery.callsites.values import WorkspaceValues
from jaxlsp.discovery.classify import Classifier
from jaxlsp.discovery.index import WorkspaceIndex
from jaxlsp.discovery.summary import code_of

_INIT_LIKE = frozenset({"init", "init_with_output", "tabulate", "lazy_init"})
_FILLED_BY_WORKER = {"nnx": "rngs", "equinox": "key"}
_NOT_CALLS = frozenset({"replace", "tree_flatten"})  # methods of module instances that do not run the model
# context managers that expect the calls inside to raise: unittest's, absltest's, pytest's, numpy's
_RAISES = re.compile(r"assertRaises\w*|assert_raises\w*|raises")


class CallReader(WorkspaceValues):
    """Reads the calls of a target into call sites; see the module docstring."""

    def __init__(self, index: WorkspaceIndex, root: Path, classifier: Classifier | None = None) -> None:
        super().__init__(index, root, classifier)
        self.reach = Reach(index, self.root, self.elsewhere)

    # -- the target ----------------------------------------------------------------------------------------
    def _is_target(self, value: Value, target: SiteTarget) -> bool:
        return isinstance(value, Ref) and value.same(target.path, target.cls or target.name)

    def _construction(self, value: Value, target: SiteTarget) -> Built | None:
        """``value`` as an instance of the target class (through partials), else None."""
        if isinstance(value, Built):
            callee = value.callee
            while isinstance(callee, Partial):
                callee = callee.func
            if self._is_target(callee, target):
                return value
        return None

    def _result_of_target(self, value: Built, target: SiteTarget) -> bool:
        callee = value.callee
        while isinstance(callee, (Partial, Wrapped)):
            callee = callee.func if isinstance(callee, Partial) else callee.inner
        return self._is_target(callee, target)

    # -- calls -------------------------------------------------------------------------------------------
    def _call_site(
        self, target: SiteTarget, scope: Scope, call: cst.Call, order: int, line: int
    ) -> tuple[CallSite, Built | None] | None:
        """The site made by ``call`` when it calls the target (or an instance of it)."""
        found = self._call_site_of(target, scope, call, order, line)
        expected = _expected_error(scope, call)
        if found is not None and expected is not None:
            why = f"it is called inside `with {expected}`: the call is expected to fail"
            site = found[0]
            found = replace(site, missing=(*site.missing, Missing("raises", why)), raises=True), found[1]
        if found is not None and found[0].static:
            context = self._jax_context(scope, call, order)
            if context is not None:  # ``with jax.set_mesh(mesh):`` around the call: a run keeps it
                why = f"it is called inside `with {context}`: a run of the example traces it in that context"
                found = replace(found[0], missing=(*found[0].missing, Missing("context", why))), found[1]
        if found is None or target.kind not in ("nnx", "equinox") or found[1] is None:
            return found
        changed = _changed_before(scope, call, order)
        if changed is None:
            return found
        site = found[0]
        why = f"the instance is changed before this call ({changed}): a run shows it as it is called"
        return replace(site, missing=(*site.missing, Missing("init", why))), found[1]

    def _jax_context(self, scope: Scope, call: cst.Call, order: int) -> str | None:
        """The first JAX or Flax context manager a ``with`` around ``call`` enters (a mesh,
        ``jax.default_device``, ``enable_x64``, Flax's axis rules), as written; None if none."""
        for item in scope.contexts.get(id(call), ()):
            value = self.value(item, scope, order)
            while isinstance(value, Built):
                value = value.callee
            if isinstance(value, Ref) and value.qual.split(".", 1)[0] in ("jax", "flax"):
                return code_of(item)
        return None

    def _call_site_of(
        self, target: SiteTarget, scope: Scope, call: cst.Call, order: int, line: int
    ) -> tuple[CallSite, Built | None] | None:
        callee = self.value(call.func, scope, order)
        got = self.arguments(call, scope, order, 0)
        if isinstance(got, Unknown):
            args: list[Value] = [got]
            kwargs: list[tuple[str, Value]] = []
        else:
            args, kwargs = got
        if isinstance(callee, Ref) and callee.qual in CALL_WITH_REST and args:
            callee, args = args[0], args[1:]  # jax.eval_shape(f, x) calls f(x)
        maps = False
        while isinstance(callee, Wrapped):
            maps = maps or callee.maps
            callee = callee.inner
        if isinstance(callee, Partial):
            base = callee
            merged = dict(base.kwargs)
            merged.update(kwargs)
            args, kwargs = [*base.args, *args], list(merged.items())
            callee = base.func
        if target.kind == "function" and target.method is None:
            if self._is_target(callee, target):
                return self._site(target, scope, line, None, (args, kwargs, maps), "call"), None
            return None
        if target.method is not None and isinstance(callee, Bound) and callee.attr == target.method:
            built = self._construction(callee.obj, target)
            if built is not None:
                return self._site(target, scope, line, built, (args, kwargs, maps), "call"), built
            return None
        built = self._construction(callee, target)
        if built is not None:  # ``model(x)``, ``Cls(...)(x)``
            if target.kind == "linen":
                return None  # an unbound Linen module cannot be called
            return self._site(target, scope, line, built, (args, kwargs, maps), "call"), built
        if isinstance(callee, Bound):
            built = self._construction(callee.obj, target)
            if built is None:
                return None
            attr = callee.attr
            extra: dict[str, Any] = {}
            if target.kind == "linen" and attr in _INIT_LIKE | {"apply"}:
                if not args:
                    return None
                first, rest = args[0], args[1:]
                plain: list[tuple[str, Value]] = []
                for k, v in kwargs:
                    if k == "rngs":
                        extra["rngs"] = _streams(v)
                    elif k == "mutable" and attr == "apply":
                        if isinstance(v, Seq) and all(isinstance(i, Lit) and isinstance(i.value, str) for i in v.items):
                            extra["mutable"] = [i.value for i in v.items if isinstance(i, Lit)]
                        elif isinstance(v, Lit) and isinstance(v.value, str):
                            extra["mutable"] = [v.value]
                    elif k == "method":
                        method = _method_name(v)
                        if method is None:
                            return None
                        if method != "__call__":
                            extra["method"] = method
                    elif k == "mutable":
                        continue
                    else:
                        plain.append((k, v))
                if attr in _INIT_LIKE:
                    extra.setdefault("rngs", _streams(first))
                    extra["mutable"] = True  # init runs with every collection mutable
                if not extra.get("rngs"):
                    extra.pop("rngs", None)
                return self._site(target, scope, line, built, (rest, plain, maps), "call", extra), built
            if target.kind in ("nnx", "equinox") and not attr.startswith("_") and attr not in _NOT_CALLS:
                if attr == "__call__":
                    return self._site(target, scope, line, built, (args, kwargs, maps), "call"), built
                if target.method is None and self._defines_method(target, attr):
                    extra = {"method": attr}
                    return self._site(target, scope, line, built, (args, kwargs, maps), "call", extra), built
        return None

    def _defines_method(self, target: SiteTarget, attr: str) -> bool:
        """Whether the target class's own body defines ``attr`` (``model.encode(x)``), which the
        library's methods (``model.eval()``, ``model.train()``, ``sow``...) are not."""
        file = self.source(target.path)
        if file is None:
            return False
        pattern = re.compile(rf"^\s+def\s+{re.escape(attr)}\s*\(", re.M)
        for i in range(len(file.statements)):
            if file.defines(i) and header_name(file.lines[file.statements[i].header]) == target.word:
                return pattern.search(file.text_of(i)) is not None
        return False

    # -- sites -------------------------------------------------------------------------------------------
    def _site(
        self,
        target: SiteTarget,
        scope: Scope,
        line: int,
        built: Built | None,
        call: tuple[list[Value], list[tuple[str, Value]], bool] | None,
        how: str,
        extra: dict[str, Any] | None = None,
    ) -> CallSite:
        kind, example = self._example(scope)
        missing: list[Missing] = []
        extra = dict(extra or {})
        count = 0
        wide = False
        init: dict[str, Any] | None = None
        via: str | None = None
        if built is not None:
            init_args, init_kwargs, alias = self._init_arguments(built, target)
            via = alias
            init, n, w = self._section(init_args, init_kwargs, "init", missing)
            count, wide = count + n, wide or w
        inputs: dict[str, Any] | None = None
        if call is not None:
            args, kwargs, maps = call
            if maps:
                args = [_unmapped(a) for a in args]
                kwargs = [(k, _unmapped(v)) for k, v in kwargs]
            inputs, n, w = self._section(args, kwargs, "inputs", missing)
            count, wide = count + n, wide or w
        elif target.kind != "function":
            missing.append(Missing("inputs", "the instance made here is never called in this scope"))
        if wide:
            extra["x64"] = True
        return CallSite(
            path=scope.file.path,
            line=line,
            kind=kind,
            example=example,
            static=True,
            init=init if built is not None else None,
            inputs=inputs,
            extra=extra,
            missing=tuple(missing),
            via=via,
            elements=count,
        )

    def _init_arguments(
        self, built: Built, target: SiteTarget
    ) -> tuple[list[Value], list[tuple[str, Value]], str | None]:
        """The constructor's arguments (partials merged), without what the worker fills."""
        args: list[Value] = []
        kwargs: dict[str, Value] = {}
        callee: Value = built.callee
        layers: list[Partial] = []
        while isinstance(callee, Partial):
            layers.append(callee)
            callee = callee.func
        for layer in reversed(layers):
            args.extend(layer.args)
            kwargs.update(layer.kwargs)
        args.extend(built.args)
        kwargs.update(built.kwargs)
        via = "a functools.partial of it" if layers or built.partial else None
        skip = _FILLED_BY_WORKER.get(target.kind)
        if skip is not None:
            kwargs.pop(skip, None)
            positional = [f.name for f in target.fields if f.kind in ("positional", "positional_only")]
            if skip in positional and positional.index(skip) < len(args):
                args = [a for i, a in enumerate(args) if i != positional.index(skip)]
        return args, list(kwargs.items()), via

    def _section(
        self, args: list[Value], kwargs: list[tuple[str, Value]], where: str, missing: list[Missing]
    ) -> tuple[dict[str, Any], int, bool]:
        """``init`` or ``inputs`` of a profile: ``{args?, kwargs?}``, elements counted, whether wide."""
        section: dict[str, Any] = {}
        specs, count, wide = self._specs(args, f"{where}.args", missing)
        if specs:
            section["args"] = specs
        named, n, w = self._named_specs(kwargs, f"{where}.kwargs", missing)
        if named:
            section["kwargs"] = named
        return section, count + n, wide or w

    def _specs(self, values: Iterable[Value], where: str, missing: list[Missing]) -> tuple[list[Any], int, bool]:
        out: list[Any] = []
        count, wide = 0, False
        for i, v in enumerate(values):
            spec = self.specs.spec(v)
            if isinstance(spec, Unknown):
                missing.append(Missing(f"{where}[{i}]", spec.why))
                out.append({"kind": "array"})
                continue
            out.append(spec[0])
            count += spec[1]
            wide = wide or spec[2]
        return out, count, wide

    def _named_specs(
        self, values: Iterable[tuple[str, Value]], where: str, missing: list[Missing]
    ) -> tuple[dict[str, Any], int, bool]:
        out: dict[str, Any] = {}
        count, wide = 0, False
        for k, v in values:
            spec = self.specs.spec(v)
            if isinstance(spec, Unknown):
                missing.append(Missing(f"{where}.{k}", spec.why))
                out[k] = {"kind": "array"}
                continue
            out[k] = spec[0]
            count += spec[1]
            wide = wide or spec[2]
        return out, count, wide

    # -- examples ----------------------------------------------------------------------------------------
    def _example(self, scope: Scope) -> tuple[SiteKind, str | None]:
        return self.reach.example_of(scope.file, scope.owner, scope.is_module)


def _root_name(expr: cst.BaseExpression) -> str | None:
    while isinstance(expr, cst.Attribute):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _expected_error(scope: Scope, call: cst.Call) -> str | None:
    """The ``with`` item around ``call`` that expects it to raise (``self.assertRaises(E)``,
    ``self.assertRaisesRegex(E, ...)``, ``pytest.raises(E)``, ``np.testing.assert_raises``), as
    written; None if none. By name: a test's own ``self`` is not followed to unittest."""
    for item in scope.contexts.get(id(call), ()):
        func = item.func if isinstance(item, cst.Call) else item
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if _RAISES.fullmatch(name):
            return code_of(item)
    return None


def _changed_before(scope: Scope, call: cst.Call, order: int) -> str | None:
    """An earlier call in the scope that may change the NNX or Equinox instance ``call`` uses:
    one of its methods (``cell.eval()``: a mode switch) or a call it is given to
    (``optimizer.update(model, grads)``); then the literal construction is not what is called."""
    name = _root_name(call.func)
    if name is None:
        return None
    for earlier in scope.calls:
        if earlier.order >= order:
            continue
        func = earlier.node.func
        if isinstance(func, cst.Attribute) and _root_name(func) == name and func is not call.func:
            return f"{name}.{func.attr.value}() at line {earlier.line}"
        if any(isinstance(a.value, cst.Name) and a.value.value == name for a in earlier.node.args):
            return f"given to a call at line {earlier.line}"
    return None


def _streams(value: Value) -> list[str]:
    """Extra Linen rng streams named by an ``init``/``apply`` ``rngs`` argument (``params`` is implied)."""
    if isinstance(value, Map):
        return [k for k, _ in value.items if k != "params"]
    return []


def _method_name(value: Value) -> str | None:
    if isinstance(value, Lit) and isinstance(value.value, str):
        return value.value
    if isinstance(value, Ref) and value.name is not None:
        return value.name.rpartition(".")[2]
    if isinstance(value, Bound):
        return value.attr
    return None


def _unmapped(value: Value) -> Value:
    """What a ``vmap`` hands the function: each array without its leading axis."""
    if isinstance(value, Arr):
        if not value.shape:
            return Unknown("a vmap over a scalar")
        return Arr(value.shape[1:], value.dtype, value.generator)
    if isinstance(value, Seq):
        return Seq(tuple(_unmapped(v) for v in value.items))
    if isinstance(value, Map):
        return Map(tuple((k, _unmapped(v)) for k, v in value.items))
    return value
