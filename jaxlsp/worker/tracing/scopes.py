"""Named scopes for NNX and Equinox modules: each module call runs in ``jax.named_scope(path)``.

The path of a module is its attribute path in the model tree (``blocks/0/attn``), found by object
identity. Transforms such as ``nnx.scan`` / ``nnx.vmap`` / ``nnx.jit`` and ``eqx.combine`` inside a
``lax.scan`` body rebuild modules as new objects; those are matched at call time on their class and
their submodule structure (relative paths and classes) against the modules of the tree, preferring
the ones under the calling module's path (``blocks`` for the stacked ``self.blocks``). Their
submodules then get paths under the match (``blocks/linear``). A module matching no single
candidate gets its class name under the caller's path.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
from collections.abc import Callable, Iterator
from typing import Protocol, cast

SCOPE_MARK = "jaxlsp::"  # prefix of the named scopes the worker pushes for NNX / Equinox modules

# a module -> {id(submodule): (submodule, path relative to the module)}, the module itself at ""
Walker = Callable[[object], dict[int, tuple[object, str]]]


class _Method(Protocol):
    """A method as a class holds it: a function, or Equinox's descriptor around one (``.method``)."""

    def __get__(self, instance: object, owner: type) -> Callable[..., object]: ...


class _Wrapping(Protocol):
    method: Callable[..., object]


def nnx_module_paths(model: object) -> dict[int, tuple[object, str]]:
    from flax import nnx

    paths: dict[int, tuple[object, str]] = {}
    for path, node in nnx.iter_graph(model):
        if isinstance(node, nnx.Module) and id(node) not in paths:
            paths[id(node)] = (node, "/".join(str(p) for p in path))
    return paths


def equinox_module_paths(model: object) -> dict[int, tuple[object, str]]:
    import dataclasses

    import equinox as eqx

    paths: dict[int, tuple[object, str]] = {}

    def walk(obj: object, path: tuple[str, ...], depth: int) -> None:
        if depth > 64:
            return
        if isinstance(obj, eqx.Module):
            if id(obj) in paths:
                return
            paths[id(obj)] = (obj, "/".join(path))
            for f in dataclasses.fields(obj):
                walk(getattr(obj, f.name, None), (*path, f.name), depth + 1)
        elif isinstance(obj, list | tuple):
            for i, item in enumerate(obj):
                walk(item, (*path, str(i)), depth + 1)
        elif isinstance(obj, dict):
            for k, item in obj.items():
                walk(item, (*path, str(k)), depth + 1)

    walk(model, (), 0)
    return paths


def _join(*parts: str) -> str:
    return "/".join(p for p in parts if p)


class ScopeResolver:
    """Module object -> attribute path: by identity, else by class and submodule structure."""

    def __init__(self, model: object, walker: Walker):
        self.walker = walker
        self.known = walker(model)
        self.rebuilt: dict[int, tuple[object, str]] = {}
        self._signatures: dict[int, tuple[tuple[str, str], ...]] = {}
        self._local = threading.local()

    @property
    def stack(self) -> list[str]:
        """The paths of the module calls in progress on this thread, innermost last."""
        stack: list[str] | None = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def signature(self, module: object) -> tuple[tuple[str, str], ...]:
        subs: list[tuple[object, str]]
        try:
            subs = list(self.walker(module).values())
        except Exception:
            subs = [(module, "")]
        return tuple(sorted((rel, f"{type(sub).__module__}.{type(sub).__qualname__}") for sub, rel in subs))

    def _known_signature(self, module: object) -> tuple[tuple[str, str], ...]:
        sig = self._signatures.get(id(module))
        if sig is None:
            sig = self._signatures[id(module)] = self.signature(module)
        return sig

    def path(self, module: object) -> str:
        for table in (self.known, self.rebuilt):
            entry = table.get(id(module))
            if entry is not None and entry[0] is module:
                return entry[1]
        caller = self.stack[-1] if self.stack else ""
        path = self._match(module, caller)
        self._adopt(module, path)
        return path

    def _match(self, module: object, caller: str) -> str:
        sig = self.signature(module)
        found = sorted(
            {p for obj, p in self.known.values() if type(obj) is type(module) and self._known_signature(obj) == sig}
        )
        if caller and len(found) > 1:
            found = [p for p in found if p.startswith(caller + "/")] or found
        if len(found) == 1:
            return found[0]
        return _join(caller, type(module).__name__)

    def _adopt(self, module: object, path: str) -> None:
        """Record ``module`` and its submodules, at paths under ``path``."""
        try:
            subs = self.walker(module)
        except Exception:
            subs = {id(module): (module, "")}
        subs.setdefault(id(module), (module, ""))
        for key, (sub, rel) in subs.items():
            known = self.known.get(key)
            if known is not None and known[0] is sub and sub is not module:
                continue  # an original submodule kept by the rebuilt one keeps its own path
            self.rebuilt[key] = (sub, _join(path, rel))


_LIBRARIES = ("flax.", "equinox.", "jax.")  # their modules get a scope for __call__ only


def _scoped_methods(cls: type) -> Iterator[tuple[str, object]]:
    """The methods of ``cls`` (its own ``__dict__``) whose calls open the module's scope: ``__call__``,
    and for the user's classes every other plain method (``encode``, ``_attend``), so the work done
    in ``model.encode`` lands under the module that does it. Properties, static and class methods
    and other dunders stay as they are."""
    library = cls.__module__.startswith(_LIBRARIES)
    for name, attr in cls.__dict__.items():
        if name != "__call__" and (library or (name.startswith("__") and name.endswith("__"))):
            continue
        if isinstance(attr, staticmethod | classmethod | property):
            continue
        # Equinox keeps methods wrapped in a descriptor holding the function as ``.method``.
        if inspect.isfunction(attr) or inspect.isfunction(getattr(attr, "method", None)):
            yield name, attr


@contextlib.contextmanager
def module_scopes(model: object, walker: Walker) -> Iterator[ScopeResolver]:
    """Wrap the methods of the model's module classes in ``jax.named_scope(path)``; restore after."""
    import jax

    resolver = ScopeResolver(model, walker)
    originals: dict[tuple[type, str], object] = {}
    for obj, _ in resolver.known.values():
        for base in type(obj).__mro__:
            if base is object:
                continue
            for name, attr in _scoped_methods(base):
                originals.setdefault((base, name), attr)
    active = threading.local()

    def wrap(original: object) -> Callable[..., object]:
        def method(self: object, *args: object, **kwargs: object) -> object:
            bound = cast("_Method", original).__get__(self, type(self))  # _scoped_methods' own
            ids: set[int] = getattr(active, "ids", set())
            if id(self) in ids:  # a method of a module already in its scope (or a base's): one scope
                return bound(*args, **kwargs)
            path = resolver.path(self)
            if not path:
                return bound(*args, **kwargs)
            active.ids = ids | {id(self)}
            resolver.stack.append(path)
            try:
                with jax.named_scope(SCOPE_MARK + path):
                    return bound(*args, **kwargs)
            finally:
                resolver.stack.pop()
                active.ids = ids

        function = original if inspect.isfunction(original) else cast("_Wrapping", original).method
        functools.update_wrapper(method, function)
        return method

    patched: list[tuple[type, str, object]] = []
    try:
        for (cls, name), original in originals.items():
            try:
                type.__setattr__(cls, name, wrap(original))
                patched.append((cls, name, original))
            except (TypeError, AttributeError):
                pass
        yield resolver
    finally:
        for cls, name, original in reversed(patched):
            type.__setattr__(cls, name, original)
