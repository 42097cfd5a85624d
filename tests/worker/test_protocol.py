"""The worker's face: failure kinds are an enum that writes the same JSON strings, and a failure
says as data what it needed that a ``load = "definitions"`` left unset."""

from __future__ import annotations

import json
from typing import get_args

from jaxlsp.worker.core.failures import CaptureError
from jaxlsp.worker.protocol import ErrorKind, ErrorKindName


def test_the_spelled_kinds_are_the_enums_members() -> None:
    assert list(get_args(ErrorKindName)) == [kind.value for kind in ErrorKind]


def test_a_kind_is_its_wire_string_in_json_and_text() -> None:
    assert json.dumps({"kind": ErrorKind.NEEDS_INPUT}) == '{"kind": "needs_input"}'
    assert f"{ErrorKind.TRACE}" == str(ErrorKind.TRACE) == "trace"
    assert ErrorKind(json.loads('"import"')) is ErrorKind.IMPORT and ErrorKind.IMPORT == "import"


def test_a_capture_error_carries_its_kind_and_what_a_definitions_load_left_unset() -> None:
    error = CaptureError("import", "importing m.py failed: NameError: name 'data' is not defined")
    assert error.kind is ErrorKind.IMPORT and "skipped" not in error.info()
    error.skipped = "data"
    info = error.info()
    assert info["kind"] is ErrorKind.IMPORT and info["skipped"] == "data"
    assert json.loads(json.dumps(info))["kind"] == "import"
