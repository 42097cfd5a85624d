"""Source information as JAX records it: an equation's user frames (each code location converted
once), its name stack and its context.
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable
from types import CodeType
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from jax.extend.core import JaxprEqn


class RawFrame(NamedTuple):
    """A user frame as JAX records it: 1-based lines, 0-based UTF-8 byte columns."""

    file: str
    function: str
    line: int
    column: int
    end_line: int
    end_column: int


# Keyed by (code, file, instruction): code objects compare by value, and two files holding the
# same function (a copied model file) have equal code objects that differ only in co_filename.
_FRAME_CACHE: dict[tuple[CodeType, str, int], RawFrame | None] = {}
_TRACEBACK_CACHE: dict[Hashable, list[RawFrame]] = {}  # keyed by jaxlib's Traceback


def user_frames(source_info: object) -> list[RawFrame]:
    """The user frames of an equation's ``source_info``, innermost first (jax-internal frames removed).

    Same result as ``source_info_util.user_frames``, with each (code, instruction) converted once:
    a large model repeats the same few hundred frames in thousands of tracebacks.
    """
    traceback = getattr(source_info, "traceback", None)
    if traceback is None:
        return []
    try:
        cached = _TRACEBACK_CACHE.get(traceback)
    except TypeError:  # an unhashable traceback (another jaxlib): no whole-traceback caching
        cached = None
        traceback_key = None
    else:
        traceback_key = traceback
    if cached is not None:
        return cached
    try:
        from jax._src import source_info_util as siu

        codes, lastis = traceback.raw_frames()
    except Exception:
        return _user_frames_slow(traceback)
    out: list[RawFrame] = []
    for code, lasti in zip(codes, lastis, strict=False):
        key = (code, code.co_filename, lasti)
        if key in _FRAME_CACHE:
            frame = _FRAME_CACHE[key]
        else:
            frame = None
            try:
                if siu.is_user_filename(code.co_filename):
                    frame = _raw(siu.raw_frame_to_frame(code, lasti))
            except Exception:
                frame = None
            _FRAME_CACHE[key] = frame
        if frame is not None:
            out.append(frame)
    if traceback_key is not None:
        # Tracebacks compare by content: a gradient's transposed equations and repeated layers
        # share them, so each distinct stack is walked once.
        _TRACEBACK_CACHE[traceback_key] = out
    return out


def _user_frames_slow(traceback: object) -> list[RawFrame]:
    try:
        from jax._src import source_info_util

        return [_raw(f) for f in source_info_util.user_frames(traceback)]
    except Exception:
        return []


def _raw(f: object) -> RawFrame:
    line = int(getattr(f, "start_line", 0) or 0)
    return RawFrame(
        file=str(getattr(f, "file_name", "")),
        function=str(getattr(f, "function_name", "")),
        line=line,
        column=int(getattr(f, "start_column", 0) or 0),
        end_line=int(getattr(f, "end_line", line) or line),
        end_column=int(getattr(f, "end_column", 0) or 0),
    )


def name_stack_items(source_info: object) -> list[tuple[str, str]]:
    """The equation's name stack as ``(kind, name)`` pairs, kind ``"scope"`` or ``"transform"``."""
    stack = getattr(getattr(source_info, "name_stack", None), "stack", None)
    if stack is None:
        return []
    items: list[tuple[str, str]] = []
    for item in stack:
        name = str(getattr(item, "name", item))
        kind = "transform" if type(item).__name__ == "Transform" else "scope"
        items.append((kind, name))
    return items


def equation_context(eqn: JaxprEqn) -> contextlib.AbstractContextManager[object]:
    """The context an equation runs under when evaluated (``eqn.ctx.manager``: the PRNG
    implementation's partitioning, XLA metadata), as ``jax.core.eval_jaxpr`` enters it; a null
    context when this jax has none."""

    manager = getattr(getattr(eqn, "ctx", None), "manager", None)
    return manager if manager is not None else contextlib.nullcontext()
