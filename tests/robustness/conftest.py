"""Fixtures of the robustness suite (the helpers themselves live in :mod:`tests.robustness.helpers`)."""

from tests.robustness.helpers import peer_factory

__all__ = ["peer_factory"]
