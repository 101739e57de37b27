"""Pieces the continuous-action actor-critics (TD3, DDPG, SAC, ERL's learner) share: the Box check
and action scaling, the MLP torso, Q(s, a) critics and their ensembles, the one-step target.

The learners work in normalised action units, [−1, 1] per dimension, and rescale to the env's
Box only at the boundary (actions they return, actions they read from the buffer), so noise
scales and entropies mean the same for any bounds, as in Stable-Baselines3.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.config import ConfigError
from jaxrl.datatypes import Array, Box, Discrete, EnvSpec, Key, PyTree
from jaxrl.env import describe_actions
from jaxrl.networks import Dense, activation, layer_init


class ActionScale(NamedTuple):
    """The affine map between normalised actions in [−1, 1] and the env's Box."""

    center: np.ndarray
    half_range: np.ndarray

    def to_env(self, action: Array) -> Array:
        return self.center + self.half_range * action

    def from_env(self, action: Array) -> Array:
        return (action - self.center) / self.half_range


def box_actions(spec: EnvSpec, agent: str) -> ActionScale:
    """The action scaling of a bounded flat Box; any other action space is refused here, before
    anything compiles (a tanh actor needs finite bounds to squash into)."""
    space = spec.action_space
    if not isinstance(space, Box):
        discrete = isinstance(space, Discrete)
        hint = " (use a discrete-action agent such as dqn or ppo)" if discrete else ""
        raise ConfigError(
            f"agent '{agent}' needs continuous (Box) actions; env '{spec.name}' has "
            f"{describe_actions(space)}{hint}"
        )
    if len(space.shape) != 1:
        raise ConfigError(
            f"agent '{agent}' supports flat (1-D) Box actions; env '{spec.name}' has shape "
            f"{space.shape}"
        )
    low, high = np.asarray(space.low, np.float32), np.asarray(space.high, np.float32)
    if not space.bounded or np.any(high <= low):
        raise ConfigError(
            f"agent '{agent}' needs a bounded Box (finite low < high) to squash its tanh "
            f"actions into; env '{spec.name}' has low={low.tolist()} high={high.tolist()}"
        )
    return ActionScale((high + low) / 2.0, (high - low) / 2.0)


class Torso(nn.Module):
    """Dense layers with an activation, optionally layer-normalised before it. Flax's default
    (LeCun normal) initialiser unless `init_scheme` says PyTorch's (`networks.layer_init`); not the
    orthogonal one: a QR, which must not be vmapped on CPU."""

    hidden_sizes: Sequence[int]
    activation: str = "relu"
    layer_norm: bool = False
    init_scheme: str = "lecun_normal"

    @nn.compact
    def __call__(self, x: Array) -> Array:
        act = activation(self.activation)
        for size in self.hidden_sizes:
            x = Dense(size, **layer_init(self.init_scheme, x.shape[-1]))(x)
            if self.layer_norm:
                x = nn.LayerNorm()(x)
            x = act(x)
        return x


class GaussianActor(nn.Module):
    """Mean and log-std (clipped to [log_std_min, log_std_max]) of a pre-tanh Gaussian over the
    normalised box: SAC's actor and the imitation learners' (`jaxrl.imitation`)."""

    action_size: int
    hidden_sizes: Sequence[int]
    activation: str
    log_std_min: float
    log_std_max: float

    @nn.compact
    def __call__(self, obs: Array) -> tuple[Array, Array]:
        x = Torso(self.hidden_sizes, self.activation)(obs.astype(jnp.float32))
        mean = Dense(self.action_size)(x)
        log_std = Dense(self.action_size)(x)
        return mean, jnp.clip(log_std, self.log_std_min, self.log_std_max)


class StateActionCritic(nn.Module):
    """Q(s, a) from the concatenated observation and (normalised) action."""

    hidden_sizes: Sequence[int]
    activation: str = "relu"
    layer_norm: bool = False
    init_scheme: str = "lecun_normal"  # `networks.layer_init`'s scheme

    @nn.compact
    def __call__(self, obs: Array, action: Array) -> Array:
        x = jnp.concatenate([obs.astype(jnp.float32), action], axis=-1)
        x = Torso(self.hidden_sizes, self.activation, self.layer_norm, self.init_scheme)(x)
        return Dense(1, **layer_init(self.init_scheme, x.shape[-1]))(x)[..., 0]


@dataclass(frozen=True)
class Critics:
    """An ensemble of `count` critics whose parameters are stacked on a leading axis, so one
    vmapped call evaluates them all: `critics(params, obs, action)` is [count, *batch]."""

    net: StateActionCritic
    count: int

    def init(self, key: Key, obs: Array, action: Array) -> PyTree:
        return jax.vmap(lambda k: self.net.init(k, obs, action))(jax.random.split(key, self.count))

    def __call__(self, params: PyTree, obs: Array, action: Array) -> Array:
        return jax.vmap(self.net.apply, in_axes=(0, None, None))(params, obs, action)

    def first(self, params: PyTree, obs: Array, action: Array) -> Array:
        """Q₁ alone (TD3's actor follows the first critic)."""
        return self.net.apply(jax.tree.map(lambda p: p[0], params), obs, action)


def bootstrapped_return(reward: Array, terminated: Array, next_value: Array, gamma: float) -> Array:
    """r + γ·(1 − terminated)·V(s'). Truncation does not enter: a truncated step bootstraps from
    its true successor like any other non-terminal step."""
    return reward + gamma * (1.0 - terminated.astype(jnp.float32)) * next_value


def inverted_gradients(grads: Array, values: Array) -> Array:
    """Hausknecht & Stone's (2016) inverting gradients on [−1, 1]: a gradient that raises a value
    is scaled by (1 − x)/2, one that lowers it by (x + 1)/2, so that it shrinks near a bound and
    points back inside beyond it. `grads` are ascent directions (∂Q/∂x). It bounds an actor's
    unsquashed outputs without a tanh, whose saturated ends pass no gradient."""
    return jnp.where(grads > 0, grads * (1.0 - values), grads * (values + 1.0)) / 2.0


def critic_loss(q: Array, target: Array) -> Array:
    """Σ over critics of the mean squared TD error (q: [critics, batch]), as in TD3's code."""
    return jnp.sum(jnp.mean((q - target) ** 2, axis=-1))
