"""Decide which classes are modules and which functions compute with JAX.

Names are first qualified through the file's bindings (imports, aliases, local definitions),
then judged: library names by the rules in :mod:`ecosystem`, workspace names by following the
file that defines them (re-exports included), as deep as needed. Results are memoized per index
generation, so an edit elsewhere that changes a base class is seen at once.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path

from jaxlsp.discovery import ecosystem as eco
from jaxlsp.discovery.entrypoints import Discovery, Entrypoint, Span
from jaxlsp.discovery.index import FileSummary, WorkspaceIndex, iter_python_files
from jaxlsp.discovery.steps import run_through
from jaxlsp.discovery.summary import Binding, ClassInfo, FunctionDetail, FunctionInfo, SetupField
from jaxlsp.textfiles import real_path

# An assertion that compares arrays: a test's (a model function asserts shapes, not values).
_COMPARES = re.compile(r"(^|\.)(allclose|isclose|array_equal|assert_\w+|testing\.\w+)$")
_ALWAYS_TRIGGERS = frozenset({"jax", "jnp", "lax", "flax", "nnx", "eqx", "equinox", "optax", "jit", "vmap"})
_BUILTIN_IO = frozenset({"open", "input", "exit", "quit"})
_KIND_REASON = {
    "linen": "derives flax.linen.Module",
    "nnx": "derives flax.nnx.Module",
    "equinox": "derives equinox.Module",
}


@dataclass(frozen=True, slots=True)
class _Resolved:
    """A qualified name; for the result of a call (``model = MLP()``), ``callee`` names what was called."""

    name: str
    callee: str | None = None

    @property
    def instance(self) -> bool:
        return self.callee is not None


class Classifier:
    def __init__(self, index: WorkspaceIndex) -> None:
        self.index = index
        self._generation = -1
        self._kinds: dict[tuple[Path, str], eco.ModuleKind | None] = {}
        self._triggers: dict[tuple[Path, str], frozenset[str]] = {}
        self._functions: dict[tuple[Path, str], bool] = {}
        self._tested: dict[str, Path] | None = None  # qualified name -> a JAX test file importing it
        self._test_files: set[Path] | None = None  # the workspace's test files, walked once

    def _fresh(self) -> None:
        if self._generation != self.index.generation:
            self._kinds.clear()
            self._triggers.clear()
            self._functions.clear()
            self._tested = None
            self._generation = self.index.generation

    # -- names ---------------------------------------------------------------------------------
    def qualify(
        self,
        fs: FileSummary,
        name: str,
        before: int | None = None,
        local: dict[str, Binding] | None = None,
        depth: int = 0,
    ) -> _Resolved | None:
        """The absolute dotted name that ``name`` (as written in ``fs``) refers to."""
        head, _, rest = name.partition(".")
        if depth > 20:
            return None
        shadow = (local or {}).get(head)
        for b in [shadow] if shadow is not None else fs.candidates(head, before):
            resolved = self._qualify_binding(fs, b, head, depth)
            if resolved is not None:
                return _Resolved(f"{resolved.name}.{rest}" if rest else resolved.name, resolved.callee)
        return None

    def _qualify_binding(self, fs: FileSummary, b: Binding, head: str, depth: int) -> _Resolved | None:
        if b.how == "import":
            return _Resolved(b.target)
        if b.how == "from":
            return _Resolved(self.index.modules.absolute(fs.path, b.target, b.level))
        if b.how == "local":
            return _Resolved(f"{fs.module}.{head}")
        # An alias or instance: qualify the expression it was bound to.
        if b.target in ("None", "True", "False"):
            return None
        inner = self.qualify(fs, b.target, b.line, None, depth + 1)
        if inner is None:
            return None
        if b.how == "instance" and inner.callee is None:
            return _Resolved(inner.name, callee=inner.name)
        return inner

    # -- classes -------------------------------------------------------------------------------
    def kind_of(self, qualname: str, importer: Path, seen: frozenset[str] = frozenset()) -> eco.ModuleKind | None:
        """The module kind of the class ``qualname`` as imported from ``importer``."""
        self._fresh()
        if eco.is_library_name(qualname):
            rule = eco.library_module_kind(qualname)
            if rule is not None:
                return rule or None
            # The rule cannot tell (``flax.linen.linear._Conv``): only the library's own source can,
            # when the workspace holds it.
        mark = "name:" + qualname
        if mark in seen or len(seen) > 50:
            return None
        key = (importer.parent, qualname)
        if key in self._kinds:
            return self._kinds[key]
        self._kinds[key] = None  # cycle guard while resolving
        result = self._kind_of_workspace(qualname, importer, seen | {mark})
        self._kinds[key] = result
        return result

    def _locate(self, qualname: str, importer: Path) -> tuple[FileSummary, list[str]] | None:
        """The workspace file of the longest module prefix of ``qualname``, and the rest of it."""
        parts = qualname.split(".")
        for i in range(len(parts) - 1, 0, -1):
            path = self.index.modules.locate(".".join(parts[:i]), importer)
            if path is not None:
                fs = self.index.summary(path)
                return (fs, parts[i:]) if fs is not None else None
        return None

    def _kind_of_workspace(self, qualname: str, importer: Path, seen: frozenset[str]) -> eco.ModuleKind | None:
        found = self._locate(qualname, importer)
        return self._kind_in(found[0], found[1], seen) if found is not None else None

    def _kind_in(self, fs: FileSummary, attrs: list[str], seen: frozenset[str]) -> eco.ModuleKind | None:
        b = fs.binding(attrs[0])
        if b is None:
            for star in fs.stars:
                base = self.index.modules.absolute(fs.path, star.target, star.level)
                kind = self.kind_of(".".join([base, *attrs]), fs.path, seen)
                if kind:
                    return kind
            return None
        if b.how == "local":
            found = fs.classes.get(attrs[0])
            if found is None:
                return None
            cls: ClassInfo | None = found[1]
            chain = [found[1]]
            for attr in attrs[1:]:
                cls = next((c for c in cls.nested if c.name == attr), None) if cls else None
                if cls is None:
                    return None
                chain.append(cls)
            return self.class_kind(fs, found[0], chain, seen)
        q = self.qualify(fs, ".".join(attrs))
        if q is None or q.instance:
            return None
        return self.kind_of(q.name, fs.path, seen)

    def class_kind(
        self, fs: FileSummary, start: int, chain: list[ClassInfo], seen: frozenset[str] = frozenset()
    ) -> eco.ModuleKind | None:
        """The kind of the class ``chain[-1]`` (nested in the rest of ``chain``) in file ``fs``."""
        cls = chain[-1]
        own = f"class:{fs.path}:" + ".".join(c.name for c in chain)
        if own in seen:
            return None
        seen = seen | {own}
        for base in cls.bases:
            if not base:
                continue
            # A nested class sees the classes defined before it in the enclosing class body.
            if len(chain) > 1 and "." not in base:
                sibling = next((c for c in chain[-2].nested if c.name == base and c.header < cls.header), None)
                if sibling is not None:
                    kind = self.class_kind(fs, start, [*chain[:-1], sibling], seen)
                    if kind:
                        return kind
                    continue
            q = self.qualify(fs, base, before=start + chain[0].header)
            if q is None or q.instance:
                continue
            kind = self.kind_of(q.name, fs.path, seen)
            if kind:
                return kind
        return None

    # -- functions -----------------------------------------------------------------------------
    def triggers(self, fs: FileSummary) -> frozenset[str]:
        """Names whose presence in a function's text makes it worth parsing.

        Names bound into the ecosystem, objects made from it, and workspace functions (local or
        imported from a workspace module), since calling a JAX function is JAX use too.
        """
        self._fresh()
        key = (fs.path, fs.digest)
        found = self._triggers.get(key)
        if found is not None:
            return found
        names = set(_ALWAYS_TRIGGERS)
        for name, bindings in fs.bindings.items():
            for b in bindings:
                if name in names:
                    # Decided: the name's other bindings cannot change it, and qualifying each one
                    # looks through all earlier ones (10,000 `import jax` cells: 0.4 s of CPU).
                    break
                if b.how == "local":
                    if b.target == "def":
                        names.add(name)
                    continue
                q = self.qualify(fs, name, b.line + 1)
                if q is None:
                    continue
                if (
                    eco.ecosystem_root(q.name)
                    or eco.is_partial(q.name)
                    or (b.how == "from" and not eco.is_library_name(q.name))
                    or (q.callee is not None and self.kind_of(q.callee, fs.path))
                ):
                    names.add(name)
        result = frozenset(names)
        self._triggers[key] = result
        return result

    def _ref_use(self, fs: FileSummary, ref: str, local: dict[str, Binding], seen: frozenset[str]) -> str | None:
        """How a body uses the name ``ref``: core | plumbing | neutral | io | None (not at all)."""
        q = self.qualify(fs, ref, None, local)
        if q is None:
            head = ref.partition(".")[0]
            unbound = head not in fs.bindings and head not in local
            return "io" if unbound and head in _BUILTIN_IO else None
        if q.callee is not None:
            return "core" if eco.is_compute(q.callee) or self.kind_of(q.callee, fs.path) else None
        if eco.is_compute(q.name):
            if self._pure_library_helper(q.name, fs.path, seen):
                return None
            if eco.is_neutral(q.name):
                return "neutral"
            # Building a module, optimizer or RNG container is set-up, not computation.
            if eco.library_module_kind(q.name) is not None:
                return "neutral"
            return "plumbing" if eco.is_incidental(q.name) else "core"
        if eco.is_driver_signal(q.name):
            return "io"
        if eco.is_library_name(q.name):
            return None
        if self.is_jax_function(q.name, fs.path, seen):
            return "plumbing"
        return "neutral" if self.kind_of(q.name, fs.path) else None

    def _pure_library_helper(self, qualname: str, importer: Path, seen: frozenset[str]) -> bool:
        """True for a private name of a JAX library (``equinox.nn._misc.all_sequences``) that the
        workspace holds as a plain ``def`` whose body names nothing of the JAX ecosystem (not even
        a type or a tree utility) and is no JAX function: the library's own source says it is pure
        Python, whatever its namespace. Public names, aliases (``named_scope = jax.named_scope``
        beside it), decorated, async and generator defs stay judged by rule, and so does anything
        unsure."""
        if not eco.is_private_library_name(qualname):
            return False
        self._fresh()
        key = (importer.parent, "pure:" + qualname)
        if key in self._functions:
            return self._functions[key]
        mark = "fn:" + qualname
        if mark in seen or len(seen) > 50:
            return False
        self._functions[key] = False  # cycle guard while resolving
        result = False
        located = self._locate(qualname, importer)
        if located is not None and len(located[1]) == 1:
            fs, (name,) = located
            b = fs.binding(name)
            if b is not None and b.how == "local" and b.target == "def":
                found = next(((st, fn) for st, fn in fs.functions() if fn.name == name), None)
                if found is not None and not found[1].is_async:
                    detail = found[1].detail
                    result = (
                        detail is not None
                        and not detail.has_yield
                        and not detail.decorators
                        and not self._names_ecosystem(fs, detail)
                        and self.function_entry(fs, found[0], found[1], seen | {mark}) is None
                    )
        self._functions[key] = result
        return result

    def _names_ecosystem(self, fs: FileSummary, detail: FunctionDetail) -> bool:
        """Whether a body (nested defs included) uses any name bound into the JAX ecosystem."""
        local = {b.name: b for b in detail.local_bindings}
        for ref in detail.refs | detail.nested_refs:
            q = self.qualify(fs, ref, None, local)
            if q is not None and eco.ecosystem_root(q.name):  # an instance's name is its callee's
                return True
        return False

    def is_jax_function(self, qualname: str, importer: Path, seen: frozenset[str] = frozenset()) -> bool:
        """True when ``qualname`` is a workspace function that gets a lens (not a driver)."""
        self._fresh()
        mark = "fn:" + qualname
        key = (importer.parent, qualname)
        if key in self._functions:
            return self._functions[key]
        if mark in seen or len(seen) > 50:
            return False
        self._functions[key] = False  # cycle guard while resolving
        result = False
        located = self._locate(qualname, importer)
        if located is not None and len(located[1]) == 1:
            fs, (name,) = located
            b = fs.binding(name)
            if b is not None and b.how == "local" and b.target == "def":
                found = next(((st, fn) for st, fn in fs.functions() if fn.name == name), None)
                if found is not None:
                    entry = self.function_entry(fs, found[0], found[1], seen | {mark})
                    result = entry is not None and not entry.driver
            elif b is not None and b.how in ("from", "import", "alias"):
                q = self.qualify(fs, name)
                result = q is not None and q.callee is None and self.is_jax_function(q.name, fs.path, seen | {mark})
        self._functions[key] = result
        return result

    def function_entry(
        self, fs: FileSummary, start: int, fn: FunctionInfo, seen: frozenset[str] = frozenset()
    ) -> Entrypoint | None:
        if fn.is_async:
            return None
        if not (fn.words & self.triggers(fs)):
            return self._tested_operators(fs, start, fn)
        detail = fn.detail
        if detail is None or detail.has_yield:
            return None
        seen = seen | {f"fn:{fs.module}.{fn.name}"}
        local = {b.name: b for b in detail.local_bindings}
        transforms = []
        for dec in detail.decorators:
            name = self._decorator_target(fs, dec.callee, dec.first_arg, local)
            if name is not None and eco.is_transform(name):
                transforms.append(name)
        core: list[str] = []  # computation in the function's own body
        plumbing: list[str] = []  # keys, device transfer, calls to JAX functions, nested helpers
        strong_io = False
        for ref in sorted(detail.refs | detail.nested_refs):
            use = self._ref_use(fs, ref, local, seen)
            if use == "core" and ref in detail.refs:
                core.append(ref)
            elif use in ("core", "plumbing"):
                plumbing.append(ref)
            elif use == "io":
                strong_io = True
        # Neutral names (tree utilities, device transfer, constructing modules) make nothing a JAX
        # function on their own, and do not make a JAX function a model function either.
        if not transforms and not core and not plumbing:
            return self._tested_operators(fs, start, fn)
        plumbing_only = not core
        factory = None if transforms else detail.returns_function
        library = None if transforms or factory else self._returned_library_function(fs, detail, local)
        signals = [] if transforms or factory or library else self._driver_signals(fs, detail, local, seen)
        if not transforms and plumbing_only and not signals:
            handled = self._state_handling(fs, plumbing, local)
            if handled is not None:
                signals.append(f"handles weights: reads or writes module state only ({handled})")
        driver = not transforms and (
            factory is not None
            or library is not None
            or bool(signals)
            or (strong_io and (detail.has_loop or plumbing_only))
            or (detail.has_loop and plumbing_only)
        )
        if transforms:
            reason = "decorated with " + ", ".join(transforms)
        elif factory is not None:
            # what it returns computes, not it: its own call only makes a function
            reason = f"factory: returns a function it makes ({factory})"
        elif library is not None:
            reason = f"factory: returns a library function ({library})"
        elif signals:
            reason = "driver: " + "; ".join(signals)
        else:
            reason = "computes with " + ", ".join(sorted(set(core or plumbing))[:4])
        header = start + fn.header
        return Entrypoint(
            path=fs.path,
            name=fn.name,
            kind="function",
            header=Span(header, 0, header, fs.line_length(header)),
            body=Span(start, 0, start + fn.end, fs.line_length(start + fn.end)),
            decorators=tuple(d.text for d in detail.decorators),
            fields=detail.params,
            reason=reason,
            driver=driver,
            factory=factory is not None or library is not None,
        )

    def _tested_operators(self, fs: FileSummary, start: int, fn: FunctionInfo) -> Entrypoint | None:
        """A function with no JAX name of its own that only applies operators to its parameters
        or calls them (a mask builder ``(q[:, None] - k[None, :]) < window``, a ``forward(model,
        x)`` wrapper), imported by a test file that computes with JAX: the test calls it on arrays
        (or modules), so it is a JAX function all the same. Parsed only when a test imports it."""
        tested = self._jax_tests().get(f"{fs.module}.{fn.name}")
        detail = fn.detail if tested is not None else None
        if tested is None or detail is None or detail.has_yield or detail.has_loop:
            return None
        params = {p.name for p in detail.params}
        assigned = {name for name, _ in detail.local_calls}
        if not params or detail.decorators or detail.nested_defs or detail.local_bindings:
            return None
        allowed = params | assigned | {"None", "True", "False", "Ellipsis"}
        if any(ref.partition(".")[0] not in allowed for ref in detail.refs | detail.nested_refs):
            return None  # a builtin, a global or a library: not operators on what it is given
        if any(callee.partition(".")[0] not in params for callee in detail.callees):
            return None
        header = start + fn.header
        where = tested.name
        return Entrypoint(
            path=fs.path,
            name=fn.name,
            kind="function",
            header=Span(header, 0, header, fs.line_length(header)),
            body=Span(start, 0, start + fn.end, fs.line_length(start + fn.end)),
            decorators=(),
            fields=detail.params,
            reason=f"applies operators to its arguments; {where}, which computes with JAX, imports it",
        )

    def _jax_tests(self) -> dict[str, Path]:
        """The workspace names that test files computing with JAX import (``from model import
        causal_mask`` in ``tests/test_model.py``, which imports ``jax.numpy``), once per index
        generation: only those files' bindings are read."""
        self._fresh()
        if self._tested is not None:
            return self._tested
        if self._test_files is None:  # the index may not have read them yet (one file discovered)
            self._test_files = {p for root in self.index.roots for p in iter_python_files(root) if _is_test_file(p)}
        tested: dict[str, Path] = {}
        for path in sorted(self._test_files | {p for p in self.index.known_files() if _is_test_file(p)}):
            other = self.index.summary(path)
            if other is None:
                continue
            names = []
            jax_use = False
            for name, bindings in other.bindings.items():
                for b in bindings:
                    if b.how not in ("from", "import"):
                        continue
                    q = self.qualify(other, name, b.line + 1)
                    if q is None:
                        continue
                    if eco.ecosystem_root(q.name):
                        jax_use = True
                    elif b.how == "from" and not eco.is_library_name(q.name):
                        names.append(q.name)
            if jax_use:
                for name in names:
                    tested.setdefault(name, path)
        self._tested = tested
        return tested

    def _returned_library_function(
        self, fs: FileSummary, detail: FunctionDetail, local: dict[str, Binding]
    ) -> str | None:
        """What every ``return`` hands back when each is a JAX library function itself, not a call
        of one (``get_activation(name)`` returning ``jax.nn.gelu`` or ``nn.relu``): calling it
        computes nothing, the function it returns does."""
        if not detail.returns_refs:
            return None
        for ref in detail.returns_refs:
            q = self.qualify(fs, ref, None, local)
            if q is None or q.instance or not eco.is_compute(q.name) or eco.is_neutral(q.name):
                return None
            if eco.library_module_kind(q.name) is not None or not eco.is_library_name(q.name):
                return None  # a module class (a constructor), or a workspace name
        return ", ".join(sorted(detail.returns_refs)[:3])

    def _state_handling(self, fs: FileSummary, plumbing: list[str], local: dict[str, Binding]) -> str | None:
        """The first state-plumbing reference when all of a body's JAX use reads or writes module
        state (``nnx.state``, ``nnx.update``, ``eqx.partition``), with array conversion at most:
        counting parameters or assigning loaded weights into a model computes nothing to trace."""
        found = None
        for ref in plumbing:
            q = self.qualify(fs, ref, None, local)
            if q is None or q.instance:
                return None
            if eco.is_state_plumbing(q.name):
                found = found or ref
            elif not eco.is_array_conversion(q.name):
                return None
        return found

    def _driver_signals(
        self, fs: FileSummary, detail: FunctionDetail, local: dict[str, Binding], seen: frozenset[str]
    ) -> list[str]:
        """Why a function drives a program rather than being one, judged by its own body (never
        by its name): it loops around a step or over a data iterator, makes optimizer state
        without computing gradients, reads or writes checkpoints and parameter files, is a test or
        a benchmark, or parses flags and configs (docs/discovery.md)."""
        found: dict[str, str] = {}
        gradients = False
        for ref in sorted(detail.refs):
            q = self.qualify(fs, ref, None, local)
            if eco.other_framework(q.name if q is not None and not q.instance else None, ref):
                found.setdefault("framework", ref)
            if q is None:
                head = ref.partition(".")[0]
                if head not in fs.bindings and head not in local and head == "open":
                    found.setdefault("checkpoint", "opens files")
                continue
            if q.callee is not None:
                continue  # a method of an object made at the top level (tx.update): not a constructor
            gradients = gradients or eco.is_gradient(q.name)
            signal = eco.driver_signal(q.name)
            if signal is not None:
                found.setdefault(signal, ref)
        signals: list[str] = []
        if "checkpoint" in found:
            signals.append(f"reads or writes checkpoints or files ({found['checkpoint']})")
        if "framework" in found:
            signals.append(f"converts another framework's weights or tensors ({found['framework']})")
        if "entry" in found:
            signals.append(f"parses flags or configs ({found['entry']})")
        if "setup" in found and not gradients:
            signals.append(f"makes optimizer state without computing gradients ({found['setup']})")
        testing = "test" in found or (
            "timing" in found and (detail.has_loop or any(r.endswith("block_until_ready") for r in detail.refs))
        )
        required = [p for p in detail.params if p.default is None and p.kind not in ("var_positional", "var_keyword")]
        if detail.has_assert and (not required or any(_COMPARES.search(r) for r in detail.assert_refs)):
            testing = True  # a model function asserts shapes of its inputs; a test asserts values
        for dec in detail.decorators:  # @pytest.mark.parametrize, @parameterized.parameters
            target = self._decorator_target(fs, dec.callee, dec.first_arg, local)
            testing = testing or (target is not None and eco.driver_signal(target) == "test")
        if testing:
            signals.append("is a test or a benchmark (assertions, a testing library, timing)")
        elif not required and _is_test_file(fs.path):
            signals.append("makes a test's inputs (a test file's function callable without arguments)")
        if "checkpoint" not in found:
            loaded = self._calls_checkpoint_driver(fs, detail, local, seen)
            if loaded is not None:
                signals.insert(0, f"reads or writes checkpoints or files (through {loaded})")
        if not signals:
            driver = self._calls_driver(fs, detail, local, seen)
            if driver is not None:
                signals.append(f"calls the driver {driver}")
        step = self._loop_step(fs, detail, local, seen)
        if step is not None:
            signals.append(f"loops around a step ({step})")
        return signals

    def _loop_step(
        self, fs: FileSummary, detail: FunctionDetail, local: dict[str, Binding], seen: frozenset[str]
    ) -> str | None:
        """What the body's own loops drive: a jitted (transformed) workspace step, a step the
        function made with a transform (``p_step = jax.pmap(step)``), or a data iterator
        (``next(batches)``); None when its loops only compute (a Python loop over layers)."""
        if not detail.loop_refs:
            return None
        made = {
            name
            for name, decorators in detail.nested_defs
            if any(
                (target := self._decorator_target(fs, d.callee, d.first_arg, local)) is not None
                and eco.is_transform(target)
                for d in decorators
            )
        }
        for name, callee in detail.local_calls:
            q = self.qualify(fs, callee, None, local)
            if q is not None and q.callee is None and eco.is_transform(q.name):
                made.add(name)
        for ref in sorted(detail.loop_refs):
            head = ref.partition(".")[0]
            if head in made:
                return ref
            if ref == "next" and "next" not in fs.bindings and "next" not in local:
                return "next() of a data iterator"
            q = self.qualify(fs, ref, None, local)
            if q is None or q.callee is not None or eco.is_library_name(q.name):
                continue
            if self._is_step(q.name, fs.path, seen):
                return ref
        return None

    def _is_step(self, qualname: str, importer: Path, seen: frozenset[str]) -> bool:
        """A workspace function decorated with a JAX transform (a jitted training or eval step)."""
        located = self._locate(qualname, importer)
        if located is None or len(located[1]) != 1:
            return False
        fs, (name,) = located
        found = next((fn for _, fn in fs.functions() if fn.name == name), None)
        detail = found.detail if found is not None else None
        if detail is None:
            return False
        local = {b.name: b for b in detail.local_bindings}
        return any(
            (target := self._decorator_target(fs, dec.callee, dec.first_arg, local)) is not None
            and eco.is_transform(target)
            for dec in detail.decorators
        )

    def _calls_checkpoint_driver(
        self, fs: FileSummary, detail: FunctionDetail, local: dict[str, Binding], seen: frozenset[str]
    ) -> str | None:
        """A workspace function this one calls whose own body reads or writes checkpoints or files
        (``load_and_format_params`` calling ``load_params``, which restores with orbax)."""
        for ref in sorted(detail.refs):
            q = self.qualify(fs, ref, None, local)
            if q is None or q.callee is not None or eco.is_library_name(q.name) or f"fn:{q.name}" in seen:
                continue
            located = self._locate(q.name, fs.path)
            if located is None or len(located[1]) != 1:
                continue
            other, (name,) = located
            found = next((fn for _, fn in other.functions() if fn.name == name), None)
            inner = found.detail if found is not None else None
            if inner is not None and self._checkpoint_ref(other, inner) is not None:
                return ref
        return None

    def _calls_driver(
        self, fs: FileSummary, detail: FunctionDetail, local: dict[str, Binding], seen: frozenset[str]
    ) -> str | None:
        """A workspace driver this function calls (setting up a state with ``init_train_state``,
        which makes optimizer state, is setting up too)."""
        for ref in sorted(detail.refs):
            q = self.qualify(fs, ref, None, local)
            if q is None or q.callee is not None or eco.is_library_name(q.name) or f"fn:{q.name}" in seen:
                continue
            entry = self._workspace_entry(q.name, fs.path, seen)
            if entry is not None and entry.driver and not entry.factory:  # a factory only makes a function
                return ref
        return None

    def _workspace_entry(self, qualname: str, importer: Path, seen: frozenset[str]) -> Entrypoint | None:
        located = self._locate(qualname, importer)
        if located is None or len(located[1]) != 1 or len(seen) > 50:
            return None
        fs, (name,) = located
        found = next(((st, fn) for st, fn in fs.functions() if fn.name == name), None)
        if found is None:
            return None
        return self.function_entry(fs, found[0], found[1], seen | {f"fn:{qualname}"})

    def _checkpoint_ref(self, fs: FileSummary, detail: FunctionDetail) -> str | None:
        """The first reference of a body to a checkpoint or file API (``open`` included)."""
        local = {b.name: b for b in detail.local_bindings}
        for ref in sorted(detail.refs):
            q = self.qualify(fs, ref, None, local)
            if q is None:
                if ref == "open" and "open" not in fs.bindings and "open" not in local:
                    return ref
                continue
            if q.callee is None and eco.driver_signal(q.name) == "checkpoint":
                return ref
        return None

    def _decorator_target(
        self, fs: FileSummary, callee: str | None, first_arg: str | None, local: dict[str, Binding]
    ) -> str | None:
        if callee is None:
            return None
        q = self.qualify(fs, callee, None, local)
        if q is None:
            return None
        if eco.is_partial(q.name) and first_arg:
            inner = self.qualify(fs, first_arg, None, local)
            return inner.name if inner else None
        return q.name

    # -- files ---------------------------------------------------------------------------------
    def discover(self, path: Path) -> Discovery:
        return run_through(self.discover_steps(path))

    def discover_steps(self, path: Path) -> Generator[None, None, Discovery]:
        """:meth:`discover`, yielding between top-level statements (the server runs it in slices)."""
        fs = self.index.summary(path)  # given as named: a link out of the workspace is not read
        path = real_path(path)
        if fs is None:
            return Discovery(path, (), ())
        found: list[Entrypoint] = []
        for start, info in fs.chunks:
            if info.cls is not None:
                self._class_entries(fs, start, [info.cls], found)
            elif info.fn is not None:
                entry = self.function_entry(fs, start, info.fn)
                if entry is not None:
                    found.append(entry)
            yield
        found.sort(key=lambda e: e.header.line)
        return Discovery(
            path,
            tuple(e for e in found if not e.driver),
            tuple(e for e in found if e.driver),
        )

    def _class_entries(self, fs: FileSummary, start: int, chain: list[ClassInfo], out: list[Entrypoint]) -> None:
        cls = chain[-1]
        kind = self.class_kind(fs, start, chain)
        if kind is not None:
            header = start + cls.header
            end = start + cls.end
            first = start + cls.start
            out.append(
                Entrypoint(
                    path=fs.path,
                    name=".".join(c.name for c in chain),
                    kind=kind,
                    header=Span(header, cls.column, header, fs.line_length(header)),
                    body=Span(first, 0 if len(chain) == 1 else cls.column, end, fs.line_length(end)),
                    decorators=tuple(d.text for d in cls.decorators),
                    fields=_module_fields(kind, cls),
                    reason=_KIND_REASON[kind],
                )
            )
        for inner in cls.nested:
            self._class_entries(fs, start, [*chain, inner], out)


def _is_test_file(path: Path) -> bool:
    """A file pytest collects by its default names (``test_*.py``, ``*_test.py``) or a ``conftest.py``."""
    stem = path.stem
    return stem.startswith("test_") or stem.endswith("_test") or stem == "conftest"


def _module_fields(kind: eco.ModuleKind, cls: ClassInfo) -> tuple[SetupField, ...]:
    if kind == "linen":
        return cls.linen_fields
    params = cls.init_params
    if params is not None:
        return params
    return cls.linen_fields if kind == "equinox" else ()
