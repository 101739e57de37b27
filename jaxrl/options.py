"""What option agents (agents/option_critic.py's deep agent, agents/ppoc.py) share: the running
option's encoding and the rule by which an arriving option ends."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl.datatypes import Array, Key

NO_OPTION = -1  # an env whose episode just began: its option is chosen at its first state


def selected(values: Array, option: Array) -> Array:
    """values[..., ω] of each entry's option: [..., options] -> [...]."""
    return jnp.take_along_axis(values, option[..., None], axis=-1)[..., 0]


def termination_probability(termination_logits: Array, option: Array) -> Array:
    """β_ω(s) = σ(logit) of each entry's option; 0 where none arrived (NO_OPTION)."""
    beta = jax.nn.sigmoid(selected(termination_logits, jnp.maximum(option, 0)))
    return jnp.where(option == NO_OPTION, 0.0, beta)


def option_ends(termination_logits: Array, option: Array, key: Key) -> tuple[Array, Array]:
    """Whether each state's arriving option ends there (drawn with probability β_ω(s); always
    where none arrived, NO_OPTION), and that β (0 where none arrived); any leading shape."""
    beta = termination_probability(termination_logits, option)
    return (option == NO_OPTION) | (jax.random.uniform(key, beta.shape) < beta), beta
