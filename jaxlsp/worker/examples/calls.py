"""A call's arguments, read from the frame of the function it called before its body ran, and
written as the caller wrote them (trailing defaults left out): what the first-call run and the
signature hooks both keep of a call."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import cast


def frame_arguments(frame: types.FrameType) -> tuple[list[object], dict[str, object]]:
    """The arguments a function was called with, read from its frame before its body ran."""
    code = frame.f_code
    local = frame.f_locals
    positional = code.co_argcount
    names = code.co_varnames
    args = [local[n] for n in names[:positional] if n in local]
    kwargs = {n: local[n] for n in names[positional : positional + code.co_kwonlyargcount] if n in local}
    at = positional + code.co_kwonlyargcount
    if code.co_flags & 0x04:  # CO_VARARGS
        args.extend(local.get(names[at], ()))
        at += 1
    if code.co_flags & 0x08:  # CO_VARKEYWORDS
        kwargs.update(local.get(names[at], {}))
    return args, kwargs


def without_defaults(
    fn: object, args: list[object], kwargs: dict[str, object], method: bool
) -> tuple[list[object], dict[str, object]]:
    """The call's arguments without the trailing ones that are the parameters' own defaults (the
    frame holds every parameter; the call site gave only some): the same call, written as the
    user wrote it."""
    import inspect

    try:
        # not a callable: a TypeError, as for a builtin without a signature
        parameters = list(inspect.signature(cast("Callable[..., object]", fn)).parameters.values())
    except (TypeError, ValueError):
        return args, kwargs
    if method and parameters:
        parameters = parameters[1:]  # self
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    while args and len(args) <= len(positional) and args[-1] is positional[len(args) - 1].default:
        args = args[:-1]
    defaults = {p.name: p.default for p in parameters if p.kind is p.KEYWORD_ONLY}
    kwargs = {k: v for k, v in kwargs.items() if not (k in defaults and v is defaults[k])}
    return args, kwargs
