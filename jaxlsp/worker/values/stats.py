"""Statistics of one value on its device: counts, moments, range and a 32-bin histogram.

On the CPU an array already is host memory: ``numpy.asarray`` of a CPU jax array is a view (no
copy), so the figures come from numpy's reductions over it; a jitted reduction would first
compile once per shape (a second or more per shape on a loaded machine), more than the whole
run. On an accelerator the same figures come from jax operations on the device, and only the
scalars and the 32 bin counts are fetched: a whole array never travels to the host.

Every figure is over the *finite* elements (NaN and infinities are counted apart); complex values
are summarised by their magnitude, booleans as 0 and 1. Keys and other non-numeric values have
no statistics (:func:`summarize` returns None). Above :data:`HISTOGRAM_SAMPLE` finite elements
the histogram counts a systematic sample of them (marked ``sampled``); every other figure is
always over all of them.

A loop body's value is seen once per iteration: :class:`Accumulator` merges the observations,
the moments exactly (Chan's pairwise formula) and the histogram over the range of all of them:
each iteration is binned over the range seen so far (widened to hold it), and when the range
widens the counts so far are re-binned in proportion (the histogram is then ``approximate``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias, cast

from jaxlsp.worker.protocol import Json

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from jax.typing import ArrayLike

#: A host array of any element type (the values' views and samples, work buffers).
Host: TypeAlias = "npt.NDArray[np.generic]"
#: A host array of floats: what :func:`_converted` makes of one, which the figures reduce.
Floats: TypeAlias = "npt.NDArray[np.floating]"

BINS = 32
# Binning is most of the cost of the statistics: above this many finite elements the histogram
# counts every k-th element (k odd, so that it walks through power-of-two rows).
HISTOGRAM_SAMPLE = 1 << 14
CHUNK = 1 << 16  # elements reduced at a time: the work buffers never outgrow this
# Values of at most this many elements are summarised in batches: one set of numpy calls for many
# of them (``summarize_batch``), where each call's fixed cost would otherwise exceed the arithmetic.
SMALL = 4096


@dataclass
class Summary:
    """One observation's raw figures (``lo``/``hi`` and the moments over the finite elements)."""

    size: int
    finite: int
    nan: int
    posinf: int
    neginf: int
    zeros: int
    lo: float | None
    hi: float | None
    total: float  # sum over the finite elements
    abs_total: float  # sum of |x| over them
    m2: float  # sum of squared deviations from this observation's mean
    hist: list[int] | None = None  # counts over [hist_lo, hist_hi]
    hist_lo: float = 0.0
    hist_hi: float = 0.0
    sampled: bool = False  # the histogram counts a sample of the finite elements

    @property
    def nonfinite(self) -> int:
        return self.nan + self.posinf + self.neginf

    @property
    def mean(self) -> float | None:
        return self.total / self.finite if self.finite else None

    def kind(self) -> str:
        """What the non-finite elements are: ``nan``, ``inf``, ``-inf`` or ``inf/-inf``."""
        if self.nan:
            return "nan"
        if self.posinf and self.neginf:
            return "inf/-inf"
        return "inf" if self.posinf else "-inf"

    def repeated(self, k: int) -> Summary:
        """The figures of an array holding each element of this one ``k`` times (a broadcast)."""
        scale = 1 if self.sampled else k
        return Summary(
            self.size * k,
            self.finite * k,
            self.nan * k,
            self.posinf * k,
            self.neginf * k,
            self.zeros * k,
            self.lo,
            self.hi,
            self.total * k,
            self.abs_total * k,
            self.m2 * k,
            None if self.hist is None else [c * scale for c in self.hist],
            self.hist_lo,
            self.hist_hi,
            self.sampled,
        )


_NUMERIC: dict[object, bool] = {}


def numeric(dtype: object) -> bool:
    """Whether values of ``dtype`` have statistics (numbers and booleans; not keys, not float0)."""
    try:
        return _NUMERIC[dtype]
    except (KeyError, TypeError):
        pass
    import jax.numpy as jnp
    import numpy as np

    try:
        # a value's ``dtype`` as it is: a TypeError below for what is none
        given = cast("np.dtype[np.generic]", dtype)
        answer = bool(jnp.issubdtype(given, jnp.number)) or np.dtype(given) == np.bool_
    except TypeError:
        answer = False
    with contextlib.suppress(TypeError):  # an unhashable dtype is answered again next time
        _NUMERIC[dtype] = answer
    return answer


def hist_range(lo: float, hi: float) -> tuple[float, float]:
    """The histogram's range for finite elements in [lo, hi]: numpy's rule for a single value
    (half a unit each side), widened for large magnitudes where half a unit rounds away."""
    if lo == hi:
        pad = 0.5 if abs(lo) < 2.0**20 else abs(lo) * 2.0**-20
        return lo - pad, hi + pad
    return lo, hi


def summarize(x: object, *, on_host: bool, within: tuple[float, float] | None = None) -> Summary | None:
    """The figures of array ``x``; the histogram over its own finite range, or over that range
    joined with ``within`` (a loop's range so far)."""
    if not numeric(getattr(x, "dtype", None)):
        return None
    if on_host:
        return _host(x, within)
    if _nbytes(x) <= FETCH_BYTES:
        return _host(fetched([x])[0], within)
    return _device(x, within)


#: An accelerator's array up to this size is copied to the host and summarised there, as the
#: CPU's are: one transfer instead of a dozen small programs compiled for its shape on the device
#: and a fetch for every figure (a TPU values run of benchmarks/models' transformer spent 57 of its
#: 65 s there, 465 compiles and 41,851 fetches). Larger ones are summarised on the device.
FETCH_BYTES = 64 * 1024 * 1024


def _nbytes(x: object) -> int:
    size = getattr(x, "nbytes", None)
    return size if isinstance(size, int) else FETCH_BYTES + 1


def fetched(arrays: list[object]) -> list[object]:
    """Host copies of device arrays, fetched in one call (each transfer waits for the device)."""
    import jax

    return list(jax.device_get(arrays))


def joined_range(lo: float, hi: float, within: tuple[float, float] | None) -> tuple[float, float]:
    """The histogram range for elements in [lo, hi], joined with a loop's range so far."""
    if within is None:
        return hist_range(lo, hi)
    wlo, whi = within
    # The range so far is the elements' own (unpadded): one point when every iteration held the
    # same value, which gets hist_range's padding as a single array would, never a zero width.
    if wlo <= lo and hi <= whi and wlo < whi:
        return wlo, whi
    return hist_range(min(lo, wlo), max(hi, whi))


# --- host (numpy over a view of the CPU array) ------------------------------------------------


class _Scratch:
    """One reusable work buffer per dtype: a fresh temporary for every value cost page faults
    and, for the largest values, as much memory again as the value itself."""

    def __init__(self) -> None:
        self.buffers: dict[npt.DTypeLike, Host] = {}

    def get(self, n: int, dtype: npt.DTypeLike) -> Host:
        import numpy as np

        buffer = self.buffers.get(dtype)
        if buffer is None or buffer.size < n:
            buffer = self.buffers[dtype] = np.empty(max(n, 1024), dtype)
        return buffer[:n]

    def clear(self) -> None:
        self.buffers.clear()


SCRATCH = _Scratch()


def _host_flat(x: object) -> Host:
    import numpy as np

    return np.asarray(x).reshape(-1)


def _converted(a: Host) -> Floats:
    """Elements numpy reduces well: magnitudes of complex numbers, float64 for integers, float32
    for booleans and narrow floats (float16, bfloat16, float8: numpy's "V" kinds)."""
    import numpy as np

    kind = a.dtype.kind
    if kind == "c":
        return np.abs(a)
    if kind != "f" or a.dtype.itemsize < 4:
        return a.astype(np.float64 if kind in "iu" else np.float32)
    return cast("Floats", a)  # kind "f": a float array


def _sum(a: Floats) -> float:
    """Pairwise sum in the array's dtype; again in float64 when that overflowed."""
    import numpy as np

    with np.errstate(over="ignore"):  # an overflow is expected here, and answered below
        total = float(a.sum())
    if not math.isfinite(total):
        total = float(a.sum(dtype=np.float64))
    return total


def _host(x: object, within: tuple[float, float] | None) -> Summary:
    """A host array's figures, a chunk of CHUNK elements at a time (the work buffers stay small
    whatever the array's size), then the histogram of a sample of its finite elements."""
    import numpy as np

    flat = _host_flat(x)
    n = int(flat.size)
    if n == 1:
        return _one(float(_converted(flat)[0]), within)
    if n == 0:
        return Summary(0, 0, 0, 0, 0, 0, None, None, 0.0, 0.0, 0.0)
    parts = [_chunk(_converted(flat[i : i + CHUNK])) for i in range(0, n, CHUNK)]
    s = parts[0] if len(parts) == 1 else _merge(parts)
    if s.finite == 0:
        return s
    sample, sampled = _sample(flat)
    sample = _converted(sample)
    if s.nonfinite:
        sample = sample[np.isfinite(sample)]
    s.hist_lo, s.hist_hi = joined_range(s.lo, s.hi, within)  # type: ignore[arg-type]
    s.hist = _host_hist(sample, s.hist_lo, s.hist_hi)
    s.sampled = sampled
    return s


def _chunk(flat: Floats) -> Summary:
    """The figures of one chunk, without a histogram."""
    import numpy as np

    n = int(flat.size)
    mask = SCRATCH.get(n, np.bool_)
    zeros = int(np.count_nonzero(np.equal(flat, 0, out=mask)))
    # A sum that overflows (a mask of finfo.min) or meets +Inf and -Inf is expected, and redone
    # below in float64 over the finite elements: numpy need not warn on the worker's stderr.
    with np.errstate(over="ignore", invalid="ignore"):
        total = float(flat.sum())
    nan = posinf = neginf = 0
    f = flat
    if not math.isfinite(total):  # a finite sum means every element is finite: no isfinite pass
        fin = np.isfinite(flat, out=mask)
        finite = int(np.count_nonzero(fin))
        if finite < n:
            nan = int(np.count_nonzero(np.isnan(flat)))
            posinf = int(np.count_nonzero(flat == np.inf))
            neginf = n - finite - nan - posinf
            f = flat[fin]
        total = float(f.sum(dtype=np.float64))
    finite = n - nan - posinf - neginf
    if finite == 0:
        return Summary(n, 0, nan, posinf, neginf, zeros, None, None, 0.0, 0.0, 0.0)
    lo, hi = float(f.min()), float(f.max())
    tmp = cast("Floats", SCRATCH.get(f.size, f.dtype))  # a buffer of f's own dtype
    abs_total = _sum(np.abs(f, out=tmp))
    m2 = _m2(f, total / finite, tmp)
    return Summary(n, finite, nan, posinf, neginf, zeros, lo, hi, total, abs_total, m2)


def _merge(parts: list[Summary]) -> Summary:
    """One summary of consecutive chunks (moments by Chan's formula)."""
    out = Summary(0, 0, 0, 0, 0, 0, None, None, 0.0, 0.0, 0.0)
    mean = 0.0
    for p in parts:
        out.size += p.size
        out.nan += p.nan
        out.posinf += p.posinf
        out.neginf += p.neginf
        out.zeros += p.zeros
        if not p.finite or p.lo is None or p.hi is None:
            continue
        out.lo = p.lo if out.lo is None else min(out.lo, p.lo)
        out.hi = p.hi if out.hi is None else max(out.hi, p.hi)
        count = out.finite + p.finite
        delta = p.total / p.finite - mean
        mean += delta * p.finite / count
        out.m2 += p.m2 + delta * delta * out.finite * p.finite / count
        out.finite = count
        out.total += p.total
        out.abs_total += p.abs_total
    return out


def _one(v: float, within: tuple[float, float] | None) -> Summary:
    """A single element, without numpy's per-call costs (a fifth of a model's values are scalars)."""
    if math.isnan(v) or math.isinf(v):
        nan, pos = int(math.isnan(v)), int(v == math.inf)
        return Summary(1, 0, nan, pos, 1 - nan - pos, 0, None, None, 0.0, 0.0, 0.0)
    hlo, hhi = joined_range(v, v, within)
    hist = [0] * BINS
    hist[min(max(int((v - hlo) / (hhi - hlo) * BINS), 0), BINS - 1)] = 1
    return Summary(1, 1, 0, 0, 0, int(v == 0), v, v, v, abs(v), 0.0, hist, hlo, hhi)


def _m2(f: Floats, mean: float, tmp: Floats) -> float:
    """The sum of squared deviations from ``mean``: ``sum(x*x) - n*mean^2`` in one pass when that
    is well conditioned, else the two-pass sum (in float64 when the squares overflow).

    ``einsum``, not ``dot``: BLAS wakes its thread pool for each call, which cost a millisecond per
    value between the other reductions (ten times the arithmetic)."""
    import numpy as np

    n = f.size
    squares = float(np.einsum("i,i->", f, f))
    if math.isfinite(squares):
        m2: float = squares - n * mean * mean
        if m2 > 1e-3 * squares:  # little cancellation: the one-pass figure is accurate
            return m2
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is redone in float64 below
        np.subtract(f, mean, out=tmp)
        m2 = float(np.einsum("i,i->", tmp, tmp))
    if not math.isfinite(m2):
        d = f.astype(np.float64) - mean
        m2 = float(np.einsum("i,i->", d, d))
    return max(m2, 0.0)


def _sample(f: Host) -> tuple[Host, bool]:
    """``f``, or a systematic sample of HISTOGRAM_SAMPLE of its elements (an odd stride)."""
    n = f.size
    if n <= HISTOGRAM_SAMPLE:
        return f, False
    stride = -(-n // HISTOGRAM_SAMPLE) | 1
    return f[::stride], True


def _host_hist(f: Floats, lo: float, hi: float, tmp: Floats | None = None) -> list[int]:
    """Counts of the finite elements ``f`` in 32 equal bins over [lo, hi] (a histogram range),
    computed as ``numpy.histogram`` does (in the array's precision; the last bin is closed)."""
    import numpy as np

    if f.dtype == np.float32 and max(abs(lo), abs(hi)) > 1e37:  # the differences would overflow
        f, tmp = f.astype(np.float64), None
    if tmp is None or tmp.size != f.size or tmp.dtype != f.dtype:
        tmp = np.empty_like(f)
    np.subtract(f, lo, out=tmp)
    np.divide(tmp, hi - lo, out=tmp)
    np.multiply(tmp, BINS, out=tmp)
    np.clip(tmp, 0, BINS - 1, out=tmp)
    index = tmp.astype(np.uint8)
    counts: list[int] = np.bincount(index, minlength=BINS)[:BINS].tolist()
    return counts


def summarize_batch(
    arrays: list[object], within: Callable[[int, float, float], tuple[float, float]]
) -> list[Summary | None]:
    """:func:`summarize` (on the host) of many small arrays with one set of numpy calls: the
    arrays joined in float64, every figure a ``reduceat`` over their segments, every histogram
    one ``bincount``. ``within(i, lo, hi)`` gives array ``i``'s histogram range from its own range;
    it is called in order, so a loop's range can grow from one iteration to the next. Arrays with
    non-finite or no elements are summarised one by one."""
    import numpy as np

    out: list[Summary | None] = [None] * len(arrays)
    flats: list[Floats] = []
    index: list[int] = []
    for i, x in enumerate(arrays):
        if not numeric(getattr(x, "dtype", None)):
            continue
        flat = _converted(_host_flat(x))
        if flat.size == 0:
            out[i] = Summary(0, 0, 0, 0, 0, 0, None, None, 0.0, 0.0, 0.0)
            continue
        flats.append(flat)
        index.append(i)
    if not flats:
        return out
    sizes = np.fromiter((f.size for f in flats), np.intp, len(flats))
    starts = np.zeros(len(flats), np.intp)
    np.cumsum(sizes[:-1], out=starts[1:])
    joined = np.concatenate(flats, dtype=np.float64)
    sums = np.add.reduceat(joined, starts)
    finite = np.isfinite(sums)
    if not finite.all():  # non-finite elements somewhere: those arrays one by one, in order
        keep = [k for k in range(len(flats)) if finite[k]]
        for k in range(len(flats)):
            if not finite[k]:
                i = index[k]
                out[i] = _host(arrays[i], None)
        if not keep:
            return out
        flats = [flats[k] for k in keep]
        index = [index[k] for k in keep]
        sizes = sizes[keep]
        starts = np.zeros(len(flats), np.intp)
        np.cumsum(sizes[:-1], out=starts[1:])
        joined = np.concatenate(flats, dtype=np.float64)
        sums = np.add.reduceat(joined, starts)
    lows = np.minimum.reduceat(joined, starts)
    highs = np.maximum.reduceat(joined, starts)
    zeros = np.add.reduceat(joined == 0, starts)
    absolute = np.abs(joined)
    abs_sums = np.add.reduceat(absolute, starts)
    means = sums / sizes
    deviation = np.subtract(joined, np.repeat(means, sizes), out=absolute)
    m2s = np.add.reduceat(np.square(deviation, out=deviation), starts)
    ranges = []
    for k, i in enumerate(index):
        lo, hi = float(lows[k]), float(highs[k])
        ranges.append(within(i, lo, hi))
    hlo = np.fromiter((r[0] for r in ranges), np.float64, len(ranges))
    hhi = np.fromiter((r[1] for r in ranges), np.float64, len(ranges))
    scaled = np.subtract(joined, np.repeat(hlo, sizes), out=deviation)
    np.multiply(scaled, np.repeat(BINS / (hhi - hlo), sizes), out=scaled)
    np.clip(scaled, 0, BINS - 1, out=scaled)
    bins = scaled.astype(np.intp)
    bins += np.repeat(np.arange(len(index), dtype=np.intp) * BINS, sizes)
    counts = np.bincount(bins, minlength=BINS * len(index)).reshape(len(index), BINS).tolist()
    for k, i in enumerate(index):
        n = int(sizes[k])
        out[i] = Summary(
            n,
            n,
            0,
            0,
            0,
            int(zeros[k]),
            float(lows[k]),
            float(highs[k]),
            float(sums[k]),
            float(abs_sums[k]),
            max(float(m2s[k]), 0.0),
            counts[k],
            ranges[k][0],
            ranges[k][1],
        )
    return out


# --- device (jax operations; only scalars and the bin counts are fetched) --------------------


def _device(x: object, within: tuple[float, float] | None) -> Summary:
    import jax
    import jax.numpy as jnp

    flat = jnp.ravel(cast("ArrayLike", x))  # a numeric device array (summarize checked its dtype)
    if jnp.iscomplexobj(flat):
        flat = jnp.abs(flat)
    elif not jnp.issubdtype(flat.dtype, jnp.floating) or flat.dtype.itemsize < 4:
        flat = flat.astype(jnp.float32)
    n = int(flat.size)
    if n == 0:
        return Summary(0, 0, 0, 0, 0, 0, None, None, 0.0, 0.0, 0.0)
    fin = jnp.isfinite(flat)
    f0 = jnp.where(fin, flat, 0)
    counts = jnp.stack([jnp.sum(fin), jnp.sum(jnp.isnan(flat)), jnp.sum(flat == jnp.inf), jnp.sum(flat == 0)])
    figures = jnp.stack(
        [
            jnp.min(jnp.where(fin, flat, jnp.inf)),
            jnp.max(jnp.where(fin, flat, -jnp.inf)),
            jnp.sum(f0),
            jnp.sum(jnp.abs(f0)),
        ]
    )
    (finite, nan, posinf, zeros), (lo, hi, total, abs_total) = jax.device_get((counts, figures))
    finite, nan, posinf, zeros = int(finite), int(nan), int(posinf), int(zeros)
    neginf = n - finite - nan - posinf
    if finite == 0:
        return Summary(n, 0, nan, posinf, neginf, zeros, None, None, 0.0, 0.0, 0.0)
    lo, hi, total = float(lo), float(hi), float(total)
    mean = total / finite
    m2 = float(jnp.sum(jnp.where(fin, jnp.square(flat - mean), 0)))
    hlo, hhi = joined_range(lo, hi, within)
    index = jnp.clip(jnp.floor((flat - hlo) / (hhi - hlo) * BINS).astype(jnp.int32), 0, BINS - 1)
    # one fetch for the whole histogram: int() of each count is a device round trip of its own
    hist = [int(c) for c in jax.device_get(jnp.bincount(jnp.where(fin, index, BINS), length=BINS + 1)[:BINS])]
    return Summary(n, finite, nan, posinf, neginf, zeros, lo, hi, total, float(abs_total), m2, hist, hlo, hhi)


# --- merging observations -----------------------------------------------------------------------


@dataclass
class Accumulator:
    """Every observation of one graph value; :meth:`stats` is its ``stats`` JSON object."""

    observations: int = 0
    size: int = 0
    finite: int = 0
    nan: int = 0
    posinf: int = 0
    neginf: int = 0
    zeros: int = 0
    lo: float | None = None
    hi: float | None = None
    total: float = 0.0
    abs_total: float = 0.0
    mean: float = 0.0  # running mean and M2 of the finite elements (Chan et al.)
    m2: float = 0.0
    first_nonfinite: list[int] | None = None
    in_loop: bool = False
    counts: list[float] | None = None  # the histogram over [hist_lo, hist_hi]
    hist_lo: float = 0.0
    hist_hi: float = 0.0
    approximate: bool = False  # counts were re-binned when the range widened
    sampled: bool = False

    @property
    def within(self) -> tuple[float, float] | None:
        """The finite elements' range so far: the next observation is binned over it, joined with
        its own (``joined_range``)."""
        return (self.lo, self.hi) if self.lo is not None and self.hi is not None else None

    def add(self, s: Summary, iteration: list[int] | None) -> None:
        self.observations += 1
        self.in_loop = self.in_loop or iteration is not None
        self.size += s.size
        self.nan += s.nan
        self.posinf += s.posinf
        self.neginf += s.neginf
        self.zeros += s.zeros
        self.sampled = self.sampled or s.sampled
        if s.nonfinite and self.first_nonfinite is None and iteration is not None:
            self.first_nonfinite = list(iteration)
        if not s.finite or s.lo is None or s.hi is None:
            return
        self.lo = s.lo if self.lo is None else min(self.lo, s.lo)
        self.hi = s.hi if self.hi is None else max(self.hi, s.hi)
        n = self.finite + s.finite
        delta = s.total / s.finite - self.mean
        self.mean += delta * s.finite / n
        self.m2 += s.m2 + delta * delta * self.finite * s.finite / n
        self.finite = n
        self.total += s.total
        self.abs_total += s.abs_total
        if s.hist is not None:
            self._bin(s.hist, s.hist_lo, s.hist_hi)

    def _bin(self, hist: list[int], lo: float, hi: float) -> None:
        """Add an observation's histogram over [lo, hi]; the counts are kept over the range of
        every element so far (``add`` updated it), earlier counts re-binned when it widened."""
        assert self.lo is not None and self.hi is not None
        target = hist_range(self.lo, self.hi)
        if self.counts is None:
            self.counts, self.hist_lo, self.hist_hi = [float(c) for c in hist], lo, hi
        else:
            if (self.hist_lo, self.hist_hi) != target:
                self.approximate = self.approximate or any(self.counts)
                self.counts = _rebin(self.counts, self.hist_lo, self.hist_hi, *target)
                self.hist_lo, self.hist_hi = target
            if (lo, hi) != target:
                self.approximate = self.approximate or any(hist)
                hist = _rebin(hist, lo, hi, *target)  # type: ignore[assignment]
            self.counts = [a + b for a, b in zip(self.counts, hist, strict=True)]
            return
        if (lo, hi) != target:  # a first observation binned over a wider range than its own
            self.approximate = self.approximate or any(self.counts)
            self.counts = _rebin(self.counts, lo, hi, *target)
            self.hist_lo, self.hist_hi = target

    def stats(self) -> dict[str, Json]:
        has = self.finite > 0 and self.lo is not None and self.hi is not None
        out: dict[str, Json] = {
            "count": self.size,
            "finite": self.finite,
            "nan": self.nan,
            "posInf": self.posinf,
            "negInf": self.neginf,
            "zeros": self.zeros / self.size if self.size else 0.0,
            "min": self.lo if has else None,
            "max": self.hi if has else None,
            "mean": self.mean if has else None,
            "std": math.sqrt(max(self.m2 / self.finite, 0.0)) if has else None,
            "meanAbs": self.abs_total / self.finite if has else None,
            "histogram": None,
        }
        if has and self.counts is not None:
            hist: dict[str, Json] = {"lo": self.hist_lo, "hi": self.hist_hi, "counts": _round(self.counts)}
            if self.approximate:
                hist["approximate"] = True
            if self.sampled:
                hist["sampled"] = True
            out["histogram"] = hist
        if self.in_loop:
            out["iterations"] = self.observations
            if self.first_nonfinite is not None:
                out["firstNonFiniteIteration"] = self.first_nonfinite
        return out


def _rebin(counts: list[float] | list[int], lo: float, hi: float, wlo: float, whi: float) -> list[float]:
    """``counts`` over [lo, hi] spread over 32 bins of [wlo, whi], each source bin's count in
    proportion to its overlap with each destination bin; what falls outside [wlo, whi] (a
    single value's padded range) goes to the nearest end bin, so the total stays."""
    out = [0.0] * BINS
    width = (whi - wlo) / BINS
    source = (hi - lo) / BINS
    for k, c in enumerate(counts):
        if not c:
            continue
        a, b = lo + k * source, lo + (k + 1) * source
        placed = 0.0
        if b > a and width > 0:
            first = min(max(int((a - wlo) / width), 0), BINS - 1)
            last = min(max(int((b - wlo) / width), 0), BINS - 1)
            for j in range(first, last + 1):
                left, right = max(a, wlo + j * width), min(b, wlo + (j + 1) * width)
                if right > left:
                    share = c * (right - left) / (b - a)
                    out[j] += share
                    placed += share
        rest = c - placed
        if rest > 1e-9:
            middle = (a + b) / 2
            out[min(max(int((middle - wlo) / width), 0), BINS - 1) if width > 0 else 0] += rest
    return out


def _round(counts: list[float]) -> list[int]:
    """Whole counts with the same total (largest remainders first)."""
    floors = [math.floor(c + 1e-9) for c in counts]
    missing = round(sum(counts)) - sum(floors)
    order = sorted(range(len(counts)), key=lambda i: counts[i] - floors[i], reverse=True)
    for i in order[: max(missing, 0)]:
        floors[i] += 1
    return floors
