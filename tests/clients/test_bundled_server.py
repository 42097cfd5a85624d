"""The server the VS Code extension carries (issue 48): ``editors/vscode/bundled`` as ``make vscode``
builds it (``scripts/bundle_server.py``) and packs it into the ``.vsix``, started as the extension
starts it, ``<python> -I bundled/tool/server.py``, here with ``-S`` as well: no site-packages at
all, as a Python with nothing installed. jaxlsp, pygls, lsprotocol, cattrs, attrs, tomlkit and
libcst all come from ``bundled/libs``. The workspace's ``.venv`` has JAX and Flax but not jaxlsp:
lenses, the environment check and a trace work, and the capture runs in that ``.venv``.

Without the bundle (``make vscode`` makes it; it downloads libcst's wheels) the test fails under CI
and skips elsewhere. The same bundle in real VS Code: ``tests/clients/vscode/test_bundled.py``.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig

import jaxlsp
from tests.capture.environments.conftest import make_venv
from tests.clients.conftest import missing_tool
from tests.server.conftest import SERVER_ENV, JaxClient, initialize_params, make_client, within

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "editors" / "vscode" / "bundled"
ENTRY = BUNDLE / "tool" / "server.py"
WORKSPACE = ROOT / "tests" / "workspaces" / "lsp_trace"
# What a project's environment never needs: jaxlsp and the server's own libraries.
SERVER_PARTS = ("jaxlsp", "__editable__", "pygls", "lsprotocol", "libcst", "tomlkit")
ENV = {k: v for k, v in SERVER_ENV.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH")}
CONFIG = ClientServerConfig(
    server_command=[sys.executable, "-I", "-S", str(ENTRY)], client_factory=make_client, server_env=ENV
)


@pytest.fixture
def bundle() -> Path:
    if not (BUNDLE / "libs" / "jaxlsp" / "__init__.py").is_file():
        missing_tool(f"{BUNDLE / 'libs'} is missing (make vscode bundles the server)")
    return BUNDLE


@pytest_lsp.fixture(config=CONFIG)
async def bundled(lsp: JaxClient, bundle: Path, tmp_path: Path) -> AsyncIterator[None]:
    root = Path(shutil.copytree(WORKSPACE, tmp_path / "project")).resolve()
    make_venv(root / ".venv", hide=SERVER_PARTS)
    lsp.client_name = "visual-studio-code"
    lsp.workspace = root
    params = initialize_params("visual-studio-code", root)
    params.initialization_options = {"jaxlsp": {"trusted": True, "liveShapes": False}}
    lsp.initialize_result = await within(lsp.initialize_session(params))
    yield
    await lsp.finish()


def test_the_bundle_records_what_it_holds(bundle: Path) -> None:
    record = json.loads((bundle / "libs" / "BUNDLE.json").read_text())
    assert record["pythons"] == ["3.11", "3.12", "3.13", "3.14"], record
    assert set(record["packages"]) >= {"jaxlsp", "pygls", "lsprotocol", "cattrs", "attrs", "tomlkit", "libcst"}
    assert record["packages"]["jaxlsp"] == jaxlsp.__version__, record
    natives = sorted(p.name for p in (bundle / "libs" / "libcst").glob("native.*"))
    assert len(natives) == 4 and all(f"cpython-3{v}" in n for v, n in zip((11, 12, 13, 14), natives, strict=True))
    assert not list((bundle / "libs").rglob("tests")), "test folders are left out"


async def test_bundled_server_lenses_check_and_trace_in_the_projects_venv(bundled: JaxClient) -> None:
    client = bundled
    uri = client.open("model.py")
    await client.wait_indexed()
    lenses = await within(
        client.text_document_code_lens_async(types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri))),
        60,
    )
    # Resolved later (the client resolves lenses): each names its target.
    assert [lens.data["name"] for lens in lenses or []] == ["predict", "needs"], lenses

    venv_python = str(client.workspace / ".venv" / "bin" / "python")
    report = client.plain(
        await within(client.protocol.send_request_async("jaxlsp/environment", {"textDocument": {"uri": uri}}), 120)
    )
    assert report["python"] == venv_python and report["route"] == "workspace .venv", report
    assert report["ok"] is True and report["packages"]["flax"], report

    result = client.plain(
        await within(
            client.protocol.send_request_async("jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "predict"}),
            180,
        )
    )
    assert result["summary"]["outputs"] == ["f32[2]"], result
    assert (client.workspace / "IMPORTED").exists()  # the project's code ran, in its .venv
