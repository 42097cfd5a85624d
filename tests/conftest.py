"""Suite-wide settings: under CI, hypothesis runs a fixed set of examples (derandomized), so a
landing run never depends on a lucky draw; locally it keeps exploring. The user's cache folder
is never touched: each test process gets its own ``XDG_CACHE_HOME`` (exports, logs, the
environment checks' disk cache), inherited by the CLIs and servers the tests start."""

from __future__ import annotations

import os
import tempfile

from hypothesis import settings

os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="jaxlsp-test-cache-")

settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    settings.load_profile("ci")

# tests/workspaces/ holds fixture workspaces; some are laid out like real repositories, with their
# own tests, which the capture tests run on purpose (one of them hangs): never collect them here.
collect_ignore = ["workspaces"]


def pytest_report_header() -> str:
    from tests.deadlines import describe

    return describe()
