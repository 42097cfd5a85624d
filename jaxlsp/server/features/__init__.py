"""The server's features, one module each: a class built with the services it needs (see
``create_server`` in :mod:`jaxlsp.server.app`) that registers its LSP handlers. A feature sees the
server only as a :class:`~jaxlsp.server.host.Host` and never imports ``app``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from jaxlsp.server.host import Host


class Feature(Protocol):
    def register(self, server: Host) -> None:
        """Register the feature's handlers (and its lifecycle hooks) on ``server``."""
