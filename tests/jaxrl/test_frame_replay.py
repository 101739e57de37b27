"""jaxrl/frame_replay.py: each frame stored once, stacks rebuilt exactly, against serials worked
out by hand and against a buffer that stores whole transitions, through wraps, episode ends of
both kinds, overwritten frames and a restore without the buffer's items."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import frame_replay, replay
from jaxrl.checkpoint import _empty
from jaxrl.config import ConfigError
from jaxrl.datatypes import Transition

H, W = 3, 2


def transition(obs, next_obs, terminated, truncated, action=None):
    n = obs.shape[0]
    action = np.arange(n, dtype=np.int32) if action is None else action
    return Transition(
        jnp.asarray(obs, jnp.uint8),
        jnp.asarray(action, jnp.int32),
        jnp.asarray(obs[:, 0, 0, 0], jnp.float32),
        jnp.asarray(terminated),
        jnp.asarray(truncated),
        jnp.asarray(next_obs, jnp.uint8),
    )


def stacked_episodes(num_envs: int, stack: int, steps: int, end_rate: float, seed: int):
    """Transitions of `num_envs` frame-stacking envs whose episodes end (terminated or truncated,
    each at `end_rate`) and restart from a reset stack of k arbitrary frames (no padding rule)."""
    rng = np.random.default_rng(seed)
    frame = lambda *shape: rng.integers(0, 256, (*shape, H, W), dtype=np.uint8)
    obs = np.moveaxis(frame(num_envs, stack), 1, -1)
    out = []
    for _ in range(steps):
        next_obs = np.concatenate([obs[..., 1:], np.moveaxis(frame(num_envs, 1), 1, -1)], -1)
        terminated = rng.random(num_envs) < end_rate
        truncated = ~terminated & (rng.random(num_envs) < end_rate)
        action = rng.integers(0, 4, num_envs)
        out.append(transition(obs, next_obs, terminated, truncated, action))
        reset = np.moveaxis(frame(num_envs, stack), 1, -1)
        obs = np.where((terminated | truncated)[:, None, None, None], reset, next_obs)
    return out


def fill(items, capacity, num_envs, frame_capacity=None):
    example = jax.tree.map(lambda x: x[0], items[0])
    ours = frame_replay.init(example, capacity, num_envs, frame_capacity)
    whole = replay.init(example, capacity)
    add = jax.jit(frame_replay.add)
    for t in items:
        ours, whole = add(ours, t), replay.add(whole, t)
    return ours, whole


def assert_rows_equal(ours, whole, rows):
    got = jax.tree.map(np.asarray, frame_replay.gather(ours, jnp.asarray(rows)))
    want = jax.tree.map(lambda x: np.asarray(x)[rows], whole.data)
    for name in Transition._fields:
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)


def test_serials_by_hand():
    """One env, k = 2. Episode a: reset stack (a0, a1), steps to a2, then a3 terminated; episode
    b: reset (b0, b1), b2 truncated; episode c: reset (c0, c1), c2. Frames are written in that
    order, serials 0..9, and each transition keeps its obs's and its next frame's serials."""
    f = {
        name: np.full((H, W), i, np.uint8)
        for i, name in enumerate(["a0", "a1", "a2", "a3", "b0", "b1", "b2", "c0", "c1", "c2"])
    }
    stack = lambda *names: np.stack([f[n] for n in names], -1)[None]
    no, yes = np.array([False]), np.array([True])
    items = [
        transition(stack("a0", "a1"), stack("a1", "a2"), no, no),
        transition(stack("a1", "a2"), stack("a2", "a3"), yes, no),
        transition(stack("b0", "b1"), stack("b1", "b2"), no, yes),
        transition(stack("c0", "c1"), stack("c1", "c2"), no, no),
    ]
    ours, whole = fill(items, capacity=8, num_envs=1)
    steps = jax.tree.map(np.asarray, ours.steps.data)
    np.testing.assert_array_equal(steps.obs_frames[:4], [[0, 1], [1, 2], [4, 5], [7, 8]])
    np.testing.assert_array_equal(steps.next_frame[:4], [2, 3, 6, 9])
    assert int(ours.frames_written) == 10 and int(ours.frames.size) == 10
    np.testing.assert_array_equal(np.asarray(ours.frames.data)[:10, 0, 0], np.arange(10))
    np.testing.assert_array_equal(np.asarray(ours.stacks), [[8, 9]])  # c continues
    assert int(ours.size) == 4 and int(frame_replay.live_start(ours)) == 0
    assert_rows_equal(ours, whole, np.arange(4))


def test_overwritten_frames_are_never_sampled():
    """One env, k = 2, every step terminates, so each step writes 3 frames (the reset stack and
    the next frame): step i's transition uses serials 3i, 3i + 1, 3i + 2. After 10 steps into a
    ring of 18 frames the ring keeps serials 12..29, so steps 0..3 lost frames; the search asks
    for an oldest frame at or past 12 + the slack 1·(2 + 1)² = 21, which steps 7..9 have."""
    no, yes = np.array([False]), np.array([True])
    items = []
    for i in range(10):
        obs = np.full((1, H, W, 2), [3 * i, 3 * i + 1], np.uint8)
        next_obs = np.full((1, H, W, 2), [3 * i + 1, 3 * i + 2], np.uint8)
        items.append(transition(obs, next_obs, yes, no))
    ours, whole = fill(items, capacity=20, num_envs=1, frame_capacity=18)
    assert int(ours.frames_written) == 30 and int(frame_replay.live_start(ours)) == 7
    rows = np.asarray(frame_replay.sample_rows(ours, jax.random.key(0), 500))
    assert set(rows.tolist()) == {7, 8, 9}
    assert_rows_equal(ours, whole, rows)


@pytest.mark.parametrize(("num_envs", "end_rate"), [(1, 0.05), (3, 0.3)])
def test_rebuilt_transitions_equal_whole_ones_through_wraps(num_envs: int, end_rate: float):
    """Random episodes (both ends, arbitrary reset stacks), both rings wrapped several times:
    every transition that can be sampled equals the whole-transition buffer's at the same row,
    none of its frames was overwritten, and few were dropped (with long episodes none)."""
    stack, capacity = 4, 40
    items = stacked_episodes(
        num_envs, stack, steps=300 // num_envs, end_rate=end_rate, seed=num_envs
    )
    ours, whole = fill(items, capacity, num_envs)
    assert int(ours.frames_written) > 3 * replay.capacity(ours.frames)  # wrapped
    start = int(frame_replay.live_start(ours))
    rows = np.asarray(replay.row_at_age(ours.steps, jnp.arange(start, capacity)))
    assert_rows_equal(ours, whole, rows)
    oldest_kept = int(ours.frames_written - ours.frames.size)
    assert (np.asarray(ours.steps.data.obs_frames)[rows] >= oldest_kept).all()
    assert start <= (0 if end_rate < 0.1 else capacity // 4), start  # measured 0 and 8
    sampled = np.asarray(frame_replay.sample_rows(ours, jax.random.key(1), 2000))
    assert set(sampled.tolist()) == set(rows.tolist())


def test_same_rows_as_the_whole_buffer_while_nothing_is_overwritten():
    """With every frame kept, sampling draws the rows `jaxrl.replay.sample` draws with the same
    key (so a run's minibatches do not depend on how frames are stored), wrapped or not."""
    items = stacked_episodes(2, 4, steps=30, end_rate=0.1, seed=5)
    for capacity in (100, 24):
        ours, whole = fill(items, capacity, 2, frame_capacity=4096)
        key = jax.random.key(3)
        got = jax.tree.map(np.asarray, frame_replay.sample(ours, key, 64))
        want = jax.tree.map(np.asarray, replay.sample(whole, key, 64))
        for name in Transition._fields:
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)


def test_restore_without_items_starts_over_exactly():
    """`jaxrl.checkpoint` restores a buffer saved without its items as empty rings with the
    counters kept: the envs' current stacks then refer to frames no longer there, so their next
    step writes its stack whole again, and only the new transitions are sampled, exactly."""
    items = stacked_episodes(2, 4, steps=40, end_rate=0.1, seed=7)
    ours, whole = fill(items[:30], 64, 2)
    ours = ours._replace(frames=_empty(ours.frames), steps=_empty(ours.steps))
    whole = _empty(whole)
    for t in items[30:]:
        ours, whole = frame_replay.add(ours, t), replay.add(whole, t)
    assert int(ours.size) == 20 and int(frame_replay.live_start(ours)) == 0
    assert_rows_equal(ours, whole, np.arange(20))


def test_vmapped_runs_keep_their_own_frames():
    """Two runs' buffers under vmap (how seeds share a program): each equals its own history."""
    histories = [stacked_episodes(2, 4, steps=20, end_rate=0.2, seed=s) for s in (11, 12)]
    example = jax.tree.map(lambda x: x[0], histories[0][0])
    init = lambda _: frame_replay.init(example, 16, 2)
    ours = jax.vmap(init)(jnp.arange(2))
    add = jax.jit(jax.vmap(frame_replay.add))
    for a, b in zip(*histories, strict=True):
        ours = add(ours, jax.tree.map(lambda x, y: jnp.stack([x, y]), a, b))
    for run, history in enumerate(histories):
        _, whole = fill(history, 16, 2)
        mine = jax.tree.map(lambda x, r=run: x[r], ours)
        assert_rows_equal(mine, whole, np.arange(16))


def test_a_million_atari_transitions_fit_in_8_gb():
    """84×84×4 uint8 stacks, one env: the frame ring holds 1M + 1M/16 + 2·25 frames of 7,056
    bytes, and a transition's own fields are 30 bytes (int32 action, float32 reward, two flags,
    five int32 serials): 7.53 GB in all, where whole transitions would be 56.4 GB and
    next_obs-as-its-newest-frame 35.3 GB. Shapes only: nothing is allocated."""
    example = Transition(
        jnp.zeros((84, 84, 4), jnp.uint8),
        jnp.zeros((), jnp.int32),
        jnp.zeros(()),
        jnp.zeros((), bool),
        jnp.zeros((), bool),
        jnp.zeros((84, 84, 4), jnp.uint8),
    )
    shapes = jax.eval_shape(lambda: frame_replay.init(example, 1_000_000, 1))
    counters = 4 + 4 + 4 + 4 + 4 + 4 * 4  # two rings' position and size, frames_written, stacks
    expected = (1_000_000 + 62_500 + 50) * 7056 + 1_000_000 * 30 + counters
    assert frame_replay.nbytes(shapes) == expected
    assert expected < 8e9 and expected / (1_000_000 * 2 * 84 * 84 * 4) < 0.134


def test_refuses_observations_that_are_not_frame_stacks():
    example = Transition(
        jnp.zeros((4,)),
        jnp.zeros((), jnp.int32),
        jnp.zeros(()),
        *(jnp.zeros((), bool),) * 2,
        jnp.zeros((4,)),
    )
    with pytest.raises(ConfigError, match=r"frame-stacked image observations \[H, W, k >= 2\]"):
        frame_replay.init(example, 10, 1)


@pytest.mark.parametrize("with_items", [True, False])
def test_checkpoint_round_trip(tmp_path, with_items: bool):
    """Through `jaxrl.checkpoint`: with its items a buffer comes back equal and goes on exactly;
    without them it comes back as empty rings with its counters, and goes on exactly from there."""
    from jaxrl.checkpoint import Checkpointer

    items = stacked_episodes(2, 4, steps=40, end_rate=0.1, seed=9)
    ours, whole = fill(items[:30], 48, 2)
    checkpointer = Checkpointer(tmp_path, keep=1, replay_buffers=with_items)
    checkpointer.save(1, {"buffer": ours}, {})
    restored, _ = checkpointer.restore({"buffer": ours})
    restored = restored["buffer"]
    checkpointer.close()
    if with_items:
        jax.tree.map(np.testing.assert_array_equal, restored, ours)
    else:
        assert int(restored.size) == 0 and int(restored.frames_written) == int(ours.frames_written)
        whole = _empty(whole)
    for t in items[30:]:
        restored, whole = frame_replay.add(restored, t), replay.add(whole, t)
    rows = np.arange(int(restored.size))
    assert len(rows) == (48 if with_items else 20)
    assert_rows_equal(restored, whole, rows)
