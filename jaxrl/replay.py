"""Replay buffer as a pure pytree: a ring of fixed capacity that lives on device with the agent.

Every off-policy learner (DQN, DDPG, TD3, SAC) and ERL's shared buffer use it. Items are any pytree
(usually `jaxrl.datatypes.Transition`); each leaf is stored in its own dtype, so pixel
observations stay uint8. Adding writes a batch of items at once (one env step of the whole batch,
or a masked block of episode steps); sampling is uniform over what has been written. Being a
pytree, the buffer is vmapped over runs and checkpointed with the rest of the agent state.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxrl.config import require
from jaxrl.datatypes import Array, Key, PyTree


class ReplayState(NamedTuple):
    data: PyTree  # leaves [capacity, ...]
    position: Array  # int32: where the next item goes
    size: Array  # int32: items written so far, at most capacity


def capacity(state: ReplayState) -> int:
    return jax.tree.leaves(state.data)[0].shape[0]


def init(example: PyTree, capacity: int) -> ReplayState:
    """An empty buffer for items shaped like `example` (one item, no batch axis)."""
    require(capacity >= 1, f"replay buffer capacity={capacity} must be >= 1")
    data = jax.tree.map(
        lambda x: jnp.zeros((capacity, *jnp.shape(x)), jnp.asarray(x).dtype), example
    )
    return ReplayState(data, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))


def add(state: ReplayState, items: PyTree, valid: Array | None = None) -> ReplayState:
    """Write a batch of items (leading axis n <= capacity) after the newest ones, overwriting the
    oldest once full. With `valid` (bool[n]), only the valid items are written, packed in order:
    the rest cost nothing but the masked scatter."""
    cap = capacity(state)
    n = jax.tree.leaves(items)[0].shape[0]
    require(n <= cap, f"cannot add {n} items at once to a replay buffer of capacity {cap}")
    if valid is None:
        offsets = jnp.arange(n, dtype=jnp.int32)
        count = jnp.asarray(n, jnp.int32)
        index = (state.position + offsets) % cap
    else:
        offsets = jnp.cumsum(valid.astype(jnp.int32)) - 1
        count = valid.sum().astype(jnp.int32)
        index = jnp.where(valid, (state.position + offsets) % cap, cap)  # cap: dropped
    data = jax.tree.map(
        lambda store, x: store.at[index].set(x.astype(store.dtype), mode="drop"), state.data, items
    )
    return ReplayState(
        data, (state.position + count) % cap, jnp.minimum(state.size + count, cap).astype(jnp.int32)
    )


def sample_rows(state: ReplayState, key: Key, batch_size: int, newest_excluded: int = 0) -> Array:
    """Rows drawn uniformly with replacement from the items written but the newest
    `newest_excluded` (those whose successors an n-step return needs are not written yet)."""
    if newest_excluded == 0:
        return jax.random.randint(key, (batch_size,), 0, jnp.maximum(state.size, 1))
    age = jax.random.randint(key, (batch_size,), 0, jnp.maximum(state.size - newest_excluded, 1))
    return row_at_age(state, age)


def sample_newest_rows(state: ReplayState, key: Key, batch_size: int, window: Array) -> Array:
    """Rows drawn uniformly with replacement from the newest `window` items held (from all of
    them where fewer are held, from the newest one where `window` < 1)."""
    held = jnp.clip(window, 1, jnp.maximum(state.size, 1))
    age = state.size - held + jax.random.randint(key, (batch_size,), 0, held)
    return row_at_age(state, age)


def row_at_age(state: ReplayState, age: Array) -> Array:
    """The row of the item written `age` items after the oldest one held."""
    return jnp.mod(state.position - state.size + age, capacity(state))


def row_ages(state: ReplayState) -> Array:
    """Each row's age: how many items held were written before its item (rows past `size` come
    out at `size` or more)."""
    cap = capacity(state)
    return jnp.mod(jnp.arange(cap) - (state.position - state.size), cap)


def eligible_rows(state: ReplayState, newest_excluded: int = 0) -> Array:
    """bool per row: holds an item, and not one of the newest `newest_excluded`."""
    return row_ages(state) < state.size - newest_excluded


def gather(state: ReplayState, rows: Array) -> PyTree:
    return jax.tree.map(lambda store: store[rows], state.data)


def sample(state: ReplayState, key: Key, batch_size: int) -> PyTree:
    """`batch_size` items drawn uniformly with replacement from those written (the buffer must not
    be empty; learners start only after `learning_starts` steps)."""
    return gather(state, sample_rows(state, key, batch_size))
