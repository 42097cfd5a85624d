"""Which examples reach a file through their imports (capture/inputs/importers.py, issue 56): read
statically, nearest first, with the ``conftest.py`` files pytest loads first and a ``src/``
layout's package; nothing is imported."""

from __future__ import annotations

from pathlib import Path

from jaxlsp.capture.inputs.importers import ImportGraph
from jaxlsp.capture.inputs.learning import find_examples


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root.resolve()


def _texts(paths: list[Path], root: Path, **options: bool) -> list[str]:
    return [str(e["text"]) for e in find_examples(paths, root, **options)]


def test_a_file_gets_the_tests_whose_imports_reach_it_nearest_first(tmp_path: Path) -> None:
    root = _write(
        tmp_path,
        {
            "src/lib/__init__.py": "",
            "src/lib/ops.py": "import jax\n",
            "src/lib/model.py": "from .ops import *\nfrom . import ops\n",
            "src/lib/other.py": "import jax\n",
            "tests/test_a_model.py": "from lib.model import Model\n",
            "tests/test_ops.py": "import lib.ops\n",
            "tests/test_other.py": "from lib import other\n",
            "src/lib/later.py": "def f():\n    from lib import other\n",  # a module's: only when f runs
            "tests/test_later.py": "import lib.later\n",
            "tests/test_lazy.py": "def test_it():\n    import lib.ops\n",
            "tests/fixtures/conftest.py": "from lib.ops import relu\n",
            "tests/fixtures/test_uses_fixture.py": "def test_it(relu):\n    pass\n",
        },
    )
    ops = root / "src/lib/ops.py"
    # one import away, then two (through lib/model.py; through the conftest.py pytest loads first)
    assert _texts([ops], root) == [
        "tests/test_lazy.py",  # its test imports it: the run calls the test
        "tests/test_ops.py",
        "tests/test_a_model.py",
        "tests/fixtures/test_uses_fixture.py",
    ]
    assert _texts([root / "src/lib/other.py"], root) == ["tests/test_other.py"]
    # a test file asked for is its own example, first
    assert _texts([root / "tests/test_other.py"], root) == ["tests/test_other.py"]
    # a folder keeps its meaning: every test file under it
    assert len(_texts([root / "tests"], root)) == 6


def test_scripts_the_docs_run_come_after_the_tests_and_only_when_asked(tmp_path: Path) -> None:
    root = _write(
        tmp_path,
        {
            "README.md": "Run it:\n\n```\npython train.py --steps 3\n```\n",
            "layers.py": "import jax\n",
            "train.py": "import layers\n\nif __name__ == '__main__':\n    pass\n",
            "test_layers.py": "from layers import *\n",
        },
    )
    assert _texts([root / "layers.py"], root) == ["test_layers.py", "train.py --steps 3"]
    assert _texts([root / "layers.py"], root, scripts=False) == ["test_layers.py"]


def test_an_examples_sources_are_the_workspace_files_it_loads(tmp_path: Path) -> None:
    root = _write(
        tmp_path,
        {"pkg/__init__.py": "", "pkg/a.py": "from pkg import b\n", "pkg/b.py": "import numpy\n", "pkg/c.py": ""},
    )
    test = _write(tmp_path, {"tests/conftest.py": "", "tests/test_a.py": "import pkg.a\n"}) / "tests/test_a.py"
    sources = ImportGraph(root).sources({"kind": "test", "path": str(test), "text": "tests/test_a.py"})
    assert set(sources) == {
        test,
        root / "tests/conftest.py",
        *(root / "pkg" / n for n in ("__init__.py", "a.py", "b.py")),
    }


def test_through_a_packages_re_exports_only_the_tests_that_use_the_file_come(tmp_path: Path) -> None:
    """A library's ``__init__`` imports every module, so every test reaches every file: those that
    call into the file (by a name it, or a module importing it, defines) run; the rest only when
    none does."""
    root = _write(
        tmp_path,
        {
            "lib/__init__.py": "from lib.norms import rms\nfrom lib.model import Model\nfrom lib import unused\n",
            "lib/norms.py": "def rms(x):\n    return x\n",
            "lib/model.py": "from lib.norms import rms\n\n\nclass Model:\n    pass\n",
            "lib/unused.py": "def nobody():\n    pass\n",
            "tests/test_model.py": "import lib\n\n\ndef test_it():\n    lib.Model()\n",
            "tests/test_rms.py": "import lib\n\n\ndef test_it():\n    lib.rms(1)\n",
            "tests/test_version.py": "import lib\n\n\ndef test_it():\n    assert lib\n",
        },
    )
    assert _texts([root / "lib/model.py"], root) == ["tests/test_model.py"]
    assert _texts([root / "lib/norms.py"], root) == ["tests/test_model.py", "tests/test_rms.py"]
    # nothing names what it defines: every test that loads it
    assert len(_texts([root / "lib/unused.py"], root)) == 3


def test_a_name_imported_from_a_file_that_defines_its_own_is_not_a_use(tmp_path: Path) -> None:
    """A library with one API per framework defines ``Model`` in each: a test of one framework's,
    which reaches the other's file through imports, does not use it; one that imports it through
    its package's re-exports, or reaches it as an attribute, does."""
    root = _write(
        tmp_path,
        {
            "lib/__init__.py": "",
            "lib/a/__init__.py": "from .model import Model\n",
            "lib/a/model.py": "class Model:\n    pass\n",
            "lib/b/__init__.py": "from lib.b.model import Model as Model\n",
            "lib/b/model.py": "import lib.a\n\n\nclass Model:\n    pass\n",
            "tests/test_a.py": "from lib.a import Model\n\n\ndef test_it():\n    Model()\n",
            "tests/test_b.py": "from lib.b import Model\n\n\ndef test_it():\n    Model()\n",
            "tests/test_both.py": "import lib.a\nfrom lib.b import Model\n\n\ndef test_it():\n    lib.a.Model()\n",
        },
    )
    assert _texts([root / "lib/a/model.py"], root) == ["tests/test_a.py", "tests/test_both.py"]
    assert _texts([root / "lib/b/model.py"], root) == ["tests/test_b.py", "tests/test_both.py"]
