"""Custom request parameters: namedtuples from pygls into dicts, with precise errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import to_fs_path


def as_dict(value: Any) -> Any:
    """pygls hands untyped params over as namedtuples: turn them back into plain data."""
    if hasattr(value, "_asdict"):
        return {k: as_dict(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: as_dict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_dict(v) for v in value]
    return value


MAX_STRING = 8192  # characters in an id, name or URI: longer is refused, never echoed back whole
MAX_MESSAGE = 2000  # characters of an error message (it quotes the client's values)


def shown(value: Any, limit: int = 200) -> str:
    """``repr(value)``, cut to ``limit`` characters: errors quote what the client sent, never 10 MB."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def invalid(message: str) -> JsonRpcInvalidParams:
    err = JsonRpcInvalidParams()
    err.message = message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE] + " [...]"
    return err


def require_str(obj: Any, key: str, where: str) -> str:
    if not isinstance(obj, dict):
        raise invalid(f"{where}: expected an object, got {type(obj).__name__}")
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        raise invalid(f"{where}.{key}: expected a non-empty string, got {shown(value)}")
    if len(value) > MAX_STRING:
        raise invalid(f"{where}.{key}: too long ({len(value):,} characters; at most {MAX_STRING:,})")
    return value


def file_path(uri: str, where: str) -> Path:
    if not uri.startswith("file:"):
        raise invalid(f"{where}: only file: URIs are supported, got {uri!r}")
    path = to_fs_path(uri)
    if path is None:
        raise invalid(f"{where}: cannot map {uri!r} to a file")
    return Path(path)


def text_document_uri(params: Any, where: str) -> str:
    data = as_dict(params)
    if not isinstance(data, dict):
        raise invalid(f"{where}: expected params {{textDocument: {{uri}}}}")
    return require_str(data.get("textDocument"), "uri", f"{where}.textDocument")


def position(value: types.Position | None) -> int:
    return value.line if value is not None else 0
