"""The server's features, one module each: a class built with the services it needs (see
``create_server`` in :mod:`jaxlsp.server.app`) that registers its LSP handlers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from jaxlsp.server.app import JaxServer


class Feature(Protocol):
    def register(self, server: JaxServer) -> None:
        """Register the feature's handlers (and its lifecycle hooks) on ``server``."""
