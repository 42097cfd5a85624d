"""Loading helpers without JAX: package-qualified names and the definitions-only filter."""

from __future__ import annotations

import ast

from jaxlsp.worker.loading.loading import definitions_only, module_name_for
from tests.worker.conftest import WORKSPACE


def test_module_names() -> None:
    assert module_name_for(str(WORKSPACE / "pkg" / "model.py")) == ("pkg.model", str(WORKSPACE))
    assert module_name_for(str(WORKSPACE / "funcs.py")) == ("funcs", str(WORKSPACE))


def test_definitions_only_keeps_imports_defs_and_call_free_assignments() -> None:
    source = """
import os
from math import pi
'''doc'''
A = 3
B = os.getcwd()
C: int = 4
try:
    import numpy
except ImportError:
    numpy = None
def f():
    return A
class K:
    x = print("class bodies are definitions")
train()
for i in range(3):
    print(i)
if __name__ == "__main__":
    main()
if A:
    D = 5
"""
    kept = definitions_only(ast.parse(source).body)
    text = ast.unparse(ast.Module(body=kept, type_ignores=[]))
    for present in (
        "import os",
        "from math import pi",
        "A = 3",
        "C: int = 4",
        "import numpy",
        "def f",
        "class K",
        "D = 5",
    ):
        assert present in text
    for absent in ("getcwd", "train()", "range(3)", "main()"):
        assert absent not in text
