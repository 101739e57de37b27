"""Optimiser pieces whose settings may be traced grid values (jaxrl/hyper.py): a setting of 0
that turns a transform off must do so whether it is a Python number or a traced scalar."""

from __future__ import annotations

import jax.numpy as jnp
import optax


def _is_number(value: object) -> bool:
    return isinstance(value, int | float)


def clip_by_global_norm(max_norm: float | jnp.ndarray) -> optax.GradientTransformation:
    """Global-norm gradient clipping; 0 turns it off."""
    if _is_number(max_norm):
        return optax.clip_by_global_norm(max_norm) if max_norm else optax.identity()
    return optax.clip_by_global_norm(jnp.where(max_norm > 0, max_norm, jnp.inf))


def add_decayed_weights(weight_decay: float | jnp.ndarray) -> optax.GradientTransformation:
    """weight_decay · params added to the update; 0 turns it off."""
    if _is_number(weight_decay) and not weight_decay:
        return optax.identity()
    return optax.add_decayed_weights(weight_decay)


def linear_to_zero(learning_rate: float | jnp.ndarray, horizon: float) -> optax.Schedule:
    """`learning_rate` falling linearly to exactly 0 at step `horizon` (at least 1: a budget
    that allows no update) and staying there (compiled, optax.linear_schedule(1e-4, 0, 13)
    gives −3.7e-12 at 13, not 0: updates past the horizon would still move the parameters)."""
    horizon = max(horizon, 1)
    return lambda count: learning_rate * jnp.maximum(1.0 - count / horizon, 0.0)
