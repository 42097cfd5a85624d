"""One message body: decoded, checked against the bounds (nesting, lengths, values, lone
surrogates) before anything is structured, and handed to the protocol (:class:`Dispatch`), or
answered with the JSON-RPC error that says why not."""

from __future__ import annotations

import json
import logging
import re
from typing import Any, Protocol

from lsprotocol import types
from pygls.exceptions import JsonRpcException

log = logging.getLogger(__package__)  # one logger for the transport, as before it was a package

MAX_DEPTH = 64  # nesting of objects and arrays in one message (LSP's own are under 12)
MAX_ITEMS = 10_000  # members of one list or object (params.py allows as many in our own methods)
MAX_VALUES = 500_000  # values in one message, all lists and objects together
# Lists that are long in ordinary use: a branch switch changes every file of a large repository.
LONG_LISTS = {"workspace/didChangeWatchedFiles": {"params.changes": 100_000}}
# A lone surrogate can reach a string only through a \uD800-\uDFFF escape (UTF-8 has no bytes for
# one): the body is searched for such an escape before any string is looked at.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602
# What a too-long length takes of the next message: a header name, whole or cut short.
_HEADER_START = re.compile(rb"[A-Za-z][A-Za-z0-9-]*(?::|\Z)")
ID_WITHIN = 64 * 1024  # bytes of a body that did not parse searched for its id (an id comes early)


class Dispatch(Protocol):
    """What the loop needs of the protocol (``JaxProtocol``)."""

    def structure_message(self, data: dict[str, Any]) -> Any: ...

    def handle_message(self, message: Any) -> None: ...

    def send_error(self, msg_id: int | str | None, code: int, message: str) -> None: ...

    def notify(self, method: str, params: Any = None) -> None: ...


def overlong(body: bytes) -> tuple[Any, bytes] | None:
    """A body that is one complete JSON value followed by the start of a header: the message and
    what its too-long ``Content-Length`` took of the next one; None for any other body."""
    try:
        text = body.decode("utf-8")
        value, end = json.JSONDecoder().raw_decode(text)
    except (ValueError, RecursionError):
        return None
    rest = body[len(text[:end].encode("utf-8")) :]
    if _HEADER_START.match(rest.lstrip()) is None:
        return None
    return value, rest


def handle_body(body: bytes, protocol: Dispatch) -> bytes:
    """Decode one message body and dispatch it, answering what cannot be dispatched; what belongs
    to the next message (a length too long, see :func:`overlong`) is returned to be read again."""
    rest = b""
    try:
        data = json.loads(body)
    except RecursionError:
        protocol.send_error(top_level_id(body), INVALID_REQUEST, f"the message nests deeper than {MAX_DEPTH} levels")
        return rest
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        split = overlong(body)
        if split is None:
            protocol.send_error(top_level_id(body), PARSE_ERROR, f"the message is not JSON: {str(exc)[:200]}")
            return rest
        data, rest = split
        log.warning("a Content-Length was %s bytes too long: they are read again as the next header", f"{len(rest):,}")
    dispatch(data, protocol, _SURROGATE_ESCAPE.search(body) is not None)
    return rest


def dispatch(data: Any, protocol: Dispatch, escapes_surrogates: bool = False) -> None:
    """Check one decoded message and hand it to the protocol. ``escapes_surrogates``: the body
    holds a ``\\uD800``-``\\uDFFF`` escape, so a string may hold a lone surrogate (see
    :func:`lone_surrogates`)."""
    if not isinstance(data, dict):
        protocol.send_error(None, INVALID_REQUEST, f"a message must be a JSON object, got {type(data).__name__}")
        return
    msg_id = data.get("id")
    msg_id = msg_id if isinstance(msg_id, (int, str)) and not isinstance(msg_id, bool) else None
    is_request = msg_id is not None and isinstance(data.get("method"), str)
    problem = oversized(data)
    if problem is not None:
        code, text = problem
        if is_request or code == INVALID_REQUEST:
            protocol.send_error(msg_id, code, text)
        if not is_request:
            method = str(data.get("method"))[:100]
            text = f"dropped {f'a {method} notification' if 'method' in data else 'a message'}: {text}"
            log.warning("%s", text)
            if "method" in data:
                show_warning(protocol, text)
        return
    if escapes_surrogates and not lone_surrogates(data, protocol, msg_id if is_request else None):
        return
    if data.get("method") == "$/cancelRequest" and "id" not in data and _cancel(data, protocol):
        return
    try:
        message = protocol.structure_message(data)
    except JsonRpcException as exc:
        if is_request:
            method = str(data["method"])[:100]
            protocol.send_error(msg_id, INVALID_PARAMS, f"{method}: params do not fit the method's type")
        else:
            log.warning("dropped a message that does not fit its type: %s", exc)
        return
    try:
        protocol.handle_message(message)
    except Exception:  # a handler's failure is answered by pygls; this only keeps the loop alive
        log.exception("unable to handle a message")


def _cancel(data: dict[str, Any], protocol: Dispatch) -> bool:
    """A ``$/cancelRequest`` with a well-formed id, handed to the protocol's ``cancel_request``
    without structuring it into a message (a storm is thousands of them, each hovers queue behind:
    cattrs and pygls' dispatch cost several times the cancel itself); False for anything else."""
    cancel = getattr(protocol, "cancel_request", None)
    params = data.get("params")
    target = params.get("id") if type(params) is dict else None
    if cancel is None or data.get("jsonrpc") != "2.0" or type(target) not in (int, str):
        return False
    cancel(target)
    return True


def oversized(message: dict[str, Any]) -> tuple[int, str] | None:
    """Why ``message`` is refused before it is structured, as an error code and a sentence naming
    the key path; None when it is within the bounds. Structuring a list costs per item what
    reading it costs per byte a hundred times over (lsprotocol's cattrs hooks), so lists and
    objects are bounded by their length (:data:`MAX_ITEMS`, :data:`LONG_LISTS`) and the whole
    message by how many values it holds (:data:`MAX_VALUES`), each read with ``len`` alone: the
    walk stops at the first container over a bound, and never visits a string's characters or a
    list of scalars' items."""
    method = message.get("method")
    long_lists = LONG_LISTS.get(method, {}) if isinstance(method, str) else {}
    values = 0
    # A key path is (parent's path, key), spelt out only for an error: formatting one per value
    # cost more than the rest of the walk.
    stack: list[tuple[Any, Any, int]] = [(message, None, 1)]
    while stack:
        item, path, level = stack.pop()
        if level > MAX_DEPTH:
            return INVALID_REQUEST, f"the message nests deeper than {MAX_DEPTH} levels"
        if len(item) > MAX_ITEMS:
            where = key_path(path)
            most = long_lists.get(where, MAX_ITEMS)
            if len(item) > most:
                unit = "members" if isinstance(item, dict) else "items"
                return INVALID_PARAMS, f"{where or 'the message'}: too long ({len(item):,} {unit}; at most {most:,})"
        values += len(item)
        if values > MAX_VALUES:
            return INVALID_PARAMS, f"{key_path(path) or 'the message'}: the message holds over {MAX_VALUES:,} values"
        pairs = enumerate(item) if type(item) is list else item.items()
        deeper = level + 1
        if deeper > MAX_DEPTH:  # an empty child is as deep as a full one
            stack.extend((child, (path, key), deeper) for key, child in pairs if type(child) in _CONTAINERS)
        else:  # empty children hold nothing to check
            stack.extend((child, (path, key), deeper) for key, child in pairs if type(child) in _CONTAINERS and child)
    return None


_CONTAINERS = (dict, list)  # what json.loads makes of objects and arrays (exact types: faster)


def key_path(path: Any) -> str:
    """``params.context.diagnostics[3]`` for the linked path ``(((None, "params"), ...), 3)``."""
    keys = []
    while path is not None:
        path, key = path
        keys.append(f"[{key}]" if isinstance(key, int) else f".{str(key)[:60]}")
    # A key may hold what cannot be written as UTF-8: shown as its escape.
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", "".join(reversed(keys)).lstrip("."))


def lone_surrogates(message: dict[str, Any], protocol: Dispatch, msg_id: int | str | None) -> bool:
    """Whether ``message`` may be dispatched, with no string holding a lone surrogate (``"\\ud800"``
    is valid JSON but not Unicode text: a path or document holding one fails deep in a handler,
    with an internal error). A request (``msg_id``) is refused with ``-32602`` naming the key path;
    a notification (a document's text) keeps its strings with each lone surrogate replaced by
    U+FFFD, one UTF-16 unit for one, so positions the client sends later still fit, and the user is
    told (a log line and ``window/showMessage``)."""
    found: list[str] = []
    stack: list[tuple[Any, Any]] = [(message, None)]
    while stack:
        item, path = stack.pop()
        pairs = enumerate(item) if type(item) is list else item.items()
        for key, child in pairs:
            where = (path, key)
            if type(key) is str and _SURROGATE.search(key):
                if msg_id is not None:
                    return _refuse_surrogate(protocol, msg_id, f"{key_path(where)} (a key)")
                return _drop_surrogate(message, protocol, f"{key_path(where)} (a key)")
            if type(child) is str:
                if _SURROGATE.search(child):
                    if msg_id is not None:
                        return _refuse_surrogate(protocol, msg_id, key_path(where))
                    item[key] = _SURROGATE.sub("\ufffd", child)
                    found.append(key_path(where))
            elif type(child) in _CONTAINERS:
                stack.append((child, where))
    if found:
        text = (
            f"{str(message.get('method'))[:100]}: {', '.join(found[:3])}{' and more' if len(found) > 3 else ''} "
            "held lone surrogates (not Unicode text): each was replaced by U+FFFD"
        )
        log.warning("%s", text)
        show_warning(protocol, text)
    return True


def show_warning(protocol: Dispatch, text: str) -> None:
    """Tell the user (``window/showMessage``) what was done to a message of theirs."""
    protocol.notify(types.WINDOW_SHOW_MESSAGE, types.ShowMessageParams(types.MessageType.Warning, f"jaxlsp: {text}"))


def _refuse_surrogate(protocol: Dispatch, msg_id: int | str, where: str) -> bool:
    protocol.send_error(msg_id, INVALID_PARAMS, f"{where}: holds a lone surrogate (not Unicode text)")
    return False


def _drop_surrogate(message: dict[str, Any], protocol: Dispatch, where: str) -> bool:
    text = f"dropped a {str(message.get('method'))[:100]} message: {where} holds a lone surrogate"
    log.warning("%s", text)
    show_warning(protocol, text)
    return False


def top_level_id(body: bytes) -> int | str | None:
    """The ``id`` member of the outermost object of a body that did not parse, when it can be read."""
    text = body[:ID_WITHIN].decode("utf-8", errors="replace")
    level = 0
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"':
            end = _string_end(text, i)
            if end < 0:
                return None
            if level == 1 and text[i:end] == '"id"':
                match = _ID_VALUE.match(text, end)
                if match is None or match.end() == len(text):
                    return None  # no id, or one that may go on past what was read
                raw = match.group(1)
                try:
                    value = json.loads(raw)
                except ValueError:
                    return None
                return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None
            i = end
            continue
        if c in "{[":
            level += 1
        elif c in "}]":
            level -= 1
        i += 1
    return None


_ID_VALUE = re.compile(r'\s*:\s*(-?\d+|"(?:[^"\\]|\\.){0,200}")')


def _string_end(text: str, start: int) -> int:
    """Index just past the string literal starting at ``start``, or -1 when it never closes."""
    i = start + 1
    while True:
        j = text.find('"', i)
        if j < 0:
            return -1
        backslashes = 0
        k = j - 1
        while k > start and text[k] == "\\":
            backslashes += 1
            k -= 1
        if backslashes % 2 == 0:
            return j + 1
        i = j + 1
