"""The adapter over private JAX modules still finds frames, name stacks and the backend flag."""

from __future__ import annotations

import pytest

from tests.deadlines import scaled

pytest.importorskip("jax")


def test_user_frames_and_name_stack() -> None:
    import jax
    import jax.numpy as jnp

    from jaxlsp.worker.tracing import jaxcompat

    def f(x):
        with jax.named_scope("outer"):
            return jnp.sin(x)

    closed = jax.make_jaxpr(jax.grad(f))(1.0)
    eqn = closed.jaxpr.eqns[0]
    frames = jaxcompat.user_frames(eqn.source_info)
    assert frames and frames[0].file == __file__
    assert frames[0].function.endswith("f")
    assert frames[0].line > 0 and frames[0].end_column > frames[0].column
    items = jaxcompat.name_stack_items(eqn.source_info)
    assert ("scope", "outer") in items
    assert ("transform", "jvp") in items
    assert jaxcompat.user_frames(None) == []
    assert jaxcompat.name_stack_items(None) == []
    assert isinstance(jaxcompat.backends_initialized(), bool)


def test_warm_compiles_the_user_frame_patterns_and_jax_still_rebuilds_them() -> None:
    import os

    from jax._src import source_info_util as siu

    from jaxlsp.worker.tracing import jaxcompat

    siu._exclude_path_regex.cache_clear()
    jaxcompat.warm()
    assert siu._exclude_path_regex.cache_info().currsize == 1
    assert siu._include_path_regex.cache_info().currsize == 1
    # A library imported later by the user's code that hides its own frames is still honoured:
    # JAX drops the compiled pattern when an exclusion is registered.
    hidden = os.path.join(os.sep, "opt", "jaxlsp-test-hidden-lib") + os.sep
    assert siu.is_user_filename(hidden + "layers.py")
    siu.register_exclusion(hidden)
    try:
        assert not siu.is_user_filename(hidden + "layers.py")
    finally:
        siu._exclude_paths.remove(hidden)
        siu._exclude_path_regex.cache_clear()
        siu.is_user_filename.cache_clear()


def test_the_same_code_in_two_files_keeps_each_files_frames() -> None:
    """Found by the differential fuzzer: code objects compare by value, so a copied function in
    another file (model.py and model_v2.py) got the first file's frames from the frame cache."""
    import jax
    import jax.numpy as jnp

    from jaxlsp.worker.tracing import jaxcompat

    source = "def f(x):\n    return jnp.sin(x)\n"
    files = []
    for name in ("/tmp/jaxlsp_same_a.py", "/tmp/jaxlsp_same_b.py"):
        namespace: dict[str, object] = {"jnp": jnp}
        exec(compile(source, name, "exec"), namespace)
        eqn = jax.make_jaxpr(namespace["f"])(1.0).jaxpr.eqns[0]
        files.append(jaxcompat.user_frames(eqn.source_info)[0].file)
    assert files == ["/tmp/jaxlsp_same_a.py", "/tmp/jaxlsp_same_b.py"]


def test_bound_axes_reads_the_names_a_surrounding_vmap_binds() -> None:
    import jax
    import jax.numpy as jnp

    from jaxlsp.worker.tracing import jaxcompat

    seen: list[list[tuple[object, int]]] = []

    def f(x: jax.Array) -> jax.Array:
        seen.append(jaxcompat.bound_axes())
        return x

    jax.vmap(f, axis_name="batch")(jnp.ones((5, 2)))
    assert seen == [[("batch", 5)]]
    assert jaxcompat.bound_axes() == []


def test_own_caches_trace_a_jit_again_in_another_thread_while_its_first_trace_is_in_flight() -> None:
    import threading

    import jax
    import jax.numpy as jnp

    from jaxlsp.worker.tracing import jaxcompat

    traced: list[str] = []
    inner: dict[str, object] = {}

    @jax.jit
    def step(x):
        traced.append(threading.current_thread().name)
        if len(traced) == 1:  # the example's trace, paused here as the first-call hook pauses it
            own = jaxcompat.own_caches()

            def again() -> None:
                with own():
                    inner["jaxpr"] = jax.make_jaxpr(step)(jnp.ones(3))

            thread = threading.Thread(target=again, name="other")
            thread.start()
            thread.join(timeout=scaled(30))
            assert not thread.is_alive(), "the second trace waited on the first's cache entry"
        return x * 2

    jax.make_jaxpr(step)(jnp.ones(3))
    assert traced[1:] == ["other"] and "mul" in str(inner["jaxpr"])


def test_cheap_tracer_probes_keep_getattr_probes_from_walking_the_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    """Flax NNX probes ``getattr(value, "sharding", None)`` on every Variable write (each RNG
    draw); JAX's AttributeError text walks every equation traced so far, so an abstract
    construction cost O(draws x equations). Inside the block the probe is O(1), and the text, when
    read, is still JAX's own."""
    import jax
    import jax.numpy as jnp
    from flax import nnx
    from jax._src.interpreters import partial_eval

    from jaxlsp.worker.tracing import jaxcompat

    walks = 0
    original = partial_eval.DynamicJaxprTracer._origin_msg

    def counted(self: object) -> str:
        nonlocal walks
        walks += 1
        return original(self)  # type: ignore[arg-type]

    monkeypatch.setattr(partial_eval.DynamicJaxprTracer, "_origin_msg", counted)

    class Stack(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            self.layers = nnx.List([nnx.Linear(4, 4, rngs=rngs) for _ in range(3)])

    def build() -> Stack:
        return nnx.eval_shape(lambda: Stack(nnx.Rngs(0)))

    build()
    assert walks > 0  # JAX's own probe builds its text, every time

    walks = 0
    errors: list[BaseException] = []

    def probed(x: jax.Array) -> jax.Array:
        assert getattr(x, "sharding", None) is None and not hasattr(x, "device")
        try:
            x.sharding  # noqa: B018
        except AttributeError as exc:
            errors.append(exc)
        return jnp.sin(x)

    sharding = jax.core.Tracer.__dict__["sharding"]
    with jaxcompat.cheap_tracer_probes():
        model = build()
        jax.make_jaxpr(probed)(1.0)
    assert walks == 0
    assert jax.core.Tracer.__dict__["sharding"] is sharding  # restored
    assert [tuple(v.shape) for v in jax.tree_util.tree_leaves(nnx.state(model, nnx.Param))] == [(4,), (4, 4)] * 3
    # the text, made when read, is JAX's own
    assert str(errors[0]).startswith("The 'sharding' attribute is not available on traced array with shape float32[]")


def test_the_partial_evaluations_input_check_is_linear_and_gives_the_same_program() -> None:
    """``linear_input_check`` replaces jax's ``tracers_to_jaxpr`` by a copy of its own source whose
    check that each input met is an input looks ids up in a set (jax walks every input for each:
    quadratic in a scan body's scanned parameters). The programs are the same, and the copy still
    refuses a tracer that is no input, as jax's does."""
    nn = pytest.importorskip("flax.linen")
    import jax
    import jax.numpy as jnp
    from jax._src import core
    from jax._src import source_info_util as siu
    from jax._src.interpreters import partial_eval as pe

    from jaxlsp.worker.tracing import jaxcompat

    class Cell(nn.Module):
        @nn.compact
        def __call__(self, x: jax.Array, _: None) -> tuple[jax.Array, None]:
            return jnp.tanh(nn.Dense(4)(x)) + x, None

    class Scanned(nn.Module):
        @nn.compact
        def __call__(self, x: jax.Array) -> jax.Array:
            scan = nn.scan(Cell, variable_axes={"params": 0}, split_rngs={"params": True}, length=5)
            return scan()(x, None)[0]

    model = Scanned()
    x = jax.ShapeDtypeStruct((2, 4), jnp.float32)
    variables = jax.eval_shape(lambda x: model.init(jax.random.key(0), x), x)

    def program() -> str:
        closed = jax.make_jaxpr(lambda v, x: model.apply(v, x))(variables, x)
        return str(closed.jaxpr.pretty_print(source_info=True, name_stack=True))

    # jax's own, though an in-process capture before this test (same worker) put the copy in
    installed = pe.tracers_to_jaxpr
    original = getattr(installed, "__wrapped__", installed)
    pe.tracers_to_jaxpr = original
    jaxcompat.runtime._LINEAR_CHECK.clear()
    try:
        before = program()
        assert jaxcompat.linear_input_check()
        assert pe.tracers_to_jaxpr is not original and pe.tracers_to_jaxpr.__wrapped__ is original
        assert program() == before

        trace = pe.JaxprTrace(core.eval_trace, siu.new_name_stack(), core.TraceTag())
        stray = pe.JaxprTracer(trace, pe.PartialVal.unknown(core.ShapedArray((), jnp.float32)), pe.LambdaBinding())
        with pytest.raises(Exception, match="not in input tracers"):
            pe.tracers_to_jaxpr([], [stray], [], None)
    finally:
        pe.tracers_to_jaxpr = installed
        jaxcompat.runtime._LINEAR_CHECK.clear()
        if installed is not original:
            jaxcompat.runtime._LINEAR_CHECK.extend([original, installed])
