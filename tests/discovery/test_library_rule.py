"""The library-class rule against the real flax and equinox, and discovery over their sources.

The test process may import flax and equinox (discovery never does): ``issubclass`` on every
exported class is the ground truth the name rule must match.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

from jaxlsp.discovery import Classifier, WorkspaceIndex
from jaxlsp.discovery.ecosystem import library_module_kind

NAMESPACES = [
    ("flax.linen", "flax.linen", "Module", "linen"),
    ("flax.nnx", "flax.nnx", "Module", "nnx"),
    ("equinox.nn", "equinox", "Module", "equinox"),
]
# Exported modules that are state containers rather than models: the issue excludes state types.
STATE_TYPES = {"equinox.nn.StateIndex"}


@pytest.mark.parametrize(("namespace", "root_module", "root", "kind"), NAMESPACES)
def test_rule_matches_issubclass_for_every_exported_class(
    namespace: str, root_module: str, root: str, kind: str
) -> None:
    module = importlib.import_module(namespace)
    base = getattr(importlib.import_module(root_module), root)
    checked = 0
    for name in dir(module):
        value = getattr(module, name)
        if not (name[:1].isupper() and inspect.isclass(value)):
            continue
        qualified = f"{namespace}.{name}"
        expected = kind if issubclass(value, base) and qualified not in STATE_TYPES else None
        assert (library_module_kind(qualified) or None) == expected, qualified
        checked += 1
    assert checked > 20


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations)))


@pytest.mark.parametrize(
    ("package", "relpath", "present", "absent"),
    [
        ("flax", "linen/linear.py", {"Dense": "linen", "DenseGeneral": "linen", "Conv": "linen"}, set()),
        ("flax", "nnx/nn/linear.py", {"Linear": "nnx", "Embed": "nnx"}, set()),
        ("flax", "nnx/variablelib.py", {}, {"Variable", "Param", "BatchStat"}),
        ("equinox", "nn/_linear.py", {"Linear": "equinox", "Identity": "equinox"}, set()),
        ("equinox", "nn/_stateful.py", {}, {"State"}),
    ],
)
def test_discovery_over_the_installed_library_sources(
    package: str, relpath: str, present: dict[str, str], absent: set[str]
) -> None:
    root = _package_dir(package).parent  # site-packages: relative imports resolve inside it
    index = WorkspaceIndex([root])
    found = {e.name: e.kind for e in Classifier(index).discover(_package_dir(package) / relpath).entrypoints}
    for name, kind in present.items():
        assert found.get(name) == kind, (name, found)
    assert not absent & set(found)
