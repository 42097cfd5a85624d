"""The versions of the packages a graph records (jax, jaxlib, flax, equinox, python), read once a
process from their installed metadata (stdlib only).
"""

from __future__ import annotations

import functools
import platform


@functools.cache
def versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {}
    for name in ("jax", "jaxlib", "flax", "equinox"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    out["python"] = platform.python_version()
    return out
