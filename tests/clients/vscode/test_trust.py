"""Real VS Code (code-server) on a hostile, untrusted workspace, with the extension's default launch
(the server it carries, run by ``python3`` from PATH).

The folder shadows the modules the server imports (``jaxlsp/__init__.py``, ``lsprotocol.py``,
``cattrs.py``, ``pygls.py``), holds a ``.venv`` whose programs record being run, and a
``.vscode/settings.json`` that points ``jaxlsp.python``, ``jaxlsp.serverPath`` and the Python
extension's interpreter at that ``.venv``. Opened in restricted mode, nothing of it may run, and the
"Trace graph" lens must still appear (docs/security.md, editors/vscode/README.md).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.clients.conftest import make_hostile, sentinels
from tests.clients.vscode.conftest import VENV_BIN, Open

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def hostile_workspace(tmp: Path) -> Path:
    root = Path(shutil.copytree(EXAMPLES, tmp / "hostile")).resolve()
    make_hostile(root)
    venv = root / ".venv" / "bin"
    (root / ".vscode").mkdir()
    (root / ".vscode" / "settings.json").write_text(
        json.dumps(
            {
                "jaxlsp.python": str(venv / "python"),
                "jaxlsp.serverPath": str(venv / "jaxlsp"),
                "python.defaultInterpreterPath": str(venv / "python"),
            }
        )
    )
    return root


async def test_a_hostile_untrusted_workspace_runs_nothing_and_still_has_lenses(vscode: Open, tmp_path: Path) -> None:
    root = hostile_workspace(tmp_path)
    server, page = await vscode(root, None, (1600, 1000))
    await page.wait_for(".statusbar-item", has_text="Restricted Mode")
    await page.quick_open("linen_cnn.py")
    # The server started (the default launch: the server the extension carries, run by python3
    # from PATH, outside the workspace) and discovered the class without running anything.
    await page.wait_for(".codelens-decoration a", has_text="Trace graph", timeout=90)
    await page.screenshot("restricted-lens")
    assert sentinels(root) == [], server.extension_log()
    log = server.extension_log()
    (entry,) = server.extensions.glob("jaxlsp.jaxlsp-*/bundled/tool/server.py")
    assert f"starting {VENV_BIN / 'python3'} -I {entry} in " in log, log
    assert "(from bundled server, python3 on PATH; trusted: false)" in log, log
    started_in = log.split(f"{entry} in ", 1)[1].split(" (from", 1)[0]
    assert not Path(started_in).resolve().is_relative_to(root), log
    # The workspace's settings are not applied in restricted mode, and the extension would pass
    # over a program inside the folder anyway.
    assert str(root) not in log.split("starting", 1)[1].split("\n", 1)[0], log
