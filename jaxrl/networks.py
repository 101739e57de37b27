"""Network building blocks (flax.linen) shared by agents: MLPs with optional virtual batch norm,
and the mapping from a network's output to an action."""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.config import ConfigError
from jaxrl.types import Array, Box, Discrete, Space

ACTIVATIONS = {"tanh": jnp.tanh, "relu": jax.nn.relu, "elu": jax.nn.elu, "gelu": jax.nn.gelu}
VBN_EPS = 1e-5


def activation(name: str):
    if name not in ACTIVATIONS:
        raise ConfigError(f"unknown activation '{name}'; valid: {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name]


class MLP(nn.Module):
    """Dense layers with an activation; hidden layers can be normalised with fixed statistics.

    Virtual batch norm (Salimans et al. 2016/2017): `reference_stats` runs a reference batch
    through the network and returns each hidden layer's mean/variance; `__call__` then normalises
    with those, so every input (and, in ES, every population member on its own weights) is
    normalised against the same reference rather than against its own batch.
    """

    hidden_sizes: Sequence[int]
    out_size: int
    activation: str = "tanh"
    out_scale: float = 0.01  # small output layer: near-uniform logits / near-zero actions at start

    def setup(self) -> None:
        hidden_init = nn.initializers.orthogonal(float(np.sqrt(2.0)))
        self.hidden = [nn.Dense(h, kernel_init=hidden_init) for h in self.hidden_sizes]
        self.head = nn.Dense(self.out_size, kernel_init=nn.initializers.orthogonal(self.out_scale))

    def __call__(self, x: Array, vbn_stats: Sequence[tuple[Array, Array]] | None = None) -> Array:
        act = activation(self.activation)
        for i, layer in enumerate(self.hidden):
            h = layer(x)
            if vbn_stats is not None:
                mean, var = vbn_stats[i]
                h = (h - mean) * jax.lax.rsqrt(var + VBN_EPS)
            x = act(h)
        return self.head(x)

    def reference_stats(self, reference: Array) -> list[tuple[Array, Array]]:
        act = activation(self.activation)
        stats = []
        x = reference
        for layer in self.hidden:
            h = layer(x)
            mean, var = h.mean(0), h.var(0)
            stats.append((mean, var))
            x = act((h - mean) * jax.lax.rsqrt(var + VBN_EPS))
        return stats


def policy_output_size(space: Space, agent: str) -> int:
    """Logits for Discrete, one output per dimension for flat Box; anything else is refused."""
    if isinstance(space, Discrete):
        return space.n
    if isinstance(space, Box) and len(space.shape) == 1:
        if not space.bounded:
            raise ConfigError(
                f"agent '{agent}' needs a bounded Box action space to squash its actions into; "
                f"got low={space.low.tolist()} high={space.high.tolist()}"
            )
        return space.shape[0]
    raise ConfigError(
        f"agent '{agent}' supports Discrete and flat (1-D) Box action spaces; got {space}"
    )


def deterministic_action(output: Array, space: Space) -> Array:
    """Greedy action: argmax of logits, or tanh-squashed mean rescaled to the Box's bounds."""
    if isinstance(space, Discrete):
        return jnp.argmax(output, axis=-1).astype(jnp.int32)
    low, high = jnp.asarray(space.low), jnp.asarray(space.high)
    return low + (jnp.tanh(output) + 1.0) * 0.5 * (high - low)
