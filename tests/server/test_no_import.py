"""Discovery imports neither jax nor any scanned module: proved in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.deadlines import scaled
from tests.discovery.helpers import write_tree

PROBE = """
import json, sys
from pathlib import Path
from jaxlsp.discovery import discover_paths
root = Path(sys.argv[1])
found = [e.name for d in discover_paths([root], roots=[root]) for e in d.entrypoints]
banned = sorted(m for m in sys.modules if m.split(".")[0] in ("jax", "jaxlib", "flax", "equinox", "optax", "model", "pkg"))
print(json.dumps({"found": found, "banned": banned}))
"""

TRAP = """
import pathlib
pathlib.Path(__file__).with_name("IMPORTED").write_text("imported")
raise SystemExit("this module must never be imported")
"""


def test_discovery_imports_nothing_it_scans(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "pkg/__init__.py": TRAP + "from .base import Base\n",
            "pkg/base.py": TRAP + "import flax.linen as nn\nclass Base(nn.Module):\n    pass\n",
            "model.py": TRAP
            + "import jax\nfrom pkg import Base\nclass Net(Base):\n    pass\n@jax.jit\ndef f(x):\n    return x\n",
        },
    )
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True, timeout=scaled(120), check=True
    )
    result = json.loads(out.stdout)
    assert sorted(result["found"]) == ["Base", "Net", "f"]
    assert result["banned"] == []
    assert not list(tmp_path.rglob("IMPORTED"))
