"""``mesh`` in a profile and ``sharding`` on its arrays (issue 28): resolved into the worker
protocol's shapes, the mesh's size as the default number of CPU devices, and every wrong key an
error at its line and key path, before anything is imported."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.recipes.test_helpers import HEADER, problems, profile

MESH = "mesh = { axes = { data = 2, model = 2 } }\n"
ARGS = 'inputs.args = [{ kind = "array", shape = [8, 16], sharding = ["data"] }]\n'


def test_a_mesh_and_sharded_arrays_resolve(tmp_path: Path) -> None:
    result = profile(
        tmp_path,
        MESH + 'inputs.args = [{ kind = "array", shape = [8, 16], sharding = ["data"] }, '
        '{ kind = "array", shape = [4, 8, 16], sharding = [[], ["data", "model"], []] }, '
        '{ kind = "array", shape = [3] }]\n',
    )
    assert result["mesh"] == {"axisNames": ["data", "model"], "axisSizes": [2, 2], "axisTypes": ["Explicit"] * 2}
    assert result["devices"] == 4  # the mesh's size: the virtual CPU devices it needs
    first, second, plain = result["inputs"]["args"]
    assert first["sharding"] == [["data"], None]  # one entry per dimension, the rest not split
    assert second["sharding"] == [None, ["data", "model"], None]
    assert "sharding" not in plain


def test_axis_types_devices_and_an_accelerator(tmp_path: Path) -> None:
    mixed = profile(tmp_path, 'mesh = { axes = { data = 2, model = 2 }, types = { model = "auto" } }\ndevices = 8\n')
    assert mixed["mesh"]["axisTypes"] == ["Explicit", "Auto"] and mixed["devices"] == 8
    auto = profile(tmp_path, 'mesh = { axes = { d = 4 }, types = "auto" }\n')
    assert auto["mesh"]["axisTypes"] == ["Auto"] and auto["devices"] == 4
    one = profile(tmp_path, "mesh = { axes = { d = 1 } }\n")
    assert "devices" not in one  # one device is what a capture has anyway
    gpu = profile(tmp_path, 'device = "cuda:0"\nmesh = { axes = { d = 1 } }\n')
    assert "devices" not in gpu and gpu["mesh"]["axisSizes"] == [1]  # an accelerator's devices: counted there


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("mesh = 4", ["5: profiles.p.mesh: expected a table such as mesh = { axes = { data = 2, model = 2 } }, got 4"]),
        (
            "mesh = { axis = { data = 2 } }",
            [
                "5: profiles.p.mesh.axis: unknown key (did you mean axes?)",
                "5: profiles.p.mesh.axes: missing (the axis names and sizes, in order: "
                "mesh = { axes = { data = 2, model = 2 } })",
            ],
        ),
        (
            "mesh = { axes = [2, 2] }",
            ["5: profiles.p.mesh.axes: expected a table of axis sizes (name = positive integer), got [2, 2]"],
        ),
        (
            "mesh = { axes = { data = 0 } }",
            ["5: profiles.p.mesh.axes.data: expected an axis size from 1 to 256, got 0"],
        ),
        (
            'mesh = { axes = { "a b" = 2 } }',
            ['5: profiles.p.mesh.axes."a b": expected an axis name (letters, digits, _)'],
        ),
        (
            'mesh = { axes = { data = 2 }, types = "manual" }',
            ['5: profiles.p.mesh.types: expected one of "explicit", "auto" (or a table axis = type), got "manual"'],
        ),
        (
            'mesh = { axes = { data = 2 }, types = { modle = "auto" } }',
            ["5: profiles.p.mesh.types.modle: not an axis of the mesh (axes: data)"],
        ),
        (
            "devices = 2\nmesh = { axes = { data = 2, model = 2 } }",
            [
                "6: profiles.p.mesh.axes: a mesh of 4 devices (data: 2, model: 2) needs at least 4 devices, and "
                "devices = 2; set devices = 4 or more, or drop devices (the mesh's size is the default)"
            ],
        ),
        (
            'from = "train.py"\nmesh = { axes = { data = 2 } }',
            ["6: profiles.p.mesh: from learns the inputs, and their shardings, from a run; drop mesh or from"],
        ),
    ],
)
def test_mesh_errors_name_the_key(tmp_path: Path, body: str, expected: list[str]) -> None:
    assert problems(tmp_path, HEADER + body + "\n") == expected


@pytest.mark.parametrize(
    ("sharding", "shape", "expected"),
    [
        ('["modle"]', "[8, 16]", 'sharding[0]: "modle" is not an axis of the mesh (axes: data, model)'),
        (
            '["data", [], "model"]',
            "[8, 16]",
            "sharding: 3 entries for an array of 2 dimensions (shape [8, 16])",
        ),
        (
            '["data", "data"]',
            "[8, 16]",
            'sharding[1]: axis "data" splits more than one dimension (JAX allows each axis once)',
        ),
        (
            '[["data", "model"]]',
            "[6, 16]",
            "sharding[0]: dimension 0 of size 6 does not split evenly over data: 2, model: 2 (4 devices)",
        ),
        ("[1]", "[8, 16]", "sharding[0]: expected a mesh axis name, a list of them, or [] (not split), got 1"),
        (
            '"data"',
            "[8, 16]",
            'sharding: expected a list with one entry per dimension (an axis name, a list of them, or []), got "data"',
        ),
    ],
)
def test_sharding_errors_name_the_key(tmp_path: Path, sharding: str, shape: str, expected: str) -> None:
    body = MESH + f'inputs.args = [{{ kind = "array", shape = {shape}, sharding = {sharding} }}]\n'
    assert problems(tmp_path, HEADER + body) == [f"6: profiles.p.inputs.args[0].{expected}"]


def test_a_sharding_needs_a_mesh(tmp_path: Path) -> None:
    assert problems(tmp_path, HEADER + ARGS) == [
        "5: profiles.p.inputs.args[0].sharding: a sharding names mesh axes, and this profile has no mesh "
        "(mesh = { axes = { data = 4 } })"
    ]
    # a mesh with a problem of its own: that one is said, not a second one at every sharding
    assert problems(tmp_path, HEADER + "mesh = { axes = { data = 0 } }\n" + ARGS) == [
        "5: profiles.p.mesh.axes.data: expected an axis size from 1 to 256, got 0"
    ]
