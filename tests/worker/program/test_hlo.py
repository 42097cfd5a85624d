"""The HLO text reader (jaxlsp.worker.program.hlo) on the optimised HLO of real compiled programs:
collectives XLA inserted with their metadata, replica groups, fusions and their members, source
frames, and the mapping of instructions back to graph nodes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jaxlsp.graph.model import Frame, Node
from jaxlsp.worker.program import hlo, hlomap
from tests.deadlines import scaled

pytest.importorskip("jax")

# Programs compiled for 4 virtual CPU devices in a fresh interpreter (the device count is fixed
# when XLA's backend starts); their optimised HLO comes back as JSON: name -> text.
PROGRAMS = textwrap.dedent(
    """
    import json, sys
    import jax, jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P
    mesh = jax.make_mesh((4,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    def spec(shape, *axes):
        return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, P(*axes)))
    def matmul(a, b):
        c = a @ b
        return jnp.tanh(c).sum()
    def mapped(a):
        def body(x):
            return jax.lax.psum(jnp.sin(x) * 2.0, "x")
        return jax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P())(a)
    def fsdp(w1, w2, x):
        with jax.named_scope("Dense_0"):
            h = jax.nn.relu(x @ w1)
        with jax.named_scope("Dense_1"):
            return (h @ w2).sum()
    def single(a):
        return jnp.tanh(a @ a.T).sum()
    def scanned(ws, x):
        def layer(h, w):
            return jnp.tanh(h @ w), None
        return jax.lax.scan(layer, x, ws)[0].sum()
    plain = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32)
    looped = jax.jit(scanned).lower(plain(6, 32, 32), plain(8, 32)).compile()
    out = {
        "scanned": looped.as_text(),
        "scanned_flops": str(looped.cost_analysis()["flops"]),
        "matmul": jax.jit(matmul).lower(spec((8, 64), None, "x"), spec((64, 16), "x", None)).compile().as_text(),
        "mapped": jax.jit(mapped).lower(spec((16, 8), "x")).compile().as_text(),
        "fsdp": jax.jit(fsdp).lower(spec((32, 64), "x", None), spec((64, 16), "x", None), spec((8, 32), "x", None)).compile().as_text(),
        "single": jax.jit(single).lower(jax.ShapeDtypeStruct((8, 8), jnp.float32, sharding=NamedSharding(mesh, P()))).compile().as_text(),
    }
    json.dump(out, sys.stdout)
    """
)


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("hlo")
    script = folder / "programs.py"
    script.write_text(PROGRAMS)
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4", "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=scaled(120), check=True
    )
    out: dict[str, str] = json.loads(done.stdout)
    out["_script"] = str(script)
    return out


def _line(texts: dict[str, str], needle: str) -> int:
    """The 1-based line of the program script holding ``needle``."""
    lines = Path(texts["_script"]).read_text().splitlines()
    return next(i for i, ln in enumerate(lines, 1) if needle in ln)


def test_matmul_over_a_sharded_contracting_axis_has_one_all_reduce_at_the_matmul(texts: dict[str, str]) -> None:
    module = hlo.parse_module(texts["matmul"])
    assert module.num_partitions == 4
    [ar] = module.collectives()
    assert ar.opcode == "all-reduce" and ar.collective_kind == "all-reduce"
    assert ar.op_name == "jit(matmul)/dot_general" and ar.primitive == "dot_general"
    assert ar.shape == "f32[8,16]" and ar.bytes == 8 * 16 * 4
    assert ar.replica_groups == ((0, 1, 2, 3),)
    assert ar.source_file == texts["_script"] and ar.source_line == _line(texts, "c = a @ b")
    assert ar.frames[0].function == "matmul"
    assert ar.computation == module.entry and ar.operands and ar.operands[0] in {i.name for i in module.instructions()}


def test_fusions_list_their_members_with_metadata(texts: dict[str, str]) -> None:
    module = hlo.parse_module(texts["matmul"])
    kernels = {f.name: f for f in module.fusions()}
    assert kernels, "the CPU compiler fuses tanh and the reduction"
    tanh_kernel = next(f for f in kernels.values() if any(m.opcode == "tanh" for m in module.fused_members(f)))
    members = module.fused_members(tanh_kernel)
    assert {m.primitive for m in members if m.op_name} >= {"tanh", "reduce_sum"}
    assert all(m.opcode != "parameter" for m in members)
    assert tanh_kernel.fusion_kind is not None and tanh_kernel.called
    params = [i for i in module.entry_computation().instructions if i.opcode == "parameter"]
    assert [p.sharding for p in params] == ["{devices=[1,4]<=[4]}", "{devices=[4,1]<=[4]}"]


def test_shard_map_psum_is_an_all_reduce_at_its_line(texts: dict[str, str]) -> None:
    module = hlo.parse_module(texts["mapped"])
    [ar] = module.collectives()
    assert ar.collective_kind == "all-reduce"
    assert ar.primitive in hlomap.PRIMITIVE_ALIASES["psum"]
    assert ar.source_line == _line(texts, "jax.lax.psum(")
    assert ar.replica_groups == ((0, 1, 2, 3),)


def test_fsdp_all_gathers_name_the_layers_that_need_them(texts: dict[str, str]) -> None:
    module = hlo.parse_module(texts["fsdp"])
    gathers = [c for c in module.collectives() if c.collective_kind == "all-gather"]
    assert sorted(hlo.scope_names(g.op_name)[0] for g in gathers) == ["Dense_0", "Dense_1"]
    assert sorted(g.shape for g in gathers) == ["f32[32,64]", "f32[64,16]"]
    assert {g.source_line for g in gathers} == {_line(texts, "x @ w1"), _line(texts, "h @ w2")}


def test_a_single_device_program_has_no_collectives(texts: dict[str, str]) -> None:
    module = hlo.parse_module(texts["single"])
    assert module.collectives() == []
    assert any(i.opcode == "fusion" for i in module.instructions())


def _node(nid: str, primitive: str, path: str, line: int, column: int, scope: str = "") -> Node:
    frame = Frame(path=path, line=line, column=column, end_line=line, end_column=column + 5)
    return Node(nid, primitive, {}, [], [], scope, None, frame, [frame])


def test_map_module_attributes_instructions_to_graph_nodes(texts: dict[str, str]) -> None:
    module = hlo.parse_module(texts["fsdp"])
    name = Path(texts["_script"]).name
    l0, l1 = _line(texts, "x @ w1"), _line(texts, "h @ w2")
    nodes = [
        _node("n0", "dot_general", name, l0, 24, "Dense_0"),
        _node("n1", "max", name, l0, 12, "Dense_0"),
        _node("n2", "dot_general", name, l1, 16, "Dense_1"),
        _node("n3", "reduce_sum", name, l1, 15, "Dense_1"),
        _node("n4", "dot_general", "other.py", l0, 24, "Dense_0"),  # another file: never matched
    ]
    mapping = hlomap.map_module(module, nodes)
    gathers = {g.name: hlo.scope_names(g.op_name)[0] for g in module.collectives() if g.collective_kind == "all-gather"}
    for gname, layer in gathers.items():
        assert mapping[gname] == (["n0"] if layer == "Dense_0" else ["n2"])
    fused = {f.name: mapping.get(f.name) for f in module.fusions()}
    assert ["n1"] in fused.values()  # the relu kernel
    assert all("n4" not in ids for ids in mapping.values())


def test_replica_group_forms() -> None:
    assert hlo.parse_replica_groups("{{0,1},{2,3}}") == ((0, 1), (2, 3))
    assert hlo.parse_replica_groups("{}", 4) == ((0, 1, 2, 3),)
    assert hlo.parse_replica_groups("[2,2]<=[4]") == ((0, 1), (2, 3))
    assert hlo.parse_replica_groups("[2,2]<=[2,2]T(1,0)") == ((0, 2), (1, 3))
    assert hlo.parse_replica_groups("mesh['a'=2,'b'=2] {'b'}") == ((0, 1), (2, 3))
    assert hlo.parse_replica_groups("mesh['a'=2,'b'=2] {'a'}") == ((0, 2), (1, 3))
    assert hlo.parse_replica_groups("mesh['a'=2,'b'=2] {'a','b'}") == ((0, 1, 2, 3),)
    assert hlo.parse_replica_groups("mesh['a'=4] {'a':(1)2}") is None


def test_shapes_and_bad_text() -> None:
    assert hlo.shape_bytes("(f32[2,3], bf16[4], s32[])") == 24 + 8 + 4
    assert hlo.shape_bytes("token[]") == 0
    with pytest.raises(ValueError, match="not an HLO module"):
        hlo.parse_module("module @jit_f {}")
    with pytest.raises(ValueError, match="HLO line 4: not an instruction"):
        hlo.parse_module("HloModule m\n\nENTRY %main () -> f32[] {\n  garbage here\n}\n")


def test_flops_bytes_and_the_schedule_peak_on_one_device(texts: dict[str, str]) -> None:
    module = hlo.parse_module(texts["matmul"])
    dots = [m for f in module.fusions() for m in module.fused_members(f) if m.opcode == "dot"]
    assert [module.flops(d) for d in dots] == [2 * 8 * 16 * 16]  # each device contracts 16 of the 64
    [ar] = module.collectives()
    assert module.bytes_accessed(ar) == 2 * 8 * 16 * 4
    peak = module.schedule_peak()
    # both arguments' shards, the partial product and its sum, live together at the all-reduce
    assert peak.at is not None and peak.at.opcode == "all-reduce"
    assert peak.bytes == (8 * 16 + 16 * 16) * 4 + 2 * 8 * 16 * 4
    assert sorted(b.instruction.opcode for b in peak.live) == ["all-reduce", "fusion", "parameter", "parameter"]
    assert [p.parameter_number for p in module.schedule() if p.opcode == "parameter"] == [0, 1]


def test_loop_bodies_are_counted_once_as_xla_counts_them(texts: dict[str, str]) -> None:
    from jaxlsp.worker.program.compiled import _kernels

    module = hlo.parse_module(texts["scanned"])
    kernels = _kernels(module)
    assert any(k.opcode == "while" for k in kernels) and any(k.computation != module.entry for k in kernels)
    flops = sum(module.flops(m) for k in kernels for m in (module.fused_members(k) if k.opcode == "fusion" else [k]))
    xla = float(texts["scanned_flops"])
    assert abs(flops - xla) <= 0.01 * xla, (flops, xla)  # one layer's product, as XLA counts it
    # the loop updates its carry in place: its result is no second copy of the weights
    peak = module.schedule_peak()
    assert all(b.instruction.opcode != "while" for b in peak.live)
    assert peak.bytes < 2 * (6 * 32 * 32 + 8 * 32) * 4
