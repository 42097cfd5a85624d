"""The VS Code extension's entry to the server it carries: ``<python> -I bundled/tool/server.py``.

``-I`` keeps the current folder, ``PYTHON*`` variables and the user site off ``sys.path`` (and, on
3.11+, this script's own folder); this script then puts ``bundled/libs`` (jaxlsp, pygls,
lsprotocol, cattrs, attrs, tomlkit, typing_extensions and libcst with one native module per
CPython) first, so the bundled versions win over anything the interpreter has installed, and
starts ``jaxlsp serve``. Written for any Python 3 so that an older one still gets a message that
says what it needs, not a syntax error.
"""

# ruff: noqa: UP031, UP036  (read by any Python 3, to tell an old one what it needs)

import os
import sys

LIBS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "libs")


def fail(message):
    # On stderr, which the extension shows in its output channel; stdout is the protocol.
    sys.stderr.write("jaxlsp: " + message + "\n")
    sys.exit(2)


if sys.version_info < (3, 11):
    fail(
        "the bundled server needs Python 3.11 or newer, and %s is %d.%d; "
        "set jaxlsp.serverPython to a newer interpreter" % (sys.executable, sys.version_info[0], sys.version_info[1])
    )
if not os.path.isdir(os.path.join(LIBS, "jaxlsp")):
    fail("the extension's bundled libraries are missing from %s: reinstall the extension" % LIBS)
sys.path.insert(0, LIBS)
try:
    import libcst.native  # noqa: F401  (compiled: the one part that depends on the platform)
except ImportError as error:
    fail(
        "the bundled libcst has no native module for this Python (%s, %s): %s; "
        "install the extension built for this platform, or set jaxlsp.serverPath to an installed jaxlsp"
        % (sys.executable, sys.platform, error)
    )

from jaxlsp.cli import main  # noqa: E402

sys.exit(main(["serve", *sys.argv[1:]]))
