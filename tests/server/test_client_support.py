"""What the server reads from a client's capabilities, and the jaxlsp opt-ins under experimental."""

from __future__ import annotations

from lsprotocol import types

from jaxlsp.server.session import ClientSupport


def _caps(show_document: bool, experimental: object = None) -> types.ClientCapabilities:
    window = types.WindowClientCapabilities(show_document=types.ShowDocumentClientCapabilities(support=show_document))
    return types.ClientCapabilities(window=window, experimental=experimental)


def test_open_graph_is_offered_to_clients_that_can_show_the_page() -> None:
    assert ClientSupport.from_capabilities(_caps(True)).opens_graphs  # VS Code, Neovim, Sublime
    assert not ClientSupport.from_capabilities(_caps(False)).opens_graphs  # Helix: it would do nothing
    opted_in = ClientSupport.from_capabilities(_caps(False, {"jaxlsp": {"openGraph": True}}))
    assert opted_in.opens_graphs and not opted_in.show_document  # eglot with editors/emacs/jaxlsp.el
    for odd in ({"jaxlsp": {"openGraph": "yes"}}, {"jaxlsp": True}, ["jaxlsp"], {"other": {"openGraph": True}}):
        assert not ClientSupport.from_capabilities(_caps(False, odd)).opens_graphs
