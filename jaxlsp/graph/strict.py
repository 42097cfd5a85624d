"""The strict reader's checks of JSON values: each gives the value back, or raises a ``ValueError``
that names its key path (``nodes[3].source.endLine: expected an integer >= 1, got 0``).

Stdlib only, Python >= 3.10: the capture worker imports this module inside the user's interpreter.
Shared by the readers of both forms (``expanded_rows``, ``expanded_read``, ``packed``, ``compact``)
and of the shardings (``shardings``). Non-finite floats have no JSON spelling and are written as
``{"float": "nan" | "inf" | "-inf"}``: :func:`json_copy` and :func:`number` turn them back into floats.
"""

from __future__ import annotations

import json
import math
from typing import Any

NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def kind(obj: Any) -> str:
    if obj is None:
        return "null"
    if isinstance(obj, bool):
        return "a boolean"
    if isinstance(obj, int):
        return "an integer"
    if isinstance(obj, float):
        return "a number"
    if isinstance(obj, str):
        return "a string"
    if isinstance(obj, list):
        return "an array"
    if isinstance(obj, dict):
        return "an object"
    return type(obj).__name__


def fail(path: str, message: str) -> ValueError:
    return ValueError(f"{path or '<graph>'}: {message}")


def obj(data: Any, path: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise fail(path, f"expected an object, got {kind(data)}")
    for key in required:
        if key not in data:
            raise fail(path, f"missing key {key!r}")
    if len(data) > len(required):
        for key in data:
            if key not in required and key not in optional:
                raise fail(join(path, str(key)), "unknown key")
    return data


def open_obj(data: Any, path: str, required: tuple[str, ...]) -> dict[str, Any]:
    """An object with ``required`` keys that may hold others too (``target``, ``profile``, ``versions``)."""
    if not isinstance(data, dict):
        raise fail(path, f"expected an object, got {kind(data)}")
    for key in required:
        if key not in data:
            raise fail(path, f"missing key {key!r}")
    return data


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def string(data: Any, path: str, *, nonempty: bool = False) -> str:
    if not isinstance(data, str):
        raise fail(path, f"expected a string, got {kind(data)}")
    if nonempty and not data:
        raise fail(path, "expected a non-empty string")
    return data


def opt_string(data: Any, path: str, *, nonempty: bool = False) -> str | None:
    if data is None:
        return None
    if not isinstance(data, str):
        raise fail(path, f"expected a string or null, got {kind(data)}")
    if nonempty and not data:
        raise fail(path, "expected a non-empty string or null")
    return data


def integer(data: Any, path: str, minimum: int) -> int:
    if isinstance(data, bool) or not isinstance(data, int):
        raise fail(path, f"expected an integer, got {kind(data)}")
    if data < minimum:
        raise fail(path, f"expected an integer >= {minimum}, got {data}")
    return data


def boolean(data: Any, path: str) -> bool:
    if not isinstance(data, bool):
        raise fail(path, f"expected a boolean, got {kind(data)}")
    return data


def array(data: Any, path: str) -> list[Any]:
    if not isinstance(data, list):
        raise fail(path, f"expected an array, got {kind(data)}")
    return data


def strings(data: Any, path: str) -> list[str]:
    items = array(data, path)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise fail(f"{path}[{i}]", f"expected a string, got {kind(item)}")
    return list(items)


def enum(data: Any, path: str, allowed: tuple[str, ...]) -> str:
    if data not in allowed or not isinstance(data, str):
        raise fail(path, f"expected one of {', '.join(allowed)}, got {json.dumps(data, default=repr)}")
    return data


def json_copy(data: Any, path: str) -> Any:
    """A copy of a JSON value with ``{"float": "nan" | "inf" | "-inf"}`` turned back into floats;
    rejects what JSON cannot hold (non-finite floats, non-string keys, other objects)."""
    if data is None or isinstance(data, (str, bool, int)):
        return data
    if isinstance(data, float):
        if not math.isfinite(data):
            raise fail(path, 'non-finite number: write it as {"float": "nan" | "inf" | "-inf"}')
        return data
    if isinstance(data, list):
        return [json_copy(item, f"{path}[{i}]") for i, item in enumerate(data)]
    if isinstance(data, dict):
        spelled = data.get("float") if len(data) == 1 else None
        if isinstance(spelled, str) and spelled in NONFINITE:
            return NONFINITE[spelled]
        out = {}
        for key, item in data.items():
            if not isinstance(key, str):
                raise fail(path, f"object key {key!r} is not a string")
            out[key] = json_copy(item, join(path, key))
        return out
    raise fail(path, f"not a JSON value: {kind(data)}")


def number(data: Any, path: str, *, nullable: bool = False) -> float | None:
    """A JSON number, or a non-finite one spelled ``{"float": ...}``; null when ``nullable``."""
    if data is None and nullable:
        return None
    if isinstance(data, dict) and len(data) == 1 and data.get("float") in NONFINITE:
        return NONFINITE[data["float"]]
    if isinstance(data, bool) or not isinstance(data, (int, float)):
        raise fail(path, f"expected a number{' or null' if nullable else ''}, got {kind(data)}")
    if isinstance(data, float) and not math.isfinite(data):
        raise fail(path, 'non-finite number: write it as {"float": "nan" | "inf" | "-inf"}')
    return float(data)
