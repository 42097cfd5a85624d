"""The lens title's figures: the first outputs' types, and "+N" when some are left out (issue 16)."""

from __future__ import annotations

from jaxlsp.server.features.lenses import lens_figures


def test_lens_figures_say_how_many_outputs_are_left_out() -> None:
    assert lens_figures(3, []) == "3 ops"
    assert lens_figures(1234, ["f32[2]"]) == "1,234 ops · f32[2]"
    assert lens_figures(64, ["f32[4,10]", "f32[32]"]) == "64 ops · f32[4,10], f32[32]"
    assert lens_figures(64, ["f32[4,10]", "f32[32]", "f32[32]"]) == "64 ops · f32[4,10], f32[32] +1"
    assert lens_figures(9, [f"f32[{i}]" for i in range(12)]) == "9 ops · f32[0], f32[1] +10"
