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


def test_the_newest_rows_are_drawn_uniformly_through_a_wrap():
    """A 5-row ring after items 1..7 holds 3..7 (6 and 7 in rows 0 and 1): a window of 2 draws
    6 and 7 evenly, one wider than what is held draws all five, one below 1 the newest."""
    buf = replay.init(jnp.zeros((), jnp.int32), capacity=5)
    buf = replay.add(replay.add(buf, jnp.arange(1, 5)), jnp.arange(5, 8))
    for window, held in ((2, [6, 7]), (9, [3, 4, 5, 6, 7]), (0, [7])):
        rows = replay.sample_newest_rows(buf, jax.random.key(window), 20_000, jnp.int32(window))
        counts = np.bincount(np.asarray(replay.gather(buf, rows)), minlength=8)
        assert set(np.flatnonzero(counts)) == set(held)
        np.testing.assert_allclose(counts[held] / 20_000, 1 / len(held), atol=0.015)


def test_too_large_a_batch_is_refused_clearly():
    buf = replay.init(jnp.zeros(()), capacity=2)
    with pytest.raises(ConfigError, match="cannot add 3 items at once"):
        replay.add(buf, jnp.zeros((3,)))


def test_n_step_transitions_by_hand():
    """n = 3, γ = 0.5, rewards 1, 2, 4 in each of three samples: no end (R = 1 + 1 + 1 = 3,
    bootstrap γ³ from the third next_obs), terminated at the second step (R = 1 + 1 = 2, its
    flags and next_obs, γ²), truncated at the first (R = 1, γ¹, the first next_obs)."""
    from jaxrl.datatypes import Transition
    from jaxrl.offpolicy import n_step_transitions

    f, t = False, True
    steps = Transition(
        obs=jnp.arange(9.0).reshape(3, 3, 1),  # [step, sample, 1]
        action=jnp.array([[7, 8, 9], [0, 0, 0], [0, 0, 0]]),
        reward=jnp.array([[1.0, 1, 1], [2, 2, 2], [4, 4, 4]]),
        terminated=jnp.array([[f, f, f], [f, t, f], [f, f, f]]),
        truncated=jnp.array([[f, f, t], [f, f, f], [f, f, t]]),
        next_obs=10 + jnp.arange(9.0).reshape(3, 3, 1),
    )
    out = n_step_transitions(steps, 0.5)
    np.testing.assert_allclose(out.reward, [3.0, 2.0, 1.0])
    np.testing.assert_allclose(out.discount, [0.125, 0.25, 0.5])
    np.testing.assert_array_equal(out.terminated, [f, t, f])
    np.testing.assert_array_equal(out.truncated, [f, f, t])
    np.testing.assert_array_equal(out.next_obs[:, 0], [16.0, 14.0, 12.0])
    np.testing.assert_array_equal(out.obs[:, 0], [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(out.action, [7, 8, 9])


def test_n_step_minibatches_follow_each_env_through_a_wrapped_buffer():
    """Three envs write one step each per batched step into a 10-row buffer (so rows wrap and
    the capacity is no multiple of the batch): a sampled 3-step return starts at a transition
    whose two successors of the same env are written, and sums exactly that env's rewards."""
    from types import SimpleNamespace

    from jaxrl.datatypes import Transition
    from jaxrl.offpolicy import FULL_LAYOUT, sample_batch

    num_envs, gamma = 3, 0.9
    example = Transition(
        jnp.zeros(2),
        jnp.zeros((), jnp.int32),
        jnp.zeros(()),
        *(jnp.zeros((), bool),) * 2,
        jnp.zeros(2),
    )
    buffer = replay.init(example, 10)
    rewards = {}
    for step in range(7):  # obs = (env, step); reward unique per (env, step)
        env = jnp.arange(num_envs)
        obs = jnp.stack([env, jnp.full(num_envs, step)], -1).astype(jnp.float32)
        reward = 10.0 * env + step
        rewards.update({(e, step): float(r) for e, r in enumerate(reward)})
        flags = jnp.zeros(num_envs, bool)
        buffer = replay.add(
            buffer, Transition(obs, env, reward, flags, flags, obs + jnp.array([0, 1]))
        )
    setup = SimpleNamespace(
        layout=FULL_LAYOUT,
        cfg=SimpleNamespace(batch_size=200, gamma=gamma),
        n_step=3,
        env=SimpleNamespace(spec=SimpleNamespace(num_envs=num_envs)),
        own_steps_window=0,
    )
    batch = jax.tree.map(np.asarray, sample_batch(setup, buffer, jax.random.key(0)))
    starts = {(int(e), int(s)) for e, s in batch.obs}
    # the buffer holds the last 10 of 21 items: step 3 of env 2, then steps 4..6 of every env;
    # a 3-step return needs steps s, s + 1 and s + 2 of its env, so only these start one
    assert starts == {(2, 3), (0, 4), (1, 4), (2, 4)}
    for (e, s), r, nxt, d in zip(
        batch.obs, batch.reward, batch.next_obs, batch.discount, strict=True
    ):
        e, s = int(e), int(s)
        want = sum(gamma**m * rewards[e, s + m] for m in range(3))
        np.testing.assert_allclose(r, want, rtol=1e-6)
        np.testing.assert_array_equal(nxt, [e, s + 3])
        np.testing.assert_allclose(d, gamma**3, rtol=1e-6)
