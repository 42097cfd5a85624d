"""Bases defined in other workspace files: direct imports, re-exports, relative imports, edits."""

from __future__ import annotations

from pathlib import Path

from jaxlsp.discovery import Classifier, WorkspaceIndex
from tests.discovery.helpers import write_tree

BASE = """
from flax import nnx

class Block(nnx.Module):
    def __init__(self, width: int, *, rngs: nnx.Rngs):
        pass
"""
NOT_BASE = """
class Block:
    pass
"""


def names(root: Path, target: str) -> dict[str, str]:
    index = WorkspaceIndex([root])
    return {e.name: e.kind for e in Classifier(index).discover(root / target).entrypoints}


def test_base_imported_directly_from_a_package_module(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "models/__init__.py": "",
            "models/base.py": BASE,
            "train.py": "from models.base import Block\nclass Deep(Block):\n    pass\n",
        },
    )
    assert names(tmp_path, "train.py") == {"Deep": "nnx"}


def test_base_re_exported_through_init(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "models/__init__.py": "from .base import Block as Block\n__all__ = ['Block']\n",
            "models/base.py": BASE,
            "train.py": "import models\nfrom models import Block\nclass A(Block): pass\nclass B(models.Block): pass\n",
        },
    )
    assert names(tmp_path, "train.py") == {"A": "nnx", "B": "nnx"}


def test_re_export_chain_and_star_import(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "lib/__init__.py": "from .layers import *\n",
            "lib/layers/__init__.py": "from .core import Block\n",
            "lib/layers/core.py": BASE,
            "app/main.py": "from lib import Block\nclass Net(Block):\n    pass\n",
        },
    )
    assert names(tmp_path, "app/main.py") == {"Net": "nnx"}


def test_relative_imports_resolve_through_the_package_context(tmp_path: Path) -> None:
    # The layout of equinox itself: `from .._module import Module` inside equinox/nn/.
    write_tree(
        tmp_path,
        {
            "vendored/equinox/__init__.py": "from ._module import Module\n",
            "vendored/equinox/_module.py": "class Module:\n    pass\n",
            "vendored/equinox/nn/__init__.py": "from ._linear import Linear\n",
            "vendored/equinox/nn/_linear.py": "from .._module import Module\nclass Linear(Module):\n    pass\n",
            "mypkg/__init__.py": "",
            "mypkg/core.py": BASE,
            "mypkg/layers/__init__.py": "",
            "mypkg/layers/conv.py": "from ..core import Block\nfrom . import helpers\nclass Conv(Block):\n    pass\n",
            "mypkg/layers/helpers.py": "",
        },
    )
    assert names(tmp_path, "vendored/equinox/nn/_linear.py") == {"Linear": "equinox"}
    assert names(tmp_path, "mypkg/layers/conv.py") == {"Conv": "nnx"}


def test_script_style_sibling_import(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "examples/mnist/layers.py": BASE,
            "examples/mnist/train.py": "from layers import Block\nclass Net(Block):\n    pass\n",
            "examples/other/layers.py": NOT_BASE,
            "examples/other/train.py": "from layers import Block\nclass Net(Block):\n    pass\n",
        },
    )
    assert names(tmp_path, "examples/mnist/train.py") == {"Net": "nnx"}
    assert names(tmp_path, "examples/other/train.py") == {}


def test_src_layout(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "src/proj/__init__.py": "",
            "src/proj/nets.py": BASE,
            "scripts/run.py": "from proj.nets import Block\nclass Net(Block):\n    pass\n",
        },
    )
    assert names(tmp_path, "scripts/run.py") == {"Net": "nnx"}


def test_non_module_and_missing_bases(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "models/__init__.py": "",
            "models/base.py": NOT_BASE,
            "train.py": "from models.base import Block\nfrom models.gone import Lost\nclass A(Block): pass\nclass B(Lost): pass\n",
        },
    )
    assert names(tmp_path, "train.py") == {}


def test_circular_re_exports_terminate(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "a.py": "from b import X\n",
            "b.py": "from a import X\n",
            "main.py": "from a import X\nclass A(X): pass\nclass S(S): pass\n",
        },
    )
    assert names(tmp_path, "main.py") == {}


def test_editing_a_base_in_another_file_changes_its_subclasses(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {"models/__init__.py": "from .base import Block\n", "models/base.py": BASE, "train.py": ""},
    )
    sub = "from models import Block\nclass Deep(Block):\n    pass\n"
    index = WorkspaceIndex([tmp_path])
    classifier = Classifier(index)
    train = tmp_path / "train.py"
    index.set_text(train, sub)  # an open, unsaved document
    assert [e.name for e in classifier.discover(train).entrypoints] == ["Deep"]

    generation = index.generation
    assert index.set_text(tmp_path / "models/base.py", NOT_BASE)  # the base stops being a module
    assert index.generation > generation
    assert classifier.discover(train).entrypoints == ()

    assert not index.set_text(tmp_path / "models/base.py", NOT_BASE + "\n# a comment\n")  # nothing visible changed
    index.close(tmp_path / "models/base.py")  # back to the disk version, a module again
    assert [e.name for e in classifier.discover(train).entrypoints] == ["Deep"]

    (tmp_path / "models/base.py").write_text(NOT_BASE)  # a change on disk, as a file watcher reports it
    assert index.file_changed(tmp_path / "models/base.py")
    assert classifier.discover(train).entrypoints == ()


def test_a_new_file_is_found_after_it_appears(tmp_path: Path) -> None:
    write_tree(tmp_path, {"train.py": "from layers import Block\nclass Net(Block):\n    pass\n"})
    index = WorkspaceIndex([tmp_path])
    classifier = Classifier(index)
    assert classifier.discover(tmp_path / "train.py").entrypoints == ()
    (tmp_path / "layers.py").write_text(BASE)
    assert index.file_changed(tmp_path / "layers.py")
    assert [e.name for e in classifier.discover(tmp_path / "train.py").entrypoints] == ["Net"]


def test_scan_skips_virtualenvs_builds_hidden_folders_and_jax_free_files(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "model.py": BASE,
            "plain.py": "def f():\n    return 1\n",
            "pkg/__init__.py": "",
            ".venv/lib/site.py": BASE,
            "venv/x.py": BASE,
            "node_modules/y.py": BASE,
            "build/z.py": BASE,
            ".hidden/w.py": BASE,
        },
    )
    index = WorkspaceIndex([tmp_path])
    scanned = sorted(p.relative_to(tmp_path.resolve()).as_posix() for p in index.scan() if p is not None)
    assert scanned == ["model.py", "pkg/__init__.py"]


def test_only_touched_statements_are_summarized_again(tmp_path: Path) -> None:
    functions = "\n".join(f"@jax.jit\ndef f{i}(x):\n    return jnp.sin(x) * {i}\n" for i in range(200))
    source = "import jax\nimport jax.numpy as jnp\n\n" + functions
    index = WorkspaceIndex([tmp_path])
    classifier = Classifier(index)
    path = tmp_path / "big.py"
    index.set_text(path, source)
    assert len(classifier.discover(path).entrypoints) == 200
    misses = index.cache.misses
    index.set_text(path, source.replace("* 17\n", "* 18\n"))
    found = classifier.discover(path).entrypoints
    assert len(found) == 200 and index.cache.misses == misses + 1
    before = [e.line for e in found]
    index.set_text(path, "# a new first line shifts every statement\n" + source.replace("* 17\n", "* 18\n"))
    shifted = classifier.discover(path).entrypoints
    assert index.cache.misses == misses + 1  # moved statements keep their summaries
    assert [e.line for e in shifted] == [line + 1 for line in before]
    assert shifted[0].line == 6
