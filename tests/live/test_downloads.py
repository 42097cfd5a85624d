"""Which call-site arguments download or load stored weights (jaxlsp/live/downloads.py): by the
name of what a ``ref`` calls, anywhere in the specs."""

from __future__ import annotations

from jaxlsp.live.downloads import fetching_call, site_download


def test_called_refs_named_like_downloads_are_found_anywhere_in_the_specs() -> None:
    bonsai = {"args": [{"ref": "bonsai.models.dinov3.modeling:Dinov3ViTModel.from_pretrained", "args": ["facebook/x"]}]}
    assert fetching_call(bonsai) == "Dinov3ViTModel.from_pretrained(...)"
    nested = {"kwargs": {"cfg": {"ref": "m:Config", "kwargs": {"w": {"ref": "hub:hf_hub_download", "args": ["r"]}}}}}
    assert fetching_call(nested) == "hf_hub_download(...)"
    assert fetching_call({"factory": "loaders:load_pretrained_model"}) == "load_pretrained_model(...)"
    assert fetching_call([{"ref": "orbax:Checkpointer.restore_checkpoint", "kwargs": {}}]) is not None


def test_plain_constructors_and_uncalled_refs_are_not_downloads() -> None:
    assert fetching_call({"args": [{"ref": "models:TransformerConfig", "kwargs": {"emb_dim": 16}}]}) is None
    assert fetching_call({"args": [{"ref": "jax:checkpoint", "args": []}]}) is None  # remat, not a file
    assert fetching_call({"args": [{"ref": "hub:Model.from_pretrained"}]}) is None  # the method itself, not run
    assert fetching_call({"args": [{"kind": "array", "shape": [2, 3]}]}) is None
    assert site_download(None, {"args": [1]}, "t.py:3") is None


def test_the_reason_names_the_site_and_the_call() -> None:
    why = site_download(None, {"args": [{"ref": "m:M.from_pretrained", "args": ["x"]}]}, "tests/run_model.py:20")
    assert why is not None and "tests/run_model.py:20" in why and "M.from_pretrained(...)" in why
