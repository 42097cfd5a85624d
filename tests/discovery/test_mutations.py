"""Property-based robustness of discovery: mutated, truncated and half-typed model files.

The sources are the files in ``examples/`` plus two inline files (plain JAX functions; Linen, NNX
and Equinox modules side by side). Top-level statements are found with :mod:`ast` on the
unmutated source, never with discovery's own scanner, so the oracle is independent of the code
under test. Every entrypoint of the fixtures starts at column 0 with ``def``, ``class`` or ``@``,
and every import or assignment comes before the first definition: that is the layout in which
discovery promises to recover from an unclosed bracket at the next definition.

1. Any mutation (insertions of Python-ish pieces, deletions, truncations): discovery never raises,
   reports spans inside the text, and an index warm from the original agrees with a fresh one.
2. Truncation at a line boundary keeps every entrypoint whose statement ends before the cut.
3. A quote-free mutation of one top-level definition that nothing else depends on keeps every
   entrypoint of the other statements, at lines shifted by the change in line count.
4. A half-typed line after any top-level statement keeps every entrypoint.

The ``@example``s are damage this test has found, kept as explicit cases so they are always checked.
"""

from __future__ import annotations

import ast
import functools
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from jaxlsp.discovery import Classifier, Discovery, Entrypoint, WorkspaceIndex

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

PLAIN_JAX = '''\
"""Plain JAX layers and losses, written the way research code usually is."""

from __future__ import annotations

import functools
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

EPS = 1e-6  # a constant, "not an entrypoint"; brackets in a comment: [ ( {


class Batch(NamedTuple):
    """A plain tuple class, not a module."""

    inputs: jax.Array
    labels: jax.Array


@partial(jax.jit, static_argnums=0)
def init_params(width: int, key: jax.Array) -> dict[str, jax.Array]:
    """Glorot-ish weights.

    A multi-line docstring with a bracket ( and a quote ' inside.
    """
    k1, k2 = jax.random.split(key)
    return {
        "w1": jax.random.normal(k1, (width, width)) / jnp.sqrt(width),
        "w2": jax.random.normal(k2, (width, 1)),
    }


@functools.partial(jax.jit, static_argnames=("train",))
def forward(params: dict[str, jax.Array], x: jax.Array, train: bool = False) -> jax.Array:
    h = jnp.tanh(x @ params["w1"])  # a "quoted" comment with ] and )
    if train:
        h = h * 0.5
    else:
        h = h + EPS
    return (h @ params["w2"]).squeeze(-1)


@jax.vmap
def pairwise(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.sum((a - b) ** 2)


def loss(params, batch: Batch) -> jax.Array:
    preds = forward(params, batch.inputs)
    return jnp.mean(
        (preds - batch.labels) ** 2
    )


def scan_sum(xs: jax.Array) -> jax.Array:
    def step(carry, x):
        return carry + x, carry

    total, _ = lax.scan(step, 0.0, xs)
    return total


@jax.custom_vjp
def clip_gradient(x):
    return x


def fmt(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"


def run(params, batches, steps: int = 10):
    for step in range(steps):
        for batch in batches:
            value = loss(params, batch)
        print(f"step {step}: {float(value):.3f}")
    return params


if __name__ == "__main__":
    run(init_params(8, jax.random.PRNGKey(0)), [])
'''

MODULES = '''\
"""Linen, NNX and Equinox modules side by side."""

import dataclasses
from collections.abc import Callable
from typing import Any

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import nnx

Dtype = Any
default_init = nn.initializers.lecun_normal()


class Encoder(nn.Module):
    """A Linen encoder with a nested head."""

    features: int = 64
    dtype: Dtype = jnp.float32
    act: Callable[[jax.Array], jax.Array] = nn.relu

    class Head(nn.Module):
        classes: int = 10

        @nn.compact
        def __call__(self, x):
            return nn.Dense(self.classes, kernel_init=default_init)(x)

    @nn.compact
    def __call__(self, x: jax.Array, *, train: bool = False) -> jax.Array:
        x = nn.Dense(
            self.features,
            dtype=self.dtype,
        )(x)
        x = nn.BatchNorm(use_running_average=not train)(x)
        return self.act(x)


class Decoder(nn.Module):
    features: int = 64

    def setup(self):
        self.proj = nn.Dense(self.features)

    def __call__(self, z):
        return self.proj(z)


@dataclasses.dataclass
class TrainConfig:
    lr: float = 1e-3
    name: str = "run[0]"


class Block(nnx.Module):
    def __init__(self, din: int, dout: int, *, rngs: nnx.Rngs):
        self.linear = nnx.Linear(din, dout, rngs=rngs)
        self.norm = nnx.LayerNorm(dout, rngs=rngs)

    def __call__(self, x):
        return nnx.gelu(self.norm(self.linear(x)))


class Residual(Block):
    """Derives a module defined above in the same file."""

    def __call__(self, x):
        return x + super().__call__(x)


class Linear(eqx.Module):
    weight: jax.Array
    bias: jax.Array
    activation: Callable = eqx.field(static=True, default=jax.nn.relu)

    def __init__(self, din: int, dout: int, key: jax.Array):
        wkey, bkey = jax.random.split(key)
        self.weight = jax.random.normal(wkey, (dout, din))
        self.bias = jax.random.normal(bkey, (dout,))

    def __call__(self, x):
        return self.activation(self.weight @ x + self.bias)


@eqx.filter_jit
def apply_linear(model: Linear, xs: jax.Array) -> jax.Array:
    return jax.vmap(model)(xs)


@nnx.jit
def nnx_step(model: Block, x):
    return model(x).mean()
'''


class Source:
    """A fixture file; its repr (what hypothesis prints for a failing example) is its label."""

    def __init__(self, label: str, path: Path, text: str) -> None:
        self.label = label
        self.path = path  # where the open document lives (the example's own path, so imports resolve)
        self.text = text

    def __repr__(self) -> str:
        return f"<source {self.label}>"


def _sources() -> tuple[Source, ...]:
    out = [Source(str(p.relative_to(EXAMPLES)), p, p.read_text()) for p in sorted(EXAMPLES.rglob("*.py"))]
    out.append(Source("<plain_jax>", EXAMPLES / "_robustness_plain_jax.py", PLAIN_JAX))
    out.append(Source("<modules>", EXAMPLES / "_robustness_modules.py", MODULES))
    return tuple(out)


SOURCES = _sources()
SOURCE = {s.label: s for s in SOURCES}

Key = tuple[str, str, int]  # (qualified name, kind, 0-based line of the def/class keyword)


@dataclass(frozen=True)
class Stmt:
    start: int  # 0-based first line (first decorator included)
    end: int  # 0-based last line
    definition: bool  # a def or a class


@dataclass(frozen=True)
class Analysis:
    entries: tuple[Entrypoint, ...]
    stmts: tuple[Stmt, ...]
    owner: tuple[int, ...]  # for each entry, the index of its top-level statement
    independent: tuple[int, ...]  # definitions whose removal keeps every other entrypoint
    bound: frozenset[str]  # names bound at module level (imports, assignments, definitions)


def discover(source: Source, text: str, index: WorkspaceIndex | None = None) -> Discovery:
    index = index if index is not None else WorkspaceIndex([EXAMPLES])
    index.set_text(source.path, text)
    return Classifier(index).discover(source.path)


def key(e: Entrypoint) -> Key:
    return (e.name, e.kind, e.header.line)


def keys(d: Discovery) -> Counter[Key]:
    return Counter(key(e) for e in d.entrypoints)


def describe(d: Discovery) -> list[tuple[object, ...]]:
    """Everything discovery reports about a file, in a comparable form."""
    return [
        (e.name, e.kind, e.header, e.body, e.decorators, e.fields, e.reason, e.driver)
        for e in (*d.entrypoints, *d.drivers)
    ]


def top_level(text: str) -> tuple[Stmt, ...]:
    out: list[Stmt] = []
    for node in ast.parse(text).body:
        first = node.lineno
        definition = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([first, *(d.lineno for d in node.decorator_list)])
        assert node.end_lineno is not None
        out.append(Stmt(first - 1, node.end_lineno - 1, definition))
    return tuple(out)


def module_names(text: str) -> frozenset[str]:
    out: set[str] = set()
    for node in ast.parse(text).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        else:
            out.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return frozenset(out)


def blank(text: str, stmt: Stmt) -> str:
    lines = text.split("\n")
    lines[stmt.start : stmt.end + 1] = [""] * (stmt.end - stmt.start + 1)
    return "\n".join(lines)


def missing(expected: Counter[Key], got: Counter[Key]) -> list[Key]:
    return sorted((expected - got).elements())


@functools.cache
def analyze(source: Source) -> Analysis:
    stmts = top_level(source.text)
    entries = discover(source, source.text).entrypoints
    owner: list[int] = []
    for e in entries:
        line = e.header.line
        owner.append(next(i for i, s in enumerate(stmts) if s.start <= line <= s.end))
    independent: list[int] = []
    for i, s in enumerate(stmts):
        if not s.definition:
            continue
        others = Counter(key(e) for e, o in zip(entries, owner, strict=True) if o != i)
        if not missing(others, keys(discover(source, blank(source.text, s)))):
            independent.append(i)
    return Analysis(tuple(entries), stmts, tuple(owner), tuple(independent), module_names(source.text))


def test_fixtures_are_valid_and_have_entrypoints() -> None:
    for source in SOURCES:
        ast.parse(source.text)
        analysis = analyze(source)
        if source.path.name != "__init__.py":
            assert analysis.entries, source.label
    assert sum(len(analyze(s).entries) for s in SOURCES) >= 25
    assert sum(len(analyze(s).independent) for s in SOURCES) >= 15


# -- mutations -------------------------------------------------------------------------------------

# Python-ish pieces: quotes (single and triple), brackets, colons, newlines, indentation, comments,
# continuations, decorators, keywords and a few odd characters.
ANY_PIECES = [
    *"()[]{}:;,.=+-*/%<>!~^&|@#\\'\" \t\n\r\x0cx_019é",
    '"""',
    "'''",
    "\n    ",
    "    ",
    "\n\n",
    "def ",
    "class ",
    "async ",
    "lambda",
    "else:",
    "return ",
    "yield",
    "import ",
    "from ",
    "jax",
    "nn.Module",
    "@jax.jit\n",
    'f"{',
    "\u2028",
]
# The same without quote characters or what changes how quotes are read (``#``, ``\``), without
# ``@`` (a mutation must not become a decorator of the statement below it), ``\r`` (a line break
# the line count below would miss) and words that could rebind the module's imports.
SAFE_PIECES = [p for p in ANY_PIECES if not set(p) & set("\"'#\\@\r") and p not in ("import ", "from ", 'f"{', "jax")]
PROTECTED = frozenset("\"'#\\")  # characters a quote-free mutation never deletes

Op = tuple[str, int, object]


def ops(pieces: list[str], truncate: bool) -> st.SearchStrategy[list[Op]]:
    insert = st.tuples(
        st.just("insert"), st.integers(0, 10**6), st.lists(st.sampled_from(pieces), min_size=1, max_size=6)
    )
    delete = st.tuples(st.just("delete"), st.integers(0, 10**6), st.integers(1, 8))
    choices = [insert, delete]
    if truncate:
        choices.append(st.tuples(st.just("truncate"), st.integers(0, 10**6), st.just(None)))
    return st.lists(st.one_of(*choices), min_size=1, max_size=5)


def apply(text: str, edits: list[Op], keep: frozenset[str] = frozenset()) -> str:
    for op, where, arg in edits:
        if op == "insert":
            pos = where % (len(text) + 1)
            assert isinstance(arg, list)
            text = text[:pos] + "".join(arg) + text[pos:]
        elif op == "delete":
            if not text:
                continue
            pos = where % len(text)
            assert isinstance(arg, int)
            gone = text[pos : pos + arg]
            text = text[:pos] + "".join(c for c in gone if c in keep) + text[pos + arg :]
        else:
            text = text[: where % (len(text) + 1)]
    return text


def check_well_formed(d: Discovery, text: str) -> None:
    n = len(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    for e in (*d.entrypoints, *d.drivers):
        assert e.kind in ("function", "linen", "nnx", "equinox")
        assert e.name and all(part.isidentifier() for part in e.name.split("."))
        assert 0 <= e.body.line <= e.header.line <= e.body.end_line < n


# -- property 1: never raises --------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(source=st.sampled_from(SOURCES), edits=ops(ANY_PIECES, truncate=True))
# Found by this test: a module class ending in an unclosed bracket at end of file (IndexError).
@example(source=SOURCE["blocks/base.py"], edits=[("truncate", 515, None)])
def test_discovery_never_raises(source: Source, edits: list[Op]) -> None:
    text = apply(source.text, edits)
    fresh = discover(source, text)
    check_well_formed(fresh, text)
    # An index warm from the original text must agree with a fresh one about the mutated text.
    index = WorkspaceIndex([EXAMPLES])
    discover(source, source.text, index)
    assert describe(discover(source, text, index)) == describe(fresh)


# -- property 2: truncation at a line boundary ---------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(source=st.sampled_from(SOURCES), cut=st.integers(0, 10**6))
def test_truncation_keeps_complete_statements(source: Source, cut: int) -> None:
    lines = source.text.splitlines(keepends=True)
    cut %= len(lines) + 1
    expected = Counter(key(e) for e in analyze(source).entries if e.body.end_line < cut)
    got = keys(discover(source, "".join(lines[:cut])))
    assert not missing(expected, got), f"cut after line {cut}"


# -- property 3: a quote-free mutation of one statement ------------------------------------------------


@settings(max_examples=500, deadline=None)
@given(source=st.sampled_from(SOURCES), which=st.integers(0, 10**6), edits=ops(SAFE_PIECES, truncate=False))
# Found by this test. ``which`` indexes the definitions that nothing else depends on.
# A decorator line that took in its own def line (``@def attention(...)``) absorbed the next def:
@example(source=SOURCE["attention.py"], which=0, edits=[("delete", 1, 8)])
# ... and so did one whose bracket stays open across its def (``@(eqx.filter_jit`` / ``(def ...``):
@example(source=SOURCE["<modules>"], which=5, edits=[("insert", 1, ["("]), ("insert", 17, ["("])])
# ... and so does one that took in a whole one-line def (``@jax.vmapdef pairwise(...): return ...``):
@example(source=SOURCE["<plain_jax>"], which=3, edits=[("delete", 9, 1), ("delete", 63, 1)])
# A header indented by one space, or starting with ``else:``, merges into the statement above:
@example(source=SOURCE["attention.py"], which=2, edits=[("insert", 0, [" "])])
@example(source=SOURCE["attention.py"], which=1, edits=[("insert", 0, ["else:"])])
# ... and so does one indented to the depth of the body above it (a tab typed before ``def``):
@example(source=SOURCE["attention.py"], which=2, edits=[("insert", 0, ["    "])])
def test_mutation_of_one_statement_keeps_the_others(source: Source, which: int, edits: list[Op]) -> None:
    analysis = analyze(source)
    assume(analysis.independent)
    target = analysis.independent[which % len(analysis.independent)]
    stmt = analysis.stmts[target]
    lines = source.text.split("\n")
    begin = sum(len(line) + 1 for line in lines[: stmt.start])
    end = sum(len(line) + 1 for line in lines[: stmt.end]) + len(lines[stmt.end])  # before its newline
    region = source.text[begin:end]
    mutated = apply(region, edits, keep=PROTECTED)
    # No quote character comes or goes; a deletion must not merge quotes into new delimiters either.
    assume(re.findall(r"[\"']+", mutated) == re.findall(r"[\"']+", region))
    # Nor may it rebind at column 0 a module-level name that the other statements use.
    assume(not any(m in analysis.bound for m in re.findall(r"(?m)^[A-Za-z_]\w*", mutated)))
    shift = mutated.count("\n") - region.count("\n")
    expected: Counter[Key] = Counter()
    for e, owner in zip(analysis.entries, analysis.owner, strict=True):
        if owner != target:
            name, kind, line = key(e)
            expected[(name, kind, line + shift if line > stmt.end else line)] += 1
    got = keys(discover(source, source.text[:begin] + mutated + source.text[end:]))
    assert not missing(expected, got), f"mutated lines {stmt.start + 1}-{stmt.end + 1} into {mutated!r}"


# -- property 4: a half-typed line after a top-level statement -----------------------------------------

HALF_TYPED = [
    "x = foo(",
    "def broken(",
    "class Broken(nn.Module",
    "y = [1, 2,",
    "table = {",
    "result = jnp.dot(a, b",
    "from typing import (",
]


@settings(max_examples=200, deadline=None)
@given(source=st.sampled_from(SOURCES), which=st.integers(0, 10**6), half=st.sampled_from(HALF_TYPED))
# Found by this test: a half-typed line above ``import`` lines swallowed them (recovery was only
# at ``def``/``class``/``@``), and with them every entrypoint that used the imported names.
@example(source=SOURCE["attention.py"], which=0, half="x = foo(")
@example(source=SOURCE["linen_mlp.py"], which=1, half="from typing import (")
def test_half_typed_line_keeps_every_entrypoint(source: Source, which: int, half: str) -> None:
    analysis = analyze(source)
    after = analysis.stmts[which % len(analysis.stmts)].end  # insert as line after + 1
    lines = source.text.split("\n")
    text = "\n".join([*lines[: after + 1], half, *lines[after + 1 :]])
    expected = Counter((n, k, line + 1 if line > after else line) for n, k, line in map(key, analysis.entries))
    got = keys(discover(source, text))
    assert not missing(expected, got), f"{half!r} inserted after line {after + 1}"


# -- the incremental cache ---------------------------------------------------------------------------

_HEADER = """\
from functools import partial

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import nnx

"""

_BLOCK = '''

class Dense{i}(nn.Module):
    """Block {i}."""

    features: int = {i}

    @nn.compact
    def __call__(self, x):
        x = nn.Dense(self.features)(x)
        return nn.relu(x)


@partial(jax.jit, static_argnums=0)
def forward_{i}(n, x):
    y = jnp.tanh(x)
    y = y * 2.0
    return y + n


class Conv{i}(nnx.Module):
    def __init__(self, *, rngs: nnx.Rngs):
        self.conv = nnx.Conv(1, {i}, kernel_size=(3, 3), rngs=rngs)

    def __call__(self, x):
        return self.conv(x)


def helper_{i}(values):
    return sorted(values)[: {i}]


class Mlp{i}(eqx.Module):
    weight: jax.Array
'''


def test_one_line_edit_resummarizes_only_its_statement() -> None:
    text = _HEADER + "".join(_BLOCK.format(i=i) for i in range(160))
    assert text.count("\n") >= 5_000
    path = EXAMPLES / "_robustness_big.py"
    index = WorkspaceIndex([EXAMPLES])
    classifier = Classifier(index)
    index.set_text(path, text)
    before = classifier.discover(path)
    assert len(before.entrypoints) == 4 * 160
    assert not any(e.name.startswith("helper_") for e in before.entrypoints)

    # Change one line inside one function: one statement is summarized again, nothing moves.
    edited = text.replace(
        "def forward_77(n, x):\n    y = jnp.tanh(x)\n    y = y * 2.0",
        "def forward_77(n, x):\n    y = jnp.tanh(x)\n    y = y * 3.0",
    )
    assert edited != text
    misses = index.cache.misses
    index.set_text(path, edited)
    after = classifier.discover(path)
    assert 1 <= index.cache.misses - misses <= 2
    assert keys(after) == keys(before)
    assert describe(after) == describe(discover(Source("big", path, ""), edited))

    # Insert a line inside another function: everything below moves down by one line.
    marker = "def forward_30(n, x):\n"
    inserted = edited.replace(marker, marker + "    n = n + 1\n")
    header = inserted[: inserted.index(marker)].count("\n")
    misses = index.cache.misses
    index.set_text(path, inserted)
    shifted = classifier.discover(path)
    assert 1 <= index.cache.misses - misses <= 2
    expected = Counter((n, k, line + 1 if line > header else line) for n, k, line in keys(before).elements())
    assert keys(shifted) == expected
    assert describe(shifted) == describe(discover(Source("big", path, ""), inserted))
