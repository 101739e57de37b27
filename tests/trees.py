"""Comparing pytrees of arrays in tests: bit-for-bit equality, for "this update moved nothing"
and "these two paths compute the same state"."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np


def tree_equal(a: Any, b: Any) -> bool:
    """Same structure (else ValueError) and every leaf equal element for element."""
    pairs = zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    return all(np.array_equal(x, y) for x, y in pairs)
