"""Action distributions as small pytrees (distrax is not installed; these are all we need).

Each distribution works on one action (or a batch, by `vmap`) and keeps the *raw* sample apart
from the *env* action: a Gaussian's raw sample is clipped to the Box, a tanh-Gaussian's is
squashed and rescaled, and log-probabilities are always of the raw sample, so storing the raw
sample is enough to recompute them exactly under new parameters (no `atanh` of a clipped value).
`mode()` is raw too: the greedy env action is `env_action(mode())`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxrl.datatypes import Array, Key

LOG_2PI = math.log(2.0 * math.pi)


class Categorical(NamedTuple):
    """A choice among the last axis of `logits`."""

    logits: Array

    def sample(self, key: Key) -> Array:
        return jax.random.categorical(key, self.logits).astype(jnp.int32)

    def log_prob(self, raw: Array) -> Array:
        # A one-hot product rather than a gather: its gradient is elementwise, not a scatter.
        log_p = jax.nn.log_softmax(self.logits)
        return jnp.sum(log_p * jax.nn.one_hot(raw, self.logits.shape[-1], dtype=log_p.dtype), -1)

    def entropy(self) -> Array:
        log_p = jax.nn.log_softmax(self.logits)
        return -jnp.sum(jnp.exp(log_p) * log_p, axis=-1)

    def mode(self) -> Array:
        return jnp.argmax(self.logits, axis=-1).astype(jnp.int32)

    def env_action(self, raw: Array) -> Array:
        return raw


class DiagGaussian(NamedTuple):
    """Independent normals over the last axis. The env gets the sample clipped to [low, high]
    (infinite bounds clip nothing); the likelihood is that of the unclipped sample, as in
    CleanRL and Stable-Baselines3."""

    mean: Array
    log_std: Array
    low: Array
    high: Array

    def sample(self, key: Key) -> Array:
        return self.mean + jnp.exp(self.log_std) * jax.random.normal(key, self.mean.shape)

    def log_prob(self, raw: Array) -> Array:
        z = (raw - self.mean) * jnp.exp(-self.log_std)
        return jnp.sum(-0.5 * z**2 - self.log_std - 0.5 * LOG_2PI, axis=-1)

    def entropy(self) -> Array:
        log_std = jnp.broadcast_to(self.log_std, self.mean.shape)
        return jnp.sum(log_std + 0.5 * (1.0 + LOG_2PI), axis=-1)

    def mode(self) -> Array:
        return self.mean

    def env_action(self, raw: Array) -> Array:
        return jnp.clip(raw, self.low, self.high)


class TanhGaussian(NamedTuple):
    """A normal sample u squashed into the Box: a = c + s·tanh(u), c = (high+low)/2,
    s = (high−low)/2. log π(a) = log N(u) − Σ log(s·(1 − tanh²u)) (change of variables)."""

    mean: Array
    log_std: Array
    low: Array
    high: Array

    @property
    def _base(self) -> DiagGaussian:
        """The Gaussian of u, before squashing."""
        return DiagGaussian(self.mean, self.log_std, self.low, self.high)

    def sample(self, key: Key) -> Array:
        return self._base.sample(key)

    def log_prob(self, raw: Array) -> Array:
        base = self._base.log_prob(raw)
        # log(1 - tanh²u) = 2·(log 2 − u − softplus(−2u)), stable for large |u|.
        log_det = 2.0 * (math.log(2.0) - raw - jax.nn.softplus(-2.0 * raw))
        return base - jnp.sum(log_det + jnp.log(self._scale), axis=-1)

    def entropy(self) -> Array:
        """The base normal's entropy: the squashed one has no closed form. A bonus on it keeps
        exploration up just as well; the tanh only bounds where actions land."""
        return self._base.entropy()

    def mode(self) -> Array:
        return self.mean

    def env_action(self, raw: Array) -> Array:
        return (self.high + self.low) / 2.0 + self._scale * jnp.tanh(raw)

    @property
    def _scale(self) -> Array:
        return (self.high - self.low) / 2.0


Distribution = Categorical | DiagGaussian | TanhGaussian
