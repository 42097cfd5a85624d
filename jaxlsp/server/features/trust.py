"""Trust, asked of the user: the prompt before anything of a workspace folder runs, and the
``jaxlsp.listTrusted`` / ``jaxlsp.revokeTrust`` commands. The per-user store is
:mod:`jaxlsp.trust_store`; where trust may come from is the session's (``Session.is_trusted``).

The prompt's sentence is fixed; the folder is quoted inside it with every control, format and bidi
character escaped (:mod:`jaxlsp.server.display`): a folder's name cannot add a line, end the quote
or turn the text around to make the question read like someone else's."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from lsprotocol import types

from jaxlsp.server import wire
from jaxlsp.server.display import quoted
from jaxlsp.server.host import Host
from jaxlsp.server.params import invalid, shown
from jaxlsp.textfiles import unresolvable

log = logging.getLogger(__name__)
TRUST_ONCE, TRUST_ALWAYS, TRUST_CANCEL = "Trust once", "Always", "Cancel"
MAX_FOLDER = 4096  # characters of a folder path given to revokeTrust


def prompt(folder: Path) -> str:
    """The trust question about ``folder``: the same sentence whatever the folder is called."""
    return f"Trust {quoted(folder)} to run its code for tracing?"


class TrustPrompt:
    def __init__(self, ls: Host) -> None:
        self.ls = ls

    async def ensure(self, folder: Path) -> bool:
        """True when ``folder`` is trusted, asking the user (``window/showMessageRequest``) if it is
        not yet: "Trust once" (this session), "Always" (the per-user store) or "Cancel"."""
        session = self.ls.session
        if session.is_trusted(folder):
            return True
        try:
            answer = await self.ls.window_show_message_request_async(
                types.ShowMessageRequestParams(
                    type=types.MessageType.Warning,
                    message=prompt(folder),
                    actions=[types.MessageActionItem(t) for t in (TRUST_ONCE, TRUST_ALWAYS, TRUST_CANCEL)],
                )
            )
        except Exception:  # a client that cannot ask its user: nothing runs
            log.warning("the client could not ask for trust", exc_info=True)
            answer = None
        title = answer.title if answer is not None else TRUST_CANCEL
        if title == TRUST_ALWAYS:
            session.trust.add(folder)
        elif title == TRUST_ONCE:
            session.trusted_once.add(folder.resolve())
        else:
            return False
        return True

    def register(self, server: Host) -> None:
        @server.command(wire.LIST_TRUSTED_COMMAND)
        def list_trusted(ls: Host, *args: Any) -> list[str]:
            return [str(f) for f in ls.session.trust.folders()]

        @server.command(wire.REVOKE_TRUST_COMMAND)
        def revoke_trust(ls: Host, *args: Any) -> bool:
            folder = args[0] if len(args) == 1 else None
            if not isinstance(folder, str) or not 0 < len(folder) <= MAX_FOLDER or "\x00" in folder:
                raise invalid(f"{wire.REVOKE_TRUST_COMMAND}: expected one argument, the folder path")
            why = unresolvable(Path(folder))
            if why is not None:
                raise invalid(f"{wire.REVOKE_TRUST_COMMAND}: arguments[0]: {shown(folder)}: {why}")
            ls.session.trusted_once.discard(Path(folder).resolve())
            return ls.session.trust.remove(Path(folder))
