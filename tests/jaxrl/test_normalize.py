"""RunningStats (Welford / Chan et al.) against numpy's mean and population variance.

The reference is always numpy in float64 on exactly the samples that should count (mask true),
so masking, merging and combining are each checked by a number, not by "it ran".
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl import normalize
from jaxrl.normalize import RunningStats


@jax.jit
def _scan_updates(stats: RunningStats, xs: jax.Array, masks: jax.Array) -> RunningStats:
    """Apply `update` once per leading index of (xs, masks); compiled once per shape."""

    def body(s: RunningStats, xm: tuple[jax.Array, jax.Array]) -> tuple[RunningStats, None]:
        return normalize.update(s, *xm), None

    return jax.lax.scan(body, stats, (xs, masks))[0]


# Jitted once at import: each eager jnp op would otherwise compile a kernel of its own.
_update = jax.jit(normalize.update)
_merge = jax.jit(normalize.merge, static_argnames="axis")
_combine = jax.jit(normalize.combine)
_normalize = jax.jit(normalize.normalize, static_argnames="clip")
_var = jax.jit(lambda s: s.var)


def _np_stats(x: np.ndarray) -> RunningStats:
    """(count, mean, m2) of samples stacked on axis 0, by numpy in float64."""
    x = np.asarray(x, np.float64)
    if len(x) == 0:
        return RunningStats(np.float32(0), np.zeros(x.shape[1:]), np.zeros(x.shape[1:]))
    mean = x.mean(0)
    return RunningStats(np.float32(len(x)), mean, ((x - mean) ** 2).sum(0))


def _assert_matches(stats: RunningStats, samples: np.ndarray, rtol: float = 1e-5) -> None:
    """Count, mean, m2 and var equal numpy's on `samples` (population variance, ddof=0)."""
    samples = np.asarray(samples, np.float64)
    assert float(stats.count) == len(samples)
    np.testing.assert_allclose(stats.mean, samples.mean(0), rtol=rtol, atol=1e-6)
    np.testing.assert_allclose(stats.m2, ((samples - samples.mean(0)) ** 2).sum(0), rtol=rtol)
    np.testing.assert_allclose(_var(stats), samples.var(0), rtol=rtol)


def _data(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Samples with different means and scales per dimension."""
    rng = np.random.default_rng(seed)
    d = shape[-1]
    return (rng.normal(size=shape) * np.linspace(0.5, 3.0, d) + np.arange(d) - 1).astype(np.float32)


def test_var_is_one_before_two_samples() -> None:
    """Fresh and one-sample stats report var 1 (a no-op scale); two samples give the
    population variance ((a - b) / 2)**2."""
    stats = normalize.init((3,))
    np.testing.assert_array_equal(_var(stats), np.ones(3))
    a, b = np.array([1.0, -2.0, 5.0], np.float32), np.array([3.0, -2.0, 4.0], np.float32)
    one = _update(stats, jnp.asarray(a), jnp.asarray(True))
    np.testing.assert_array_equal(one.mean, a)
    np.testing.assert_array_equal(_var(one), np.ones(3))
    two = _update(one, jnp.asarray(b), jnp.asarray(True))
    np.testing.assert_allclose(_var(two), ((a - b) / 2) ** 2, rtol=1e-6)
    np.testing.assert_allclose(two.mean, (a + b) / 2, rtol=1e-6)


def test_update_with_mask_matches_numpy() -> None:
    """A single stream of 60 samples, about 40% masked out: only the kept ones count."""
    x = _data((60, 4), seed=0)
    mask = np.random.default_rng(1).random(60) < 0.6
    stats = _scan_updates(normalize.init((4,)), jnp.asarray(x), jnp.asarray(mask))
    _assert_matches(stats, x[mask])
    # An update with mask False changes nothing at all.
    same = _update(stats, jnp.full((4,), 1e6), jnp.asarray(False))
    jax.tree.map(np.testing.assert_array_equal, same, stats)


def test_batched_update_per_env_and_merged() -> None:
    """One sample per env per step, as rollouts feed it: per-env stats (including an env with
    no kept sample and one with a single one, both var 1) and their merge match numpy."""
    steps, n, d = 30, 4, 3
    x = _data((steps, n, d), seed=2)
    mask = np.random.default_rng(3).random((steps, n)) < 0.5
    mask[:, 2] = False  # env 2 never counts
    mask[:, 3] = False
    mask[7, 3] = True  # env 3 counts exactly once
    # The first update broadcasts scalar `init` stats to per-env ones, as the docstring says.
    stats = _update(normalize.init((d,)), jnp.asarray(x[0]), jnp.asarray(mask[0]))
    assert stats.count.shape == (n,) and stats.mean.shape == (n, d)
    stats = _scan_updates(stats, jnp.asarray(x[1:]), jnp.asarray(mask[1:]))
    for e in range(2):
        _assert_matches(jax.tree.map(lambda a, e=e: a[e], stats), x[mask[:, e], e])
    np.testing.assert_array_equal(stats.count[2:], [0, 1])
    np.testing.assert_array_equal(_var(stats)[2:], np.ones((2, d)))
    np.testing.assert_array_equal(stats.mean[3], x[7, 3])
    _assert_matches(_merge(stats), x[mask])


def test_merge_partials_equals_concatenation() -> None:
    """Chan's merge of uneven partials (sizes 5, 0, 1, 17) equals numpy on all samples; an
    empty partial contributes nothing even if its mean holds junk."""
    x = _data((23, 2), seed=4)
    chunks = np.split(x, [5, 5, 6])
    parts = [_np_stats(c) for c in chunks]
    parts[1] = RunningStats(np.float32(0), np.full(2, 123.0), np.zeros(2))
    stacked = RunningStats(
        *(jnp.asarray(np.stack(field), jnp.float32) for field in zip(*parts, strict=True))
    )
    _assert_matches(_merge(stacked), x)


def test_merge_over_several_axes() -> None:
    """Partials laid out [seed, env] merge over both axes at once."""
    x = _data((2, 3, 8, 2), seed=5)  # [seed, env, sample, dim]
    parts = [_np_stats(x[s, e]) for s in range(2) for e in range(3)]
    stacked = jax.tree.map(
        lambda *leaves: jnp.asarray(np.stack(leaves).reshape(2, 3, *leaves[0].shape), jnp.float32),
        *parts,
    )
    _assert_matches(_merge(stacked, axis=(0, 1)), x.reshape(-1, 2))


def test_combine() -> None:
    """`combine(a, b)` is the stats of both sample sets; fresh stats are its identity."""
    x, y = _data((9, 3), seed=6), _data((4, 3), seed=7) * 5 + 2
    a = _scan_updates(normalize.init((3,)), jnp.asarray(x), jnp.ones(9, bool))
    b = _scan_updates(normalize.init((3,)), jnp.asarray(y), jnp.ones(4, bool))
    _assert_matches(_combine(a, b), np.concatenate([x, y]))
    same = _combine(normalize.init((3,)), a)
    jax.tree.map(lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-6), same, a)


def test_large_offset_keeps_precision() -> None:
    """Observations far from zero (mean 1e4, std 1): float32 Welford keeps the variance to
    ~0.1%, where a float32 sum-of-squares formula would lose it entirely (1e8 - 1e8)."""
    x = (1e4 + np.random.default_rng(8).normal(size=(2000, 1))).astype(np.float32)
    stats = _scan_updates(normalize.init((1,)), jnp.asarray(x), jnp.ones(2000, bool))
    np.testing.assert_allclose(stats.mean, x.astype(np.float64).mean(0), rtol=1e-6)
    np.testing.assert_allclose(_var(stats), x.astype(np.float64).var(0), rtol=1e-3)


def test_normalize_scales_and_clips() -> None:
    """(x - mean) / sqrt(var + eps), clipped to ±clip; fresh stats leave x as it is."""
    stats = RunningStats(
        jnp.asarray(10.0), jnp.asarray([1.0, -2.0]), jnp.asarray([4.0, 0.25]) * 10.0
    )  # var [4, 0.25]
    out = _normalize(stats, jnp.asarray([3.0, -1.0]), clip=5.0)
    np.testing.assert_allclose(out, [1.0, 2.0], rtol=1e-6)
    out = _normalize(stats, jnp.asarray([101.0, -102.0]), clip=5.0)
    np.testing.assert_array_equal(out, [5.0, -5.0])
    out = _normalize(normalize.init((2,)), jnp.asarray([0.5, -7.0]), clip=5.0)
    np.testing.assert_allclose(out, [0.5, -5.0], rtol=1e-6)


def test_normalize_with_per_env_stats() -> None:
    """Per-env stats normalise each env's observation with its own mean and variance."""
    stats = RunningStats(
        jnp.asarray([2.0, 3.0, 1.0]),
        jnp.asarray([[0.0, 1.0], [2.0, 2.0], [5.0, 5.0]]),
        jnp.asarray([[2.0, 8.0], [3.0, 12.0], [0.0, 0.0]]),  # var [1, 4], [1, 4], (1: one sample)
    )
    x = jnp.asarray([[1.0, 3.0], [3.0, 0.0], [6.0, 5.0]])
    out = _normalize(stats, x, clip=10.0)
    np.testing.assert_allclose(out, [[1.0, 1.0], [1.0, -1.0], [1.0, 0.0]], rtol=1e-6)
