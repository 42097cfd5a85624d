"""The first-call hook's placement in the target's source (worker/examples/runners.py ``Instrument``)."""

from __future__ import annotations

import ast

import pytest

from jaxlsp.worker.examples.runners import HOOK_NAME, Instrument, inherits


def hooked(source: str, owner: str, method: str | None = None) -> tuple[bool, str]:
    tree = ast.parse(source)
    found = Instrument(owner.split("."), method).apply(tree)
    return found, ast.unparse(tree)


def test_the_hook_goes_first_in_the_call_after_the_docstring() -> None:
    found, text = hooked('class A(Base):\n    def __call__(self, x):\n        """Doc."""\n        return x\n', "A")
    assert found
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    assert lines[2:4] == ['"""Doc."""', f"{HOOK_NAME}('call')"]


@pytest.mark.parametrize(
    "body",
    [
        "    def __init__(self):\n        pass\n",  # only an __init__: the base's call runs
        "    __call__: AbstractClassVar[Callable]\n",  # an annotation alone defines nothing
    ],
)
def test_a_class_without_its_own_call_gets_one_when_a_base_has_it(body: str) -> None:
    found, text = hooked(f"class A(Base, Mixin):\n{body}", "A")
    assert found
    assert f"if {HOOK_NAME}.inherits((Base, Mixin), '__call__', " in text  # and the class's own methods
    assert "return super().__call__(*args, **kwargs)" in text


def test_a_call_assigned_in_the_body_is_its_own() -> None:
    found, text = hooked("class A(Base):\n    __call__ = forward\n", "A")
    assert not found and HOOK_NAME not in text


def test_inherits_looks_through_the_bases_not_object() -> None:
    class Base:
        def __call__(self) -> None: ...

    class Child(Base): ...

    assert inherits((Child,), "__call__")
    assert not inherits((object, int), "__call__")
