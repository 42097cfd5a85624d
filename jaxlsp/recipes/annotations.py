"""What a parameter's annotation says about the input to propose, read from its text.

jaxtyping (``Float[Array, "b 3"]``, ``Int[Array, "batch seq"]``, ``Bool``, ``Shaped``,
``Key[...]``), bare array types (``jax.Array``: shape unknown), PRNG keys (``PRNGKeyArray``),
Python scalars and strings, ``Optional[X]`` and ``X | None``. Nothing is imported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PREFIX = r"(?:[A-Za-z_][\w]*\.)*"
_JAXTYPING = re.compile(
    rf"""{_PREFIX}(?P<dtype>[A-Za-z][A-Za-z0-9]*)\[\s*(?P<array>[^,\[\]]+?)\s*,\s*(?P<q>["'])(?P<dims>[^"']*)(?P=q)\s*\]"""
)
_ARRAY = re.compile(rf"{_PREFIX}(?:Array|ndarray|ArrayLike|ArrayImpl)")
_KEY = re.compile(rf"{_PREFIX}(?:PRNGKeyArray|KeyArray|PRNGKey)")
_RNGS = re.compile(rf"{_PREFIX}Rngs")
_OPTIONAL = re.compile(rf"{_PREFIX}Optional\[(?P<inner>.*)\]")
_KEY_NAMES = frozenset({"key", "rng", "rng_key", "prng_key"})

JAXTYPING_DTYPES: dict[str, str] = {
    "Float": "float32",
    "Float16": "float16",
    "BFloat16": "bfloat16",
    "Float32": "float32",
    "Float64": "float64",
    "Inexact": "float32",
    "Real": "float32",
    "Num": "float32",
    "Shaped": "float32",
    "Int": "int32",
    "Integer": "int32",
    "Int8": "int8",
    "Int16": "int16",
    "Int32": "int32",
    "Int64": "int64",
    "UInt": "uint32",
    "UInt8": "uint8",
    "UInt16": "uint16",
    "UInt32": "uint32",
    "UInt64": "uint64",
    "Bool": "bool",
    "Complex": "complex64",
    "Complex64": "complex64",
    "Complex128": "complex128",
}

Dim = int | str  # a size, or a dimension name


@dataclass(frozen=True, slots=True)
class ArrayGuess:
    dtype: str
    shape: list[Dim] | None  # None: the rank is unknown (bare array type, ``...``, ``*batch``)
    why_unknown: str = ""


@dataclass(frozen=True, slots=True)
class KeyGuess:
    pass


@dataclass(frozen=True, slots=True)
class RngsGuess:
    pass


@dataclass(frozen=True, slots=True)
class StaticGuess:
    type: str  # int | float | bool | str


@dataclass(frozen=True, slots=True)
class UnknownGuess:
    pass


Guess = ArrayGuess | KeyGuess | RngsGuess | StaticGuess | UnknownGuess


def _strip(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    match = _OPTIONAL.fullmatch(text)
    if match:
        return _strip(match.group("inner"))
    parts = [p.strip() for p in text.split("|")]
    rest = [p for p in parts if p != "None"]
    if len(parts) > 1 and len(rest) == 1:
        return _strip(rest[0])
    return text


def parse_dims(param: str, text: str) -> tuple[list[Dim] | None, str]:
    """A jaxtyping dimension string -> shape, or None and why when the rank is not fixed."""
    shape: list[Dim] = []
    for i, token in enumerate(text.split()):
        if token == "..." or token.startswith("*"):
            return None, f"{token!r} stands for any number of dimensions"
        if token.isdigit():
            if int(token) <= 0:
                return None, f"a dimension of size {token}"
            shape.append(int(token))
            continue
        name = token.lstrip("#")
        if name.startswith("_") and len(name) > 1:
            name = name[1:]  # ``_name``: an unchecked named dimension
        if name == "_":
            shape.append(f"{param}_{i}")  # an anonymous dimension: asked for under its own name
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            shape.append(name)
        else:
            return None, f"the dimension {token!r} is an expression"
    return shape, ""


def guess(param: str, annotation: str | None) -> Guess:
    """What to propose for a parameter named ``param`` annotated ``annotation``."""
    text = _strip(annotation) if annotation else ""
    if not text:
        return KeyGuess() if param in _KEY_NAMES else UnknownGuess()
    match = _JAXTYPING.fullmatch(text)
    if match:
        kind = match.group("dtype")
        if kind in ("Key", "PRNGKeyArray"):
            return KeyGuess()
        dtype = JAXTYPING_DTYPES.get(kind)
        if dtype is None:
            return UnknownGuess()
        shape, why = parse_dims(param, match.group("dims"))
        return ArrayGuess(dtype, shape, why)
    if _KEY.fullmatch(text):
        return KeyGuess()
    if _RNGS.fullmatch(text):
        return RngsGuess()
    if _ARRAY.fullmatch(text):
        if param in _KEY_NAMES:
            return KeyGuess()
        return ArrayGuess("float32", None, f"{text} carries no shape")
    if text in ("int", "float", "bool", "str"):
        return StaticGuess(text)
    return UnknownGuess()
