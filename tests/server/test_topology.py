"""A TPU pod's compile in the editor (issue 49): hover on a line says what it communicates on the
pod (``all-reduce 2.0 MiB over 16 chips``) and its share of a chip's memory, and a program that
does not fit a chip is an error at the target's line, with the lines holding the memory beside it.

Real captures over stdio: ``tests/workspaces/topology`` (its profiles compile for ``v5e:4x4``)
in an interpreter with libtpu (tests/podpython.py; skipped without ``make libtpu``); one server for
the whole flow."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types

from tests import podpython
from tests.server.conftest import CONFIG, JaxClient, copy_workspace, initialize_params, within

pytest.importorskip("jax")

TRACE_WAIT = 300.0  # seconds on the reference machine: a cold capture, a compile for 16 chips


@pytest.fixture(scope="module")
def pod_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    return podpython.pod_python(tmp_path_factory.mktemp("podvenv"))


@pytest_lsp.fixture(config=CONFIG, params=["visual-studio-code"])
async def client(
    lsp: JaxClient, request: pytest.FixtureRequest, tmp_path: Path, pod_python: str
) -> AsyncIterator[None]:
    """A trusted session on a copy of the topology workspace, capturing in ``pod_python``."""
    root = copy_workspace("topology", tmp_path)
    lsp.client_name = request.param
    lsp.workspace = root
    params = initialize_params(request.param, root)
    params.initialization_options = {"jaxlsp": {"liveShapes": False, "trusted": True, "python": pod_python}}
    lsp.initialize_result = await within(lsp.initialize_session(params))
    yield
    await lsp.finish()


def _line(root: Path, needle: str) -> int:
    """The 0-based line of ``needle`` in pod.py."""
    lines = (root / "pod.py").read_text().splitlines()
    return next(i for i, text in enumerate(lines) if needle in text)


async def _hover(client: JaxClient, uri: str, line: int) -> str:
    found = await client.within(
        client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line, 8)))
    )
    assert found is not None
    return str(found.contents.value)  # type: ignore[union-attr]


async def test_hover_says_what_a_line_communicates_on_the_pod_and_a_too_big_one_is_an_error(
    client: JaxClient,
) -> None:
    uri = client.open("pod.py")
    root = client.workspace
    params = {"textDocument": {"uri": uri}, "name": "matmul", "profile": "contracting", "compiled": True}
    result = client.plain(await client.within(client.request("jaxlsp/trace", params), TRACE_WAIT))
    assert result["compiled"]["fit"]["fits"] is True

    # the contracting axis's product is summed over the 16 chips at its line: 2 MiB of bf16
    hover = await _hover(client, uri, _line(root, "c = a @ b"))
    assert "**on v5e:4x4**" in hover
    assert "- communicates: `all-reduce` 2.0 MiB over 16 chips" in hover
    assert "- memory per chip: " in hover and "% of the " in hover and "inputs read here 1.0 MiB" in hover
    # a line that moves nothing says nothing of collectives
    assert "communicates" not in await _hover(client, uri, _line(root, "return jnp.tanh(c)"))
    assert not [d for d in client.diagnostics.get(uri, []) if d.code == "does-not-fit"]

    # a replicated 16 GiB weight on every chip: the trace stands, the compile does not fit
    params = {"textDocument": {"uri": uri}, "name": "replicated", "profile": "too_big", "compiled": True}
    result = client.plain(await client.within(client.request("jaxlsp/trace", params), TRACE_WAIT))
    assert result["compiled"]["fit"]["fits"] is False
    await client.wait_until(lambda: any(d.code == "does-not-fit" for d in client.diagnostics.get(uri, [])))
    [diagnostic] = [d for d in client.diagnostics[uri] if d.code == "does-not-fit"]
    assert diagnostic.severity == types.DiagnosticSeverity.Error
    assert diagnostic.range.start.line == _line(root, "def replicated(")  # the target's line
    assert diagnostic.message.startswith("replicated compiled for v5e:4x4: does not fit a chip: needs 16.0")
    assert "of the 15.75 GiB a chip can allocate (XLA's limit on this generation)" in diagnostic.message
    held = _line(root, "y = x @ w")
    assert diagnostic.related_information is not None
    [weight, *_] = diagnostic.related_information
    assert weight.location.uri == uri and weight.location.range.start.line == held
    assert weight.message == "args/0 holds 16.0 GiB per chip"

    hover = await _hover(client, uri, held)
    assert "**on v5e:4x4**: does not fit a chip: needs 16.0" in hover
    assert "of the 15.75 GiB a chip can allocate (XLA's limit on this generation)\n" in hover
    assert "- holds `args/0` 16.0 GiB per chip, 100 % of the need" in hover
    assert "- holds `args/1` 16.0 MiB per chip, under 1 % of the need" in hover

    # the target's next trace, on inputs that fit, clears it
    params = {"textDocument": {"uri": uri}, "name": "replicated", "profile": "fits", "compiled": True}
    await client.within(client.request("jaxlsp/trace", params), TRACE_WAIT)
    await client.wait_until(lambda: not any(d.code == "does-not-fit" for d in client.diagnostics.get(uri, [])))
