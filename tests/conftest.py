"""Suite-wide settings: under CI, hypothesis runs a fixed set of examples (derandomized), so a
landing run never depends on a lucky draw; locally it keeps exploring."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    settings.load_profile("ci")
