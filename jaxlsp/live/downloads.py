"""Whether a call site's arguments would download something: such a site never feeds a live
trace (no pygls, no processes here).

A live trace runs only what the user chose, and opening a file is not a choice to fetch a
checkpoint. bonsai's ``tests/run_model.py`` calls ``forward(model, x)`` with ``model =
Dinov3ViTModel.from_pretrained("facebook/dinov3-...")``: a complete static call site, so opening
``modeling.py`` with live shapes on made jaxlsp download hundreds of MB from the Hugging Face Hub
(and offline, fail with ``LocalEntryNotFoundError`` on every open). The site's values are recipe
input specs; a ``ref`` called with arguments is code the trace runs, and its name says what it
does: ``from_pretrained``, ``snapshot_download``, ``hf_hub_download``, ``load_checkpoint``... The
name is what a reader goes by too, and it is known before anything runs or is imported. An
explicit trace (the lens, the CLI) may still use the site: the user asked for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

# Names of calls that fetch weights or data: by the Hub's and the usual checkpoint libraries'
# conventions (transformers, huggingface_hub, timm, torch.hub, orbax, keras, urllib).
_FETCHES = re.compile(
    r"from_pretrained|from_hub|load_from_hub|\w*download\w*|urlopen|urlretrieve|load_pretrained\w*"
    r"|\w+_checkpoint\w*|checkpoint_\w+|load_state_dict_from_url|load_weights|restore_\w+",
    re.IGNORECASE,
)


def fetching_call(specs: Any) -> str | None:
    """The first called ``ref`` in ``specs`` (a site's ``init`` or ``inputs``, or a profile's)
    whose name says it downloads or loads stored weights, as ``Name.attr(...)``; else None."""
    for ref in _called_refs(specs):
        module, _, attr = ref.partition(":")
        if any(_FETCHES.fullmatch(part) for part in (*attr.split("."), *module.split("."))):
            return f"{attr or module}(...)"
    return None


def site_download(init: Any, inputs: Any, where: str) -> str | None:
    """Why a live trace does not use the call site at ``where``: an argument downloads; else None."""
    call = fetching_call(init) or fetching_call(inputs)
    if call is None:
        return None
    return (
        f"its call site at {where} builds an argument with {call}, which downloads or loads stored "
        "weights: a live trace never does; trace it once to use that site, or give a profile"
    )


def _called_refs(spec: Any) -> Iterator[str]:
    if isinstance(spec, dict):
        ref = spec.get("ref")
        if isinstance(ref, str) and ("args" in spec or "kwargs" in spec):
            yield ref
        factory = spec.get("factory")
        if isinstance(factory, str):
            yield factory  # ``init.factory = "module:function"`` runs too
        for value in spec.values():
            yield from _called_refs(value)
    elif isinstance(spec, list):
        for value in spec:
            yield from _called_refs(value)
