"""The profiler's trace read back (issue 28): self time of nested events, concurrent ops sharing an
instant, and a real ``jax.profiler`` trace of a compiled program whose op times add up to the
device's busy time and name the compiled program's own instructions."""

from __future__ import annotations

import glob
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest

from jaxlsp.worker.program import devicetime
from jaxlsp.worker.program.devicetime import Span, op_of, self_spans, share_concurrent


def test_an_enclosing_event_keeps_only_its_own_time() -> None:
    # A while (0-100) holding its body's two ops (10-40, 50-90), then an op after it.
    spans = self_spans([(0, 100, "while.5"), (10, 40, "fusion"), (50, 90, "tanh"), (120, 130, "add")])
    per_op: dict[str, float] = {}
    for s in spans:
        per_op[s.op] = per_op.get(s.op, 0.0) + s.end - s.start
    assert per_op == {"while.5": 30.0, "fusion": 30.0, "tanh": 40.0, "add": 10.0}
    assert sum(per_op.values()) == 110.0  # the union of the events


def test_ops_running_at_once_share_the_instant() -> None:
    # Two threads of one device: a (0-10) alone, then a and b together (10-20), then b alone (20-30).
    per_op, busy = share_concurrent([Span(0, 20, "a"), Span(10, 30, "b")])
    assert per_op == {"a": 15.0, "b": 15.0}
    assert busy == 30.0
    per_op, busy = share_concurrent([Span(0, 10, "a"), Span(20, 25, "b")])
    assert per_op == {"a": 10.0, "b": 5.0} and busy == 15.0  # the gap is idle, not anyone's


def test_the_op_is_read_from_stats_or_an_accelerator_annotation() -> None:
    cpu = [("hlo_op", "ynn_fusion"), ("hlo_module", "jit_f"), ("device_ordinal", 2), ("run_id", 7)]
    assert op_of(cpu) == ("ynn_fusion", "jit_f", "2")
    gpu = [("correlation_id", 12), ("annotation", "jit_f:#module=jit_f#::fusion.3:#hlo_op=fusion.3,hlo_module=jit_f#")]
    assert op_of(gpu) == ("fusion.3", "jit_f", None)
    assert op_of([("_src", "threadpool_listener.cc")]) == (None, None, None)


def _profile(fn: Any, *args: Any, runs: int = 3) -> tuple[Any, str]:
    import jax
    from jax.profiler import ProfileData

    compiled = jax.jit(fn).lower(*args).compile()
    jax.block_until_ready(compiled(*args))
    with tempfile.TemporaryDirectory() as folder:
        jax.profiler.start_trace(folder)
        try:
            for _ in range(runs):
                jax.block_until_ready(compiled(*args))
        finally:
            jax.profiler.stop_trace()
        (path,) = glob.glob(str(Path(folder) / "**" / "*.xplane.pb"), recursive=True)
        return ProfileData.from_file(path), compiled.as_text()


def test_a_real_profile_gives_each_instruction_its_time() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def f(w: Any, x: Any) -> Any:
        def body(h: Any, _: Any) -> tuple[Any, None]:
            return jnp.tanh(h @ w), None

        h, _ = jax.lax.scan(body, x, None, length=4)
        return jnp.sin(h).sum() + jnp.cos(x).sum()

    w = jnp.ones((128, 128)) / 128
    x = jnp.ones((64, 128))
    data, text = _profile(f, w, x)
    module = re.match(r"HloModule (\S+?),", text)
    assert module is not None
    times = devicetime.read(data, module.group(1))
    assert times.where == "host" and list(times.busy) == ["cpu:0"]
    assert sum(times.ops.values()) == pytest.approx(times.total, rel=1e-9)
    names = set(re.findall(r"^\s*(?:ROOT )?%?([\w.\-]+) = ", text, re.M))
    assert set(times.ops) <= names  # the compiled program's own instruction names
    loops = [op for op in times.ops if op.startswith("while")]
    assert loops, sorted(times.ops)
    body = [op for op in times.ops if text.count(f"%{op} = ") and _in_body(text, op)]
    assert body, "the loop body's ops are timed on their own"
    # The while's event holds its body's four iterations: its own time is the loop's overhead.
    assert times.ops[loops[0]] < sum(times.ops[op] for op in body)
    assert all(times.counts[op] % 3 == 0 for op in times.ops)  # every run's events were read


def _in_body(text: str, op: str) -> bool:
    """Whether instruction ``op`` is in a computation a ``while`` runs as its body."""
    bodies = set(re.findall(r"while\(.*?body=%?([\w.\-]+)", text))
    current = None
    for line in text.splitlines():
        head = re.match(r"^%?([\w.\-]+) \(", line)
        if head:
            current = head.group(1)
        elif re.match(rf"^\s*(?:ROOT )?%{re.escape(op)} = ", line):
            return current in bodies
    return False


def test_another_program_in_the_profile_is_left_out() -> None:
    jax = pytest.importorskip("jax")
    data, _ = _profile(lambda x: x * 2 + 1, jax.numpy.ones((256, 256)))
    with pytest.raises(devicetime.ProfileError, match="no timed HLO op of jit_other"):
        devicetime.read(data, "jit_other")
    everything = devicetime.read(data, None)
    assert everything.ops and everything.total > 0


# One run of a bf16 MLP's program on a TPU v5e (JAX 0.10.2), as jax.profiler.ProfileData read it:
# (name, start ns, duration ns) of the /device:TPU:0 plane's events, names shortened after the
# opcode's operands (the profile prints each instruction's whole HLO text).
TPU_OPS = [
    ("%copy-start = (bf16[1024,1024]{1,0:T(8,128)(2,1)S(1)}, u32[]{:S(2)}) copy-start(%w2.1)", 50629158, 13),
    ("%copy-start.1 = (bf16[1024,512]{1,0:T(8,128)(2,1)S(1)}, u32[]{:S(2)}) copy-start(%w3.1)", 50629180, 2),
    ("%convolution_maximum_fusion.1 = bf16[512,1024]{1,0} fusion(%x.1, %w1.1), kind=kOutput", 50629194, 5351),
    ("%copy-done = bf16[1024,1024]{1,0:T(8,128)(2,1)S(1)} copy-done(%copy-start)", 50634547, 2),
    ("%copy-done.1 = bf16[1024,512]{1,0:T(8,128)(2,1)S(1)} copy-done(%copy-start.1)", 50634558, 2),
    ("%fusion = bf16[512,512]{1,0:T(8,128)(2,1)} fusion(%copy-done.1, %convolution_maximum_fusion.1)", 50634570, 9078),
]
TPU_ASYNC = [  # each async copy from its start to its done, stat hlo_op naming the done half
    (TPU_OPS[0][0], 50629158, 5391, [("hlo_op", "copy-done"), ("flow", 3)]),
    (TPU_OPS[1][0], 50629180, 5380, [("hlo_op", "copy-done.1"), ("flow", 7)]),
]


def _event(name: str, start: float, duration: float, stats: list[tuple[str, Any]] | None = None) -> Any:
    from types import SimpleNamespace

    return SimpleNamespace(name=name, start_ns=float(start), duration_ns=float(duration), stats=stats or [])


def _tpu_profile() -> Any:
    from types import SimpleNamespace

    ps = [("device_offset_ps", 1), ("Time Scale Multiplier", 1.0)]  # what the op events carry: no op stat
    lines = [
        SimpleNamespace(
            name="_counters_", events=[_event("VDD Core FW Throttle(%)", 25682782, 0, [("throttle %", 0.0)])]
        ),
        SimpleNamespace(
            name="XLA Modules",
            events=[
                _event("jit_mlp(2245751981231649343)", 50629137, 14512, [("run_id", 10)]),
                _event("jit_other(77)", 50700000, 1000, [("run_id", 11)]),
            ],
        ),
        SimpleNamespace(
            name="XLA Ops",
            events=[
                *(_event(n, s, d, ps) for n, s, d in TPU_OPS),
                _event("%fusion.9 = f32[8] fusion(%p)", 50700100, 500, ps),
            ],
        ),
        SimpleNamespace(name="Async XLA Ops", events=[_event(n, s, d, st) for n, s, d, st in TPU_ASYNC]),
        SimpleNamespace(name="TC Overlay", events=[]),
    ]
    return SimpleNamespace(planes=[SimpleNamespace(name="/device:TPU:0", lines=lines)])


def test_a_tpu_plane_is_read_by_its_lines_names_and_an_async_op_counts_once() -> None:
    # Issue 47: the TPU's op events name their instruction only in the event's name (its HLO
    # text) and their program only through the "XLA Modules" run that holds them; the async line
    # spans each prefetch while the matmuls run, and counting it too would make the copies half
    # of a step that the two fusions fill.
    times = devicetime.read(_tpu_profile(), "jit_mlp")
    assert times.where == "device"
    assert set(times.ops) == {
        "copy-start",
        "copy-start.1",
        "convolution_maximum_fusion.1",
        "copy-done",
        "copy-done.1",
        "fusion",
    }
    for name, _start, duration in TPU_OPS:
        op = devicetime.op_named(name)
        assert op is not None and times.ops[op] == pytest.approx(duration * 1e-9), op
        assert times.counts[op] == 1
    assert times.busy == {"/device:TPU:0": pytest.approx(sum(d for _, _, d in TPU_OPS) * 1e-9)}
    assert times.others == ["jit_other"]  # its op ran inside its own program's run


def test_a_tpu_weight_prefetch_counts_with_the_matmul_that_reads_it() -> None:
    # The v5e's program prefetches two weights into its fast memory (copy-start / copy-done, no
    # metadata): each goes to the fused matmul that reads the copy, the rest stays as mapped.
    from jaxlsp.worker.program import hlo, hlomap

    module = hlo.parse_module((Path(__file__).parent / "tpu_mlp.hlo.txt").read_text())
    mapped = {"convolution_maximum_fusion.1": ["n1", "n2"], "fusion": ["n5"]}
    owners = hlomap.value_owners(module, mapped)
    assert owners == {
        "copy-start": (["n5"], "fusion"),
        "copy-start.1": (["n5"], "fusion"),
        "copy-done": (["n5"], "fusion"),
        "copy-done.1": (["n5"], "fusion"),
    }
