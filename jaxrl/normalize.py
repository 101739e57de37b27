"""Running mean/variance (Welford / Chan et al.) as a pytree, for observation and return scaling.

Statistics are kept as (count, mean, m2) with m2 the sum of squared deviations, so partial
statistics from many envs, members or devices merge exactly and without the cancellation of
sum-of-squares formulas.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxrl.datatypes import Array


class RunningStats(NamedTuple):
    count: Array  # float32 scalar (or batch of them while accumulating per env)
    mean: Array
    m2: Array

    @property
    def var(self) -> Array:
        """Population variance; 1 until two samples are seen, so normalising is a no-op at start."""
        # Batched stats (count[B], m2[B, ...]): align count with m2's leading axes.
        count = self.count.reshape(self.count.shape + (1,) * (self.m2.ndim - self.count.ndim))
        return jnp.where(count > 1, self.m2 / jnp.maximum(count, 1.0), 1.0)


def init(shape: tuple[int, ...]) -> RunningStats:
    return RunningStats(
        jnp.zeros((), jnp.float32), jnp.zeros(shape, jnp.float32), jnp.zeros(shape, jnp.float32)
    )


def update(stats: RunningStats, x: Array, mask: Array) -> RunningStats:
    """Welford step for one sample per leading-batch element; `mask` (bool, batch shape) says which
    samples count. Works element-wise on batched stats as produced by `init` + broadcasting."""
    m = mask.astype(jnp.float32)
    count = stats.count + m
    mexp = m.reshape(m.shape + (1,) * (x.ndim - m.ndim))
    cexp = count.reshape(count.shape + (1,) * (x.ndim - count.ndim))
    delta = x - stats.mean
    mean = stats.mean + mexp * delta / jnp.maximum(cexp, 1.0)
    m2 = stats.m2 + mexp * delta * (x - mean)
    return RunningStats(count, mean, m2)


def merge(stats: RunningStats, axis: int | tuple[int, ...] = 0) -> RunningStats:
    """Merge partial statistics stacked along `axis` (of the count's shape) into one."""
    count = stats.count.sum(axis)
    c = stats.count
    cexp = c.reshape(c.shape + (1,) * (stats.mean.ndim - c.ndim))
    safe = jnp.maximum(count, 1.0)
    mean = (cexp * stats.mean).sum(axis) / safe
    m2 = (stats.m2 + cexp * (stats.mean - jnp.expand_dims(mean, axis)) ** 2).sum(axis)
    return RunningStats(count, mean, m2)


def combine(a: RunningStats, b: RunningStats) -> RunningStats:
    """Two statistics of the same shape into one."""
    return merge(jax.tree.map(lambda u, v: jnp.stack([u, v]), a, b))


def normalize(stats: RunningStats, x: Array, clip: float, eps: float = 1e-8) -> Array:
    return jnp.clip((x - stats.mean) / jnp.sqrt(stats.var + eps), -clip, clip)
