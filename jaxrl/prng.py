"""PRNG keys for runs: typed keys of XLA's RngBitGenerator (`unsafe_rbg`), not threefry.

Why: on CPU every threefry call site (each split, fold_in, uniform, normal) adds roughly half a
second of XLA compile time, and a training program has dozens; RngBitGenerator keys halve the
compile time of an ES or PPO program. The key carries its implementation, so nothing global is
changed for the user's own JAX code. Same config and seed give the same numbers on the same
backend; XLA's generator may differ between CPU and GPU.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxrl.types import Key

IMPL = "unsafe_rbg"


def make_key(seed: int) -> Key:
    return jax.random.key(seed, impl=IMPL)


def _is_key(x: Any) -> bool:
    return hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


def keys_to_data(tree: Any) -> Any:
    """Typed keys as raw uint32 arrays (or their shapes, for abstract trees), for serialisers that
    only know plain dtypes."""

    def convert(x: Any) -> Any:
        if not _is_key(x):
            return x
        if isinstance(x, jax.ShapeDtypeStruct):
            return jax.eval_shape(jax.random.key_data, x)
        return jax.random.key_data(x)

    return jax.tree.map(convert, tree)


def data_to_keys(tree: Any, like: Any) -> Any:
    """Inverse of `keys_to_data`, wrapping exactly the leaves that are keys in `like`."""
    return jax.tree.map(
        lambda x, ref: jax.random.wrap_key_data(x, impl=IMPL) if _is_key(ref) else x, tree, like
    )
