"""The differential fuzzer: random JAX programs traced by the worker and checked against an
independent ``make_jaxpr`` (tests/fuzz/differential.py says which invariants).

Budget: ``JAXLSP_FUZZ_EXAMPLES`` programs (default 500, about 20 s on the CI machine; ``make
fuzz`` runs 5,000). With ``JAXLSP_FUZZ_REPORT=PATH`` the figures (programs run, valid, opaque, the
constructs generated) are written to PATH as JSON.
"""

from __future__ import annotations

import itertools
import json
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.fuzz.differential import run
from tests.fuzz.programs import Program, programs

pytest.importorskip("jax")

EXAMPLES = int(os.environ.get("JAXLSP_FUZZ_EXAMPLES", "500"))
_names = itertools.count()
_stats: Counter[str] = Counter()


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("fuzz")
    report = os.environ.get("JAXLSP_FUZZ_REPORT")
    if report:
        Path(report).parent.mkdir(parents=True, exist_ok=True)
        Path(report).write_text(json.dumps(dict(sorted(_stats.items())), indent=2) + "\n")


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(program=programs())
def test_worker_agrees_with_make_jaxpr(root: Path, program: Program) -> None:
    program.name = f"prog_{next(_names)}"
    outcome = run(program, root)
    _stats["programs"] += 1
    _stats["valid" if outcome.valid else "refused by jax (and by the worker)"] += 1
    _stats["opaque"] += program.opaque
    _stats["nodes"] += outcome.nodes
    for feature in program.features:
        _stats[f"feature {feature}"] += 1
