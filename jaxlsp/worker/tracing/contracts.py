"""Shape contracts: the workspace's jaxtyping annotations checked against the traced values.

During a trace, every workspace function (and class method) whose parameters or return carry a
jaxtyping annotation is checked at each call, with jaxtyping's own checker: ``jaxtyped`` with a
run-time type checker (beartype, else typeguard) over a shadow of the function with the same
signature, so jaxtyping's dimension rules hold as written (a name binds once per call, ``*batch``,
``...``, ``#`` broadcast, ``dim=expr``, symbolic dims). A violation never stops the trace: it is
recorded (once per function and parameter) with the parameter or ``return``, the annotation, the
traced type, the dimensions bound (and by which parameter, from which call) and where the
annotation is written; the graph carries them as its ``contracts`` section.

How a call is seen: the function keeps its identity (jit wrappers, Flax and Equinox method
wrappers and closures that hold it all still call it), but its ``__code__`` becomes a trampoline
compiled here (so no graph frame points at it) that calls a copy of the original. No global
profiler: the cost falls only on annotated functions. Only the stdlib here; jaxtyping and the
checker are the workspace's own (imported only when the workspace imported jaxtyping).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import inspect
import linecache
import re
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, TypedDict, cast

if TYPE_CHECKING:
    from typing import NotRequired  # Python 3.11: the worker also runs on 3.10

    from jaxlsp.worker.core.failures import Workspace
    from jaxlsp.worker.core.paths import Spelling

#: A checker factory (``beartype``, ``typeguard.typechecked``) or one of the checkers jaxtyping makes.
Checker = Callable[..., object]

MAX_CONTRACTS = 64  # violations kept per trace
MAX_BOUND_CALLS = 16  # calls of one function whose dimension sizes are recorded (for hover)
_DISPATCH = "__jaxlsp_contract_call__"  # the builtin the trampolines call
_PARAM = re.compile(r"typechecking parameter '(\w+)'")
_MEMO_HEADER = "The current values for each jaxtyping axis annotation are as follows."
_DTYPES = {"float": "f", "int": "i", "uint": "u", "bool": "bool", "complex": "c", "bfloat": "bf"}


class Binding(TypedDict):
    """A dimension jaxtyping had bound when a check failed, and where: the parameter and the call."""

    name: str
    size: str
    param: NotRequired[str]
    path: NotRequired[str]
    line: NotRequired[int]


class Source(TypedDict):
    """Where an annotation is written (in a notebook, its cell and lines within it)."""

    path: str
    line: int
    column: int
    endLine: int
    endColumn: int
    cell: NotRequired[int]


class _Site(TypedDict):
    path: str
    line: int


class Violation(TypedDict):
    """One broken contract, as the graph's ``contracts.violations`` holds it."""

    function: str
    param: str
    annotation: str
    got: str
    bindings: list[Binding]
    message: str
    source: Source


def uses_jaxtyping() -> bool:
    """Whether the user's code imported jaxtyping (we never import it on our own)."""
    return "jaxtyping" in sys.modules


def checker() -> tuple[Checker, str] | None:
    """The run-time type checker for jaxtyping (beartype, else typeguard) and its name; None when
    neither is installed in this interpreter."""
    try:
        from beartype import beartype

        return beartype, "beartype"
    except ImportError:
        pass
    try:
        from typeguard import typechecked  # type: ignore[import-not-found,unused-ignore]

        return typechecked, "typeguard"
    except ImportError:
        return None


def warm() -> None:
    """In the warm spare, before it forks: make one checker the way a capture makes them, call it
    on a passing and a failing pair of numpy arrays, and drop it, so that what jaxtyping and
    beartype build lazily on first use (their caches, their own late imports) is the spare's
    rather than every capture's (a capture's first checkers took twice as long without it: 25-48
    ms against 8-24 ms for the four of benchmarks/models/annotated.py). Only when jaxtyping and a
    checker are loaded already (equinox imports jaxtyping; the spare preloads beartype once a
    capture has used it): this imports neither."""
    if "jaxtyping" not in sys.modules or not {"beartype", "typeguard"} & set(sys.modules):
        return
    found = checker()
    if found is None:
        return
    import jaxtyping
    import numpy

    def probe(x: object, y: object) -> object:
        return x

    probe.__annotations__ = {
        "x": jaxtyping.Float[numpy.ndarray, "a b"],
        "y": jaxtyping.Float[numpy.ndarray, " b"],
        "return": jaxtyping.Float[numpy.ndarray, "a b"],
    }
    x, y = numpy.zeros((2, 3), numpy.float32), numpy.zeros(3, numpy.float32)
    try:
        entry = _Entry(probe, inspect.signature(probe), jaxtyping, found[0])  # type: ignore[arg-type]
        for check, out in ((entry.full(), x), (entry.params(), None)):
            entry.box[0] = out
            check(x, y)
            with contextlib.suppress(Exception):
                check(x, x)  # the failing path: jaxtyping's message, the checker's error
        _annotation_axes(probe, entry.signature, jaxtyping)  # type: ignore[arg-type]
    except Exception:  # another jaxtyping or checker than the ones measured: only the head start is lost
        return


class Contracts:
    """The check of one trace: ``with Contracts(...)`` around construction and tracing."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.violations: list[Violation] = []
        self.checked: set[str] = set()  # qualified names of the functions checked
        self.notes: list[str] = []
        self._seen: set[tuple[int, str]] = set()
        self._entries: dict[int, _Entry] = {}
        self._swapped: list[tuple[types.FunctionType, types.CodeType, inspect.Signature | None]] = []
        # function key -> dimension name -> the sizes its passing calls bound (hover's names)
        self._bound: dict[int, dict[str, set[int]]] = {}
        self._bound_calls: dict[int, int] = {}

    # -- setup -------------------------------------------------------------------------------------
    def __enter__(self) -> Contracts:
        import jaxtyping

        self._jaxtyping = jaxtyping
        annotated = [fn for fn in self._functions() if self._checkable(fn)]
        if not annotated:
            return self  # jaxtyping came in through a library (equinox): nothing of the user's to check
        found = checker()
        if found is None:
            self.notes.append("jaxtyping annotations not checked: install beartype or typeguard in the interpreter")
            return self
        self._typechecker = found[0]
        setattr(builtins, _DISPATCH, self._call)
        for fn in annotated:
            self._watch(fn)
        return self

    @property
    def active(self) -> bool:
        """Whether the graph gets a ``contracts`` section: something was checked, or could not be."""
        return bool(self.checked or self.notes)

    def __exit__(self, *exc: object) -> None:
        for fn, code, signature in reversed(self._swapped):
            fn.__code__ = code
            if signature is None:
                fn.__dict__.pop("__signature__", None)
            else:
                fn.__signature__ = signature  # type: ignore[attr-defined]
        self._swapped.clear()
        if getattr(builtins, _DISPATCH, None) == self._call:
            delattr(builtins, _DISPATCH)

    def _functions(self) -> list[types.FunctionType]:
        """Workspace functions and methods (unwrapped) defined in the workspace's loaded modules."""
        from jaxlsp.worker.core.failures import imported_since

        out: dict[int, types.FunctionType] = {}
        for module in imported_since():  # a forked capture: not the spare's libraries
            path = getattr(module, "__file__", None)
            if not isinstance(path, str) or not self.workspace.contains(path):
                continue
            name = getattr(module, "__name__", "")
            for value in list(vars(module).values()):
                for fn in _functions_of(value, name):
                    out.setdefault(id(fn), fn)
        return list(out.values())

    def _checkable(self, fn: types.FunctionType) -> bool:
        code = fn.__code__
        if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
            return False
        return self.workspace.contains(code.co_filename) and _annotated(fn, self._jaxtyping)

    def _watch(self, fn: types.FunctionType) -> None:
        try:
            signature = inspect.signature(fn)
            entry = _Entry(fn, signature, self._jaxtyping, self._typechecker)
            trampoline = _trampoline(fn, id(entry))
        except Exception:  # a signature we cannot copy (an unreadable annotation: at its first call)
            return
        self._entries[id(entry)] = entry
        self._swapped.append((fn, fn.__code__, fn.__dict__.get("__signature__")))
        fn.__signature__ = signature  # type: ignore[attr-defined]  # libraries that inspect it see the original
        fn.__code__ = trampoline
        self.checked.add(f"{fn.__module__}.{fn.__qualname__}")

    # -- each call ---------------------------------------------------------------------------------
    def _call(self, key: int, args: tuple[object, ...], kwargs: dict[str, object]) -> object:
        entry = self._entries[key]
        seen = _abstract(args, kwargs)
        if seen is not None and seen in entry.passed:
            return entry.original(*args, **kwargs)  # the same types passed before: same verdict
        if not entry.returns:  # nothing to check after the call: the parameters, before it
            check = self._checker(entry, entry.params)
            if check is None:
                return entry.original(*args, **kwargs)
            failed = self._check(entry, check, args, kwargs, None, sys._getframe(2))
            out = entry.original(*args, **kwargs)
        else:
            try:
                out = entry.original(*args, **kwargs)
            except BaseException:  # the body failed: a broken parameter may say why
                check = self._checker(entry, entry.params)
                if check is not None:
                    self._check(entry, check, args, kwargs, None, sys._getframe(2))
                raise
            # one check of parameters and return together (jaxtyping binds across both)
            check = self._checker(entry, entry.full)
            if check is None:
                return out
            failed = self._check(entry, check, args, kwargs, out, sys._getframe(2))
        if not failed and seen is not None:
            entry.passed.add(seen)
        if not failed and self._bound_calls.get(key, 0) < MAX_BOUND_CALLS:
            self._bound_calls[key] = self._bound_calls.get(key, 0) + 1
            self._record_sizes(key, entry, args, kwargs, out)
        return out

    def _checker(self, entry: _Entry, make: Callable[[], Checker]) -> Checker | None:
        """``entry``'s checker from ``make``; None when jaxtyping or the checker cannot read its
        annotations (the function is then called as it is, and not listed as checked)."""
        if entry.unreadable:
            return None
        try:
            return make()
        except Exception:
            entry.unreadable = True
            self.checked.discard(f"{entry.fn.__module__}.{entry.fn.__qualname__}")
            return None

    def _record_sizes(
        self, key: int, entry: _Entry, args: tuple[object, ...], kwargs: dict[str, object], out: object
    ) -> None:
        """The sizes a passing call bound to each plain dimension name (``batch`` in ``"batch
        d"``; names under ``*``/``...`` are read from the ends): what hover writes beside them."""
        try:
            bound = dict(entry.signature.bind(*args, **kwargs).arguments)
        except TypeError:
            return
        bound["return"] = out
        sizes = self._bound.setdefault(key, {})
        for name, words in entry.axes():
            shape = getattr(bound.get(name), "shape", None)
            if not isinstance(shape, tuple):
                continue
            for word, size in _align(words, shape):
                if isinstance(size, int):
                    sizes.setdefault(word, set()).add(size)

    def _check(
        self,
        entry: _Entry,
        check: Checker,
        args: tuple[object, ...],
        kwargs: dict[str, object],
        out: object,
        caller: types.FrameType | None,
    ) -> bool:
        """True when the check found a violation (recorded once per function and parameter)."""
        entry.box[0] = out
        try:
            check(*args, **kwargs)
            return False
        except Exception as exc:
            if not isinstance(exc, self._jaxtyping.TypeCheckError):
                return False  # not a shape contract (a bind error: the call itself fails next)
            message = str(exc)
        finally:
            entry.box[0] = None
        returning = out is not None and "return value" in message.split("\n", 1)[0]
        found = _PARAM.search(message)
        param = "return" if returning else found.group(1) if found else None
        if param is None:
            return True
        key = (id(entry), param)
        if key in self._seen or len(self.violations) >= MAX_CONTRACTS:
            return True
        self._seen.add(key)
        self.violations.append(self._violation(entry, param, args, kwargs, out, message, caller))
        return True

    def _violation(
        self,
        entry: _Entry,
        param: str,
        args: tuple[object, ...],
        kwargs: dict[str, object],
        out: object,
        message: str,
        caller: types.FrameType | None,
    ) -> Violation:
        try:
            bound = entry.signature.bind(*args, **kwargs).arguments
        except TypeError:
            bound = {}
        value = out if param == "return" else bound.get(param)
        annotation = entry.text(param)
        call = self._call_site(caller)
        dims = _memo(message)
        bindings: list[Binding] = []
        for dim, size in dims.items():
            binder = entry.binder(dim, param)
            item: Binding = {"name": dim, "size": size}
            if binder is not None:
                item["param"] = binder
            if call is not None:
                item["path"], item["line"] = call["path"], call["line"]
            bindings.append(item)
        got = type_text(value)
        said = ", ".join(
            f"{b['name']}={b['size']}"
            + (f" from {b['param']}" if "param" in b else "")
            + (f" at {b['path']}:{b['line']}" if "path" in b else "")
            for b in bindings
        )
        where = entry.where(param)
        text = f"{param}: expected {annotation}, got {got}" + (f" ({said})" if said else "")
        return {
            "function": f"{entry.fn.__module__}.{entry.fn.__qualname__}",
            "param": param,
            "annotation": annotation,
            "got": got,
            "bindings": bindings,
            "message": text,
            "source": self._frame(where),
        }

    def _call_site(self, frame: types.FrameType | None) -> _Site | None:
        """The innermost workspace frame at or above ``frame`` (the user's call)."""
        while frame is not None:
            path = frame.f_code.co_filename
            if self.workspace.contains(path) and not path.startswith("<"):
                return {"path": path, "line": frame.f_lineno}
            frame = frame.f_back
        return None

    def _frame(self, where: tuple[str, int, int, int, int]) -> Source:
        path, line, column, end_line, end_column = where
        frame = {"path": path, "line": line, "column": column, "endLine": end_line, "endColumn": end_column}
        return cast("Source", dict(self.workspace.place(frame)))  # the same keys, a cell's added

    def section(self, spelling: Spelling) -> dict[str, object]:
        """The graph's ``contracts`` section, its paths spelled as the graph's (worker/core/paths.py)."""
        violations = []
        for v in self.violations:
            bindings = [{**b, "path": spelling.relative(b["path"])} if "path" in b else b for b in v["bindings"]]
            said = ", ".join(
                f"{b['name']}={b['size']}"
                + (f" from {b['param']}" if "param" in b else "")
                + (f" at {b['path']}:{b['line']}" if "path" in b else "")
                for b in bindings
            )
            message = f"{v['param']}: expected {v['annotation']}, got {v['got']}" + (f" ({said})" if said else "")
            source = {**v["source"], "path": spelling.relative(v["source"]["path"])}
            violations.append({**v, "bindings": bindings, "source": source, "message": message})
        out: dict[str, object] = {"checked": sorted(self.checked), "violations": violations}
        dims = []
        for key, names in self._bound.items():
            entry = self._entries[key]
            code = entry.original.__code__
            last = max((line for _, _, line in code.co_lines() if line), default=code.co_firstlineno)
            plain = {name: sorted(sizes)[0] for name, sizes in sorted(names.items()) if len(sizes) == 1}
            if plain:
                dims.append(
                    {
                        "function": f"{entry.fn.__module__}.{entry.fn.__qualname__}",
                        "path": spelling.relative(code.co_filename),
                        "line": code.co_firstlineno,
                        "endLine": last,
                        "dims": plain,
                    }
                )
        if dims:
            out["dims"] = dims
        if self.notes:
            out["notes"] = list(self.notes)
        return out


class _Entry:
    """One watched function: its original (a copy with the original code), its signature, and
    jaxtyping's checkers of its parameters and of parameters and return together.

    The checkers are made at the function's first call, each when first needed: decorating is
    jaxtyping's and beartype's code generation (2-4 ms a checker), and most annotated functions of
    a workspace are not called by a given trace; a function with a return annotation needs its
    parameters-only checker only when its body fails."""

    def __init__(
        self, fn: types.FunctionType, signature: inspect.Signature, jaxtyping: types.ModuleType, typechecker: Checker
    ) -> None:
        self.fn = fn
        self.signature = signature
        self.original = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
        self.original.__kwdefaults__ = fn.__kwdefaults__
        self.original.__qualname__ = fn.__qualname__
        self.original.__module__ = fn.__module__
        self.box: list[object] = [None]
        self.passed: set[tuple[object, ...]] = set()  # abstract argument types whose calls passed
        self.returns = signature.return_annotation is not inspect.Signature.empty
        self._jaxtyping = jaxtyping
        self._typechecker = typechecker
        self._params: Checker | None = None
        self._full: Checker | None = None
        self._names: list[tuple[str, set[str]]] | None = None
        self._axes: list[tuple[str, list[str]]] | None = None
        self.unreadable = False  # making a checker failed: an annotation jaxtyping cannot read

    def params(self) -> Checker:
        """jaxtyping's checker of the parameters alone."""
        if self._params is None:
            only = self.signature.replace(return_annotation=inspect.Signature.empty)
            self._params = cast("Checker", self._jaxtyping.jaxtyped(typechecker=self._typechecker)(self._shadow(only)))
        return self._params

    def full(self) -> Checker:
        """jaxtyping's checker of the parameters and the return together (one binding of names)."""
        if self._full is None:
            self._full = cast(
                "Checker", self._jaxtyping.jaxtyped(typechecker=self._typechecker)(self._shadow(self.signature))
            )
        return self._full

    def axes(self) -> list[tuple[str, list[str]]]:
        if self._axes is None:
            self._axes = _annotation_axes(self.fn, self.signature, self._jaxtyping)
        return self._axes

    def _shadow(self, signature: inspect.Signature) -> types.FunctionType:
        box = self.box

        def shadow(*args: object, **kwargs: object) -> object:
            return box[0]

        # the user's globals, for string annotations (from __future__ import annotations)
        made = types.FunctionType(shadow.__code__, self.fn.__globals__, self.fn.__name__, None, shadow.__closure__)
        made.__qualname__ = self.fn.__qualname__
        made.__module__ = self.fn.__module__
        made.__signature__ = signature  # type: ignore[attr-defined]
        return made

    def text(self, param: str) -> str:
        """The annotation as written in the source (else as jaxtyping prints it)."""
        node = self._node(param)
        if node is not None:
            return node[1]
        annotation = (
            self.signature.return_annotation
            if param == "return"
            else self.signature.parameters[param].annotation
            if param in self.signature.parameters
            else "?"
        )
        return annotation if isinstance(annotation, str) else _short(repr(annotation))

    def where(self, param: str) -> tuple[str, int, int, int, int]:
        """The annotation's place in the source (the ``def`` line when it cannot be read)."""
        code = self.original.__code__
        node = self._node(param)
        if node is not None:
            return (code.co_filename, *node[0])
        return (code.co_filename, code.co_firstlineno, 0, code.co_firstlineno, 1)

    def _node(self, param: str) -> tuple[tuple[int, int, int, int], str] | None:
        """Where ``param``'s annotation (or the return's) is written, and its text."""
        code = self.original.__code__
        found = _def_statement(linecache.getlines(code.co_filename), code.co_firstlineno)
        if found is None:
            return None
        func, text, line0, indent = found
        target: ast.expr | None = None
        if param == "return":
            target = func.returns
        else:
            every = [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]
            every += [a for a in (func.args.vararg, func.args.kwarg) if a is not None]
            target = next((a.annotation for a in every if a.arg == param), None)
        if target is None or target.end_lineno is None or target.end_col_offset is None:
            return None
        segment = ast.get_source_segment(text, target) or ""
        place = (
            target.lineno + line0,
            target.col_offset + indent,
            target.end_lineno + line0,
            target.end_col_offset + indent,
        )
        return place, segment

    def binder(self, dim: str, param: str) -> str | None:
        """The first parameter (in order) whose annotation names ``dim``: where jaxtyping bound it."""
        if self._names is None:
            self._names = _annotation_dims(self.fn, self.signature, self._jaxtyping)
        for name, dims in self._names:
            if dim in dims:
                return name
        return None


def _def_statement(lines: list[str], first: int) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, str, int, int] | None:
    """The ``def`` at or after line ``first`` (decorators come first) parsed alone: its node, the
    dedented text, the line offset and the indentation to add back to the node's positions."""
    index = first - 1
    while index < len(lines) and not lines[index].lstrip().startswith(("def ", "async def ")):
        index += 1
    if index >= len(lines):
        return None
    indent = len(lines[index]) - len(lines[index].lstrip())
    for count in range(1, 40):  # the header may spread over lines: until it parses with a body
        chunk = [
            line[indent:] if line[:indent].strip() == "" else line.lstrip() for line in lines[index : index + count]
        ]
        text = "".join(chunk) + "\n    pass\n"
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        func = tree.body[0] if tree.body else None
        if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            return func, text, index, indent
        return None
    return None


def _annotated(fn: types.FunctionType, jaxtyping: types.ModuleType) -> bool:
    annotations = getattr(fn, "__annotations__", None) or {}
    return any(_is_jaxtyping(a, jaxtyping, fn.__globals__) for a in annotations.values())


def _is_jaxtyping(annotation: object, jaxtyping: types.ModuleType, scope: dict[str, object]) -> bool:
    if isinstance(annotation, str):
        try:
            annotation = eval(annotation, scope)  # the user's own annotation, in the user's module
        except Exception:
            return False
    if isinstance(annotation, type) and issubclass(annotation, jaxtyping.AbstractArray):
        return True
    args = getattr(annotation, "__args__", None)
    return isinstance(args, tuple) and any(_is_jaxtyping(a, jaxtyping, scope) for a in args)


def _annotations(fn: types.FunctionType, signature: inspect.Signature) -> list[tuple[str, object]]:
    """Each parameter's annotation (in order, then ``return``), string annotations evaluated in the
    function's globals; one that does not evaluate is left out."""
    out: list[tuple[str, object]] = []
    items = [(n, p.annotation) for n, p in signature.parameters.items()] + [("return", signature.return_annotation)]
    for name, annotation in items:
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, fn.__globals__)
            except Exception:
                continue
        out.append((name, annotation))
    return out


def _annotation_dims(
    fn: types.FunctionType, signature: inspect.Signature, jaxtyping: types.ModuleType
) -> list[tuple[str, set[str]]]:
    """Each annotated parameter (in order, then ``return``) with the dimension names it uses."""
    out: list[tuple[str, set[str]]] = []
    for name, annotation in _annotations(fn, signature):
        dims: set[str] = set()
        for one in _arrays(annotation, jaxtyping):
            for word in str(getattr(one, "dim_str", "")).replace(",", " ").split():
                word = word.lstrip("*#").split("=")[0]
                if word.isidentifier():
                    dims.add(word)
        if dims:
            out.append((name, dims))
    return out


def _annotation_axes(
    fn: types.FunctionType, signature: inspect.Signature, jaxtyping: types.ModuleType
) -> list[tuple[str, list[str]]]:
    """Each parameter (and ``return``) annotated with exactly one array type, and its axis words."""
    out: list[tuple[str, list[str]]] = []
    for name, annotation in _annotations(fn, signature):
        arrays = _arrays(annotation, jaxtyping)
        if len(arrays) == 1:
            out.append((name, str(getattr(arrays[0], "dim_str", "")).split()))
    return out


def _align(words: list[str], shape: tuple[object, ...]) -> list[tuple[str, object]]:
    """Plain axis names paired with their sizes; a variadic axis (``*b``, ``...``) splits the
    words into those read from the front and those read from the back."""
    variadic = [i for i, w in enumerate(words) if w.startswith("*") or w == "..."]
    if len(variadic) > 1 or (not variadic and len(words) != len(shape)):
        return []
    cut = variadic[0] if variadic else len(words)
    front = list(zip(words[:cut], shape[:cut], strict=False))
    back = list(zip(reversed(words[cut + 1 :]), reversed(shape), strict=False)) if variadic else []
    out = []
    for word, size in front + back:
        word = word.lstrip("#")
        if word.isidentifier() and word != "_":
            out.append((word, size))
    return out


def _arrays(annotation: object, jaxtyping: types.ModuleType) -> list[type]:
    if isinstance(annotation, type) and issubclass(annotation, jaxtyping.AbstractArray):
        return [annotation]
    found: list[type] = []
    for arg in getattr(annotation, "__args__", None) or ():
        found += _arrays(arg, jaxtyping)
    return found


def _functions_of(value: object, module: str) -> list[types.FunctionType]:
    """The plain functions ``value`` is or wraps, and a class's own methods, defined in ``module``."""
    out: list[types.FunctionType] = []
    if isinstance(value, type):
        if value.__module__ != module:
            return out
        for member in list(vars(value).values()):
            if isinstance(member, staticmethod | classmethod):
                member = member.__func__
            out += [f for f in _unwrapped(member) if f.__module__ == module]
        return out
    return [f for f in _unwrapped(value) if f.__module__ == module]


def _unwrapped(value: object) -> list[types.FunctionType]:
    seen = 0
    while not isinstance(value, types.FunctionType) and seen < 8:
        inner = getattr(value, "__wrapped__", None) or getattr(value, "__func__", None)
        if inner is None:
            return []
        value, seen = inner, seen + 1
    out = [value] if isinstance(value, types.FunctionType) else []
    inner = getattr(value, "__wrapped__", None)  # a plain functools.wraps wrapper: the function inside too
    if isinstance(inner, types.FunctionType):
        out.append(inner)
    return out


_TRAMPOLINE = """
def __jaxlsp_make__({free}):
    def {name}(*__jaxlsp_args, **__jaxlsp_kwargs):
        if 0:
            ({refs})
        return __jaxlsp_contract_call__({key}, __jaxlsp_args, __jaxlsp_kwargs)
    return {name}
"""


def _trampoline(fn: types.FunctionType, key: int) -> types.CodeType:
    """A code object with ``fn``'s free variables that hands the call to the dispatcher."""
    free = fn.__code__.co_freevars
    source = _TRAMPOLINE.format(
        free=", ".join(free),
        name=fn.__code__.co_name if fn.__code__.co_name.isidentifier() else "f",
        refs=", ".join(free) + ("," if len(free) == 1 else "") if free else "None",
        key=key,
    )
    scope: dict[str, object] = {}
    exec(compile(source, __file__, "exec"), scope)  # our own template, no user text
    make = cast("Callable[..., types.FunctionType]", scope["__jaxlsp_make__"])  # the template's def
    code: types.CodeType = make(*([None] * len(free))).__code__
    if code.co_freevars != free:  # a closure's cells are matched by position: same names, same order
        raise ValueError("free variables differ")
    return code


def _abstract(args: tuple[object, ...], kwargs: dict[str, object]) -> tuple[object, ...] | None:
    """The call's arguments as types (arrays by shape and dtype, scalars by value): two calls with
    the same get the same verdict. None when an argument is anything else (a pytree, a module)."""
    out: list[object] = []
    for value in (*args, *(v for _, v in sorted(kwargs.items()))):
        shape = getattr(value, "shape", None)
        if isinstance(shape, tuple) and hasattr(value, "dtype"):
            out.append((shape, str(value.dtype), type(value)))
        elif value is None or isinstance(value, bool | int | float | str):
            out.append((type(value), value))
        else:
            return None
    return (tuple(sorted(kwargs)), *out)


def type_text(value: object) -> str:
    """``f32[8,64]`` for an array (a tracer), else the value's type name."""
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is None or dtype is None:
        return type(value).__name__
    name = str(getattr(dtype, "name", dtype))
    short = name
    for prefix, letter in _DTYPES.items():
        if name.startswith(prefix) and name[len(prefix) :].isdigit():
            short = letter + name[len(prefix) :]
            break
    return f"{short}[{','.join(str(d) for d in shape)}]"


def _memo(message: str) -> dict[str, str]:
    """The dimension sizes jaxtyping had bound when the check failed (its message's list)."""
    if _MEMO_HEADER not in message:
        return {}
    out: dict[str, str] = {}
    for line in message.split(_MEMO_HEADER, 1)[1].strip().splitlines():
        name, sep, size = line.partition("=")
        if not sep or not name.strip().lstrip("*").isidentifier():
            break
        out[name.strip()] = size.strip()
    return out


def _short(text: str) -> str:
    return text.replace("jaxlib._jax.Array", "Array").replace("jaxlib.xla_extension.ArrayImpl", "Array")
