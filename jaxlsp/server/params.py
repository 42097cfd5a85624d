"""Custom request parameters, checked against their ``wire.py`` types before any handler runs.

:func:`parse` walks a ``TypedDict`` from :mod:`jaxlsp.server.wire` and the JSON a client sent
side by side: types, ``Literal`` choices, string lengths (``Annotated[str, Size(n)]``, else
:data:`MAX_STRING`), container sizes, nesting below ``Any`` members, NUL characters. A mismatch is
``-32602`` naming the key path (``params.textDocument.uri``) and quoting at most a short prefix of
the value, so a 10 MB param never comes back.
"""

from __future__ import annotations

import functools
import types as pytypes
import typing
from pathlib import Path
from typing import Any, Literal, NotRequired, Required, TypeVar, get_args, get_origin, get_type_hints
from urllib.parse import unquote, urlsplit

from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from jaxlsp.graph.store import GraphStore, Trace
from jaxlsp.server.wire import Size
from jaxlsp.textfiles import unresolvable

T = TypeVar("T")
MAX_STRING = 8192  # characters in a string param with no Size of its own
MAX_ITEMS = 10_000  # members of a list or object with no Size of its own
MAX_ANY_DEPTH = 16  # nesting inside a member typed Any (needs-input answers)
MAX_MESSAGE = 2000  # characters of an error message
QUOTE = 60  # characters of a client's value quoted in an error
PATH_QUOTE = 1000  # characters of a path quoted in an error: the file's name must be in it
REQUEST_FAILED = -32803  # LSP's RequestFailed: well-formed params, but nothing to answer them with


def as_dict(value: Any) -> Any:
    """pygls hands a command's arguments over as namedtuples: turn them back into plain data."""
    if hasattr(value, "_asdict"):
        return {k: as_dict(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: as_dict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_dict(v) for v in value]
    return value


def shown(value: Any, limit: int = QUOTE) -> str:
    """``repr(value)`` cut to ``limit`` characters: errors quote what the client sent, never 10 MB."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value):,} characters)"
    text = repr(value) if not isinstance(value, (dict, list)) or len(value) < 100 else f"<{type(value).__name__}>"
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def invalid(message: str) -> JsonRpcInvalidParams:
    err = JsonRpcInvalidParams()
    err.message = message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE] + " [...]"
    return err


def known_trace(store: GraphStore, trace_id: str) -> Trace:
    """The kept trace ``trace_id``; RequestFailed naming it when the server has none."""
    found = store.get(trace_id)
    if found is None:
        raise JsonRpcException(f"unknown trace: {shown(trace_id)}", code=REQUEST_FAILED)
    return found


def parse(value: Any, shape: type[T], where: str = "params") -> T:
    """``value`` checked against the ``TypedDict`` ``shape``; raises -32602 at the first mismatch.
    An optional member sent as ``null`` is absent from the result, as the check reads it: a
    handler asking ``"uri" in data`` never meets a ``None``."""
    data = as_dict(value)
    _check(data, shape, where, None)
    return typing.cast(T, _without_nulls(data, shape))


def _without_nulls(value: Any, hint: Any) -> Any:
    """``value`` (checked against ``hint``) without the optional object members that are ``null``,
    at every level the hint's objects reach."""
    while get_origin(hint) in (NotRequired, Required, typing.Annotated):
        hint = get_args(hint)[0]
    if not typing.is_typeddict(hint) or not isinstance(value, dict):
        return value
    members = _members(hint)
    out: dict[str, Any] = {}
    for key, member in value.items():
        if key not in members:
            out[key] = member
        elif member is not None or members[key][1]:
            out[key] = _without_nulls(member, members[key][0])
    return out


def _check(value: Any, hint: Any, where: str, size: Size | None) -> None:
    origin = get_origin(hint)
    if origin in (NotRequired, Required):
        _check(value, get_args(hint)[0], where, size)
        return
    if origin is typing.Annotated:
        inner, *extras = get_args(hint)
        bound = next((e for e in extras if isinstance(e, Size)), size)
        _check(value, inner, where, bound)
        return
    if hint is Any:
        _check_any(value, where, 0)
        return
    if typing.is_typeddict(hint):
        _check_object(value, hint, where)
        return
    if origin is Literal:
        choices = get_args(hint)
        if value not in choices or isinstance(value, bool) != any(isinstance(c, bool) for c in choices):
            raise invalid(f"{where}: expected one of {', '.join(map(str, choices))}, got {shown(value)}")
        return
    if origin in (typing.Union, pytypes.UnionType):
        errors = []
        for option in get_args(hint):
            try:
                _check(value, option, where, size)
                return
            except JsonRpcInvalidParams as exc:
                errors.append(exc.message)
        raise invalid(errors[0] if len(errors) == 1 else f"{where}: expected {_describe(hint)}, got {shown(value)}")
    if origin is list:
        if not isinstance(value, list):
            raise invalid(f"{where}: expected a list, got {shown(value)}")
        _bound(len(value), size, MAX_ITEMS, where, "items")
        (item,) = get_args(hint)
        for i, member in enumerate(value):
            _check(member, item, f"{where}[{i}]", None)
        return
    if origin is dict:
        if not isinstance(value, dict):
            raise invalid(f"{where}: expected an object, got {shown(value)}")
        _bound(len(value), size, MAX_ITEMS, where, "members")
        key_hint, item = get_args(hint)
        for key, member in value.items():
            path = f"{where}[{shown(key)}]"
            _check(key, key_hint, f"{path} (the key)", None)
            _check(member, item, path, None)
        return
    if hint is type(None):
        if value is not None:
            raise invalid(f"{where}: expected null, got {shown(value)}")
        return
    if hint is str:
        if not isinstance(value, str):
            raise invalid(f"{where}: expected a string, got {shown(value)}")
        _bound(len(value), size, MAX_STRING, where, "characters")
        if "\x00" in value:
            raise invalid(f"{where}: contains a NUL character")
        return
    if hint is bool:
        if not isinstance(value, bool):
            raise invalid(f"{where}: expected true or false, got {shown(value)}")
        return
    if hint is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise invalid(f"{where}: expected an integer, got {shown(value)}")
        return
    if hint is float:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise invalid(f"{where}: expected a number, got {shown(value)}")
        return
    raise TypeError(f"params.parse cannot check {hint!r} at {where}")  # a wire type we do not support


def _check_object(value: Any, shape: Any, where: str) -> None:
    if not isinstance(value, dict):
        raise invalid(f"{where}: expected an object, got {shown(value)}")
    for key, (hint, required) in _members(shape).items():
        if key not in value or (value[key] is None and not required):
            if required:
                raise invalid(f"{where}.{key}: missing")
            continue
        _check(value[key], hint, f"{where}.{key}", None)


@functools.cache
def _members(shape: Any) -> dict[str, tuple[Any, bool]]:
    """A TypedDict's members with whether each is required. Read from the resolved hints:
    ``__required_keys__`` cannot see ``NotRequired`` in string annotations before Python 3.12."""
    out = {}
    for key, hint in get_type_hints(shape, include_extras=True).items():
        optional = get_origin(hint) is NotRequired or (not shape.__total__ and get_origin(hint) is not Required)
        out[key] = (hint, not optional)
    return out


def _check_any(value: Any, where: str, depth: int) -> None:
    if depth > MAX_ANY_DEPTH:
        raise invalid(f"{where}: nested deeper than {MAX_ANY_DEPTH} levels")
    if isinstance(value, str):
        _bound(len(value), None, MAX_STRING, where, "characters")
    elif isinstance(value, list):
        _bound(len(value), None, MAX_ITEMS, where, "items")
        for i, member in enumerate(value):
            _check_any(member, f"{where}[{i}]", depth + 1)
    elif isinstance(value, dict):
        _bound(len(value), None, MAX_ITEMS, where, "members")
        for key, member in value.items():
            _bound(len(key), None, MAX_STRING, f"{where} (a key)", "characters")
            _check_any(member, f"{where}[{shown(key)}]", depth + 1)


def _bound(count: int, size: Size | None, default: int, where: str, unit: str) -> None:
    most = size.most if size is not None else default
    if count > most:
        raise invalid(f"{where}: too long ({count:,} {unit}; at most {most:,})")
    if size is not None and count < size.least:
        raise invalid(f"{where}: expected at least {size.least} {unit}, got {count}")


def _describe(hint: Any) -> str:
    names = []
    for option in get_args(hint):
        base = get_origin(option) or option
        names.append(
            "null" if option is type(None) else getattr(base, "__name__", str(option)).replace("dict", "an object")
        )
    return " or ".join(names)


def file_path(uri: str, where: str) -> Path:
    """The local path of a ``file:`` URI; anything else (other schemes, NUL bytes, a path that
    cannot be followed: a symlink loop) is -32602 naming the file."""
    if not uri.startswith("file:"):
        raise invalid(f"{where}: only file: URIs are supported, got {shown(uri)}")
    parts = urlsplit(uri)
    path = unquote(parts.path)
    if "\x00" in path:
        raise invalid(f"{where}: the path contains a NUL character")
    if parts.netloc not in ("", "localhost") or not path.startswith("/"):
        raise invalid(f"{where}: cannot map {shown(uri)} to a local file")
    why = unresolvable(Path(path))
    if why is not None:
        raise invalid(f"{where}: {shown(path, PATH_QUOTE)}: {why}")
    return Path(path)


def local_path(uri: str) -> Path | None:
    """The file a standard request's URI names, or None (not a ``file:`` URI, not local): standard
    methods answer nothing for those rather than an error."""
    try:
        return file_path(uri, "uri")
    except JsonRpcInvalidParams:
        return None
