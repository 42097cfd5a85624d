"""The graph viewer's built assets, shipped as package data so that no install needs Node.

Source: ``editors/web`` (TypeScript, bundled by esbuild; ``make viewer`` rebuilds this folder and
``make test`` fails when the committed build is out of date). ``viewer.js`` embeds the ELK layout
worker; ``index.html`` is the page the language server's loopback bridge serves.
"""

from __future__ import annotations

from importlib import resources

ASSETS = ("index.html", "viewer.js", "viewer.css")


def asset(name: str) -> bytes:
    """The bytes of one built asset; ``KeyError`` for any other name (nothing else is served)."""
    if name not in ASSETS:
        raise KeyError(name)
    return resources.files(__name__).joinpath(name).read_bytes()
