"""The replay ring buffer: write order, wrap-around, masked adds, dtypes and uniform sampling."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import replay
from jaxrl.config import ConfigError


def test_adds_wrap_around_and_overwrite_the_oldest():
    buf = replay.init({"x": jnp.zeros((), jnp.int32)}, capacity=5)
    buf = replay.add(buf, {"x": jnp.array([1, 2, 3])})
    assert int(buf.position) == 3 and int(buf.size) == 3
    buf = replay.add(buf, {"x": jnp.array([4, 5, 6])})
    # 6 overwrote 1 at slot 0; 2..5 remain
    np.testing.assert_array_equal(buf.data["x"], [6, 2, 3, 4, 5])
    assert int(buf.position) == 1 and int(buf.size) == 5


def test_masked_add_packs_only_valid_items():
    buf = replay.init(jnp.zeros((2,), jnp.float32), capacity=4)
    items = jnp.arange(8.0).reshape(4, 2)
    buf = replay.add(buf, items, valid=jnp.array([False, True, False, True]))
    np.testing.assert_array_equal(buf.data[:2], [[2.0, 3.0], [6.0, 7.0]])
    np.testing.assert_array_equal(buf.data[2:], 0.0)
    assert int(buf.position) == 2 and int(buf.size) == 2
    buf = replay.add(buf, items[:3], valid=jnp.array([True, True, True]))
    np.testing.assert_array_equal(buf.data[:, 0], [4.0, 6.0, 0.0, 2.0])  # wrapped to slot 0
    assert int(buf.position) == 1 and int(buf.size) == 4


def test_keeps_leaf_dtypes_such_as_uint8_frames():
    buf = replay.init({"frame": jnp.zeros((84, 84, 4), jnp.uint8)}, capacity=3)
    assert buf.data["frame"].dtype == jnp.uint8 and buf.data["frame"].shape == (3, 84, 84, 4)


def test_samples_only_written_items_uniformly():
    buf = replay.init(jnp.zeros((), jnp.int32), capacity=100)
    buf = replay.add(buf, jnp.arange(1, 5))  # 4 items; 96 empty slots hold 0
    draws = replay.sample(buf, jax.random.key(0), 40_000)
    counts = np.bincount(np.asarray(draws), minlength=5)
    assert counts[0] == 0
    np.testing.assert_allclose(counts[1:] / 40_000, 0.25, atol=0.01)


def test_too_large_a_batch_is_refused_clearly():
    buf = replay.init(jnp.zeros(()), capacity=2)
    with pytest.raises(ConfigError, match="cannot add 3 items at once"):
        replay.add(buf, jnp.zeros((3,)))
