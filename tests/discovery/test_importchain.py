"""The target's import chain and the call sites whose values would import beyond it
(discovery/callsites/importchain.py): what a live trace may build its inputs from (issue 45 item 4)."""

from __future__ import annotations

import shutil
from pathlib import Path

from jaxlsp.discovery import Classifier, WorkspaceIndex
from jaxlsp.discovery.callsites.finder import CallSiteFinder
from jaxlsp.discovery.callsites.importchain import foreign_refs, import_chain

WORKSPACES = Path(__file__).resolve().parents[1] / "workspaces"


def test_a_site_naming_a_test_modules_class_imports_beyond_the_chain(tmp_path: Path) -> None:
    root = Path(shutil.copytree(WORKSPACES / "lsp_live_chosen", tmp_path / "ws")).resolve()
    index = WorkspaceIndex([root])
    target = root / "blocks.py"
    entry = next(e for e in Classifier(index).discover(target).entrypoints if e.name == "apply")
    sites = CallSiteFinder(index, root, Classifier(index)).find(entry)
    chain = import_chain(index, target)
    assert chain == {target}  # blocks.py imports only jax
    foreign = {s.path.name: foreign_refs(index, s, target, chain) for s in sites if s.static}
    assert foreign == {"test_blocks.py": ["test_blocks:Doubler"], "run_blocks.py": []}


def test_the_chain_follows_module_level_imports_and_the_packages_above(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "layers.py").write_text("from . import util\n")
    (tmp_path / "pkg" / "util.py").write_text("X = 1\n")
    (tmp_path / "later.py").write_text("")
    (tmp_path / "model.py").write_text("from pkg.layers import Dense\n\n\ndef f():\n    import later\n")
    root = tmp_path.resolve()
    chain = import_chain(WorkspaceIndex([root]), root / "model.py")
    assert chain == {root / "model.py", root / "pkg/__init__.py", root / "pkg/layers.py", root / "pkg/util.py"}
