"""PRNG keys for runs: typed threefry2x32 keys (JAX's default implementation).

Why threefry and not XLA's RngBitGenerator (`unsafe_rbg`, which compiles faster on CPU): threefry
is a counter-based hash, so a key draws the same numbers alone and inside `vmap`. Under `vmap`,
RngBitGenerator draws the whole batch from the first key, so seed k of a `num_seeds` sweep
drew other numbers than the run with `seed=k`. Keys are typed (they carry their implementation),
so nothing global is changed for the user's own JAX code.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxrl.datatypes import Key

IMPL = "threefry2x32"


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
