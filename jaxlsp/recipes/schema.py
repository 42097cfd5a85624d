"""The vocabulary of ``jaxlsp.toml``: keys, dtypes, generators, limits, and how values are shown.

Everything here is data; :mod:`jaxlsp.recipes.check` applies it.
"""

from __future__ import annotations

import difflib
import re
from typing import Final

from jaxlsp.recipes.problems import quote_string, toml_value
from jaxlsp.worker import protocol

VERSION: Final = 1
RECIPE_FILE: Final = "jaxlsp.toml"

MAX_ARRAYS: Final = 256
MAX_ELEMENTS: Final = 4_194_304
MAX_SEED: Final = 2**32 - 1

TOP_KEYS: Final = ("version", "profiles")
PROFILE_KEYS: Final = (
    "target",
    "kind",
    "device",
    "seed",
    "x64",
    "python",
    "init",
    "inputs",
    "transform",
    "rngs",
    "mutable",
    "method",
    "load",
    "dims",
    "symbolic",
    "devices",
    "mesh",
    "topology",
    "env",
    "from",
)
CALL_KEYS: Final = ("args", "kwargs", "factory")
KINDS: Final = ("function", "linen", "nnx", "equinox")
TRANSFORMS: Final = ("grad", "value_and_grad")
LOADS: Final = ("module", "definitions", "cells")
NOTEBOOK_LOADS: Final = ("definitions", "cells")  # a notebook target's; "definitions" is its default
SPEC_KINDS: Final = ("array", "key", "none")
ARRAY_KEYS: Final = ("kind", "shape", "dtype", "generator", "sharding")
MESH_KEYS: Final = ("axes", "types")
KEY_KEYS: Final = ("kind", "seed", "impl", "legacy")
KEY_IMPLS: Final = ("threefry2x32", "rbg", "unsafe_rbg")
MAX_DEVICES: Final = 256  # virtual CPU devices (devices = N)
NONE_KEYS: Final = ("kind",)
REF_KEYS: Final = ("ref", "args", "kwargs")

FLOAT_DTYPES: Final = ("float16", "bfloat16", "float32", "float64")
INT_DTYPES: Final = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
COMPLEX_DTYPES: Final = ("complex64", "complex128")
DTYPES: Final = (*FLOAT_DTYPES, *INT_DTYPES, "bool", *COMPLEX_DTYPES)
WIDE_DTYPES: Final = ("float64", "int64", "uint64", "complex128")  # refused without x64 = true
INT_RANGES: Final = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}
# Keys people bring from other frameworks, and what jaxlsp takes instead.
KEY_HINTS: Final = {
    "requires_grad": 'gradients are asked with transform = "grad" or "value_and_grad"',
    "grad": 'gradients are asked with transform = "grad" or "value_and_grad"',
    "backward": 'gradients are asked with transform = "grad" or "value_and_grad"',
    "value_and_grad": 'gradients are asked with transform = "value_and_grad"',
    "jit": "the graph is what make_jaxpr sees: a target traces the same with or without jit",
    "num_devices": "the number of virtual CPU devices is devices = N",
    "device_count": "the number of virtual CPU devices is devices = N",
}

# Generator kind -> (required keys, optional keys).
GENERATORS: Final[dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "full": (("value",), ()),
    "zeros": ((), ()),
    "ones": ((), ()),
    "normal": ((), ("seed", "mean", "std")),
    "uniform": ((), ("seed", "low", "high")),
    "arange": ((), ("start", "step")),
    "randint": (("low", "high"), ("seed",)),
}
SEEDED_GENERATORS: Final = ("normal", "uniform", "randint")

IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DOTTED: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
DEVICE: Final = protocol.DEVICE  # cpu | cuda:N | tpu | tpu:N, one spelling with the worker


def suggest(key: str, allowed: tuple[str, ...] | list[str]) -> str:
    """``unknown key (did you mean "device"?)`` or the allowed keys when nothing is close; a key
    known from elsewhere (``requires_grad``) points to the key that does the job (``transform``)."""
    hint = KEY_HINTS.get(key)
    if hint is not None:
        target = "transform" if "transform" in hint else "devices" if "devices" in hint else None
        if target is not None and target in allowed:
            return f"unknown key (did you mean {target}? {hint})"
    close = difflib.get_close_matches(key, list(allowed), n=1, cutoff=0.6)
    if close:
        return f"unknown key (did you mean {close[0]}?)"
    return f"unknown key (expected one of: {', '.join(allowed)})"


def one_of(values: tuple[str, ...]) -> str:
    return ", ".join(quote_string(v) for v in values)


def show(value: object, limit: int = 60) -> str:
    """A value as TOML would spell it, cut to ``limit`` characters, for error messages."""
    text = _show(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _show(value: object) -> str:
    return toml_value(value, strict=False)
