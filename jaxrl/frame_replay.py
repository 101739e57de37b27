"""A replay buffer for frame-stacked images that stores every frame once.

A transition of a [H, W, k] frame stack (oldest frame first) stored whole holds 2k frames (obs
and next_obs); storing next_obs as its newest frame still holds k + 1. Here frames live in their
own ring, each written once, and a transition keeps the serial numbers of its k + 1 frames (obs's
k, then next_obs's newest); stacks are rebuilt when sampling. As in Dopamine's circular replay
(github.com/google/dopamine, `dopamine/replay_memory/circular_replay_buffer.py`, read for the
idea; the code here is ours), a step adds one frame per env, but it is exact where Dopamine pads:

* next_obs is always obs shifted by one frame plus its newest frame (`final_obs` at an episode's
  end belongs to obs's episode), so it is rebuilt exactly at terminations and truncations too;
* the first obs of an episode (the env's reset stack, whatever it pads with) is written whole, k
  frames, so stacks are never padded by a rule of ours.

A step of an env therefore writes 1 frame, or k + 1 at the first step of an episode. The frame
ring is `frame_capacity` frames (by default the transition capacity plus 1/16 and a few steps'
worth), so with episodes longer than ~16k steps on average every stored transition's frames are
still there; when short episodes make the ring overwrite frames that old transitions use, those
transitions are no longer sampled (the oldest go first: `live_start`). Serials are absolute
(int32: 2³¹ frames), which makes both checks exact after a restore without the buffer's items
too (`jaxrl.checkpoint` empties both rings; the counters say every older serial is gone).

The two rings are `jaxrl.replay` buffers, so checkpoints save their filled rows as for any buffer.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxrl import replay
from jaxrl.config import require
from jaxrl.datatypes import Array, Key, PyTree, Transition
from jaxrl.replay import ReplayState


class StoredStep(NamedTuple):
    """A transition without its frames: the serials of obs's k frames and of next_obs's newest."""

    action: PyTree
    reward: Array
    terminated: Array
    truncated: Array
    obs_frames: Array  # int32[k], oldest first
    next_frame: Array  # int32


class FrameReplayState(NamedTuple):
    frames: ReplayState  # data: one frame [H, W] per row
    steps: ReplayState  # data: StoredStep
    frames_written: Array  # int32: the serial the next written frame gets
    stacks: Array  # int32[num_envs, k]: serials of each env's current obs; -1: not stored yet

    @property
    def size(self) -> Array:
        """Transitions written so far, at most the capacity (as `ReplayState.size`)."""
        return self.steps.size


def default_frame_capacity(capacity: int, num_envs: int, stack: int) -> int:
    """One frame per transition, 1/16 more for the reset stacks written at episode starts, and
    the frames a few steps of the whole env batch can write (`_slack`)."""
    return capacity + capacity // 16 + 2 * _slack(num_envs, stack)


def _slack(num_envs: int, stack: int) -> int:
    """How much older a later transition's oldest frame can be than an earlier one's: a stack
    spans at most k steps, and a step of the batch writes at most num_envs · (k + 1) frames."""
    return num_envs * (stack + 1) ** 2


def init(
    example: Transition, capacity: int, num_envs: int, frame_capacity: int | None = None
) -> FrameReplayState:
    """An empty buffer for transitions shaped like `example` (one item: obs [H, W, k])."""
    shape = example.obs.shape
    require(
        len(shape) == 3 and shape[-1] >= 2,
        f"storing each frame once needs frame-stacked image observations [H, W, k >= 2]; "
        f"got shape {tuple(shape)}",
    )
    stack = shape[-1]
    frame_capacity = frame_capacity or default_frame_capacity(capacity, num_envs, stack)
    require(
        frame_capacity >= 2 * _slack(num_envs, stack),
        f"frame_capacity={frame_capacity} must be >= {2 * _slack(num_envs, stack)}: the frames "
        f"a few steps of {num_envs} envs write",
    )
    step = StoredStep(
        example.action,
        example.reward,
        example.terminated,
        example.truncated,
        jnp.zeros((stack,), jnp.int32),
        jnp.zeros((), jnp.int32),
    )
    return FrameReplayState(
        replay.init(example.obs[..., 0], frame_capacity),
        replay.init(step, capacity),
        jnp.zeros((), jnp.int32),
        jnp.full((num_envs, stack), -1, jnp.int32),
    )


def _oldest_kept(state: FrameReplayState) -> Array:
    """The oldest serial still in the frame ring."""
    return state.frames_written - state.frames.size


def add(state: FrameReplayState, items: Transition) -> FrameReplayState:
    """One step of the env batch (leading axis num_envs, in env order): its new frames into the
    frame ring, its transitions into the step ring."""
    num_envs, stack = state.stacks.shape
    obs, next_obs = items.obs, items.next_obs
    require(
        obs.shape[0] == num_envs,
        f"frame replay built for {num_envs} envs was given a step of {obs.shape[0]}",
    )
    # An env whose current stack is not in the ring (its episode just began, or the ring was
    # emptied) writes its obs's k frames first; every env then writes next_obs's newest.
    needs_stack = state.stacks[:, 0] < _oldest_kept(state)
    frames = jnp.concatenate([jnp.moveaxis(obs, -1, 1), next_obs[..., -1][:, None]], axis=1)
    valid = jnp.concatenate(
        [jnp.repeat(needs_stack[:, None], stack, 1), jnp.ones((num_envs, 1), bool)], 1
    )
    serials = state.frames_written + jnp.cumsum(valid.reshape(-1)).reshape(valid.shape) - 1
    obs_frames = jnp.where(needs_stack[:, None], serials[:, :stack], state.stacks)
    next_frame = serials[:, stack]
    written = replay.add(state.frames, frames.reshape(-1, *frames.shape[2:]), valid.reshape(-1))
    step = StoredStep(
        items.action, items.reward, items.terminated, items.truncated, obs_frames, next_frame
    )
    ended = (items.terminated | items.truncated)[:, None]
    continued = jnp.concatenate([obs_frames[:, 1:], next_frame[:, None]], axis=1)
    return FrameReplayState(
        written,
        replay.add(state.steps, step),
        state.frames_written + valid.sum().astype(jnp.int32),
        jnp.where(ended, -1, continued).astype(jnp.int32),
    )


def capacity(state: FrameReplayState) -> int:
    """Transitions the buffer holds at most."""
    return replay.capacity(state.steps)


def live_start(state: FrameReplayState) -> Array:
    """How many of the oldest transitions are no longer sampled because the frame ring has
    overwritten (or is about to overwrite) a frame of theirs; 0 while it has overwritten none.

    A binary search over the transitions in age order for the first whose oldest frame is newer
    than the oldest kept by `_slack`: every later transition's oldest frame is then kept, although
    the serials are sorted only to within that slack (envs interleave; a stack spans k steps)."""
    num_envs, stack = state.stacks.shape
    steps = state.steps
    target = _oldest_kept(state) + _slack(num_envs, stack)

    def oldest_frame(j: Array) -> Array:
        return steps.data.obs_frames[replay.row_at_age(steps, j), 0]

    def halve(_: int, bounds: tuple[Array, Array]) -> tuple[Array, Array]:
        lo, hi = bounds
        mid = (lo + hi) // 2
        kept = oldest_frame(mid) >= target
        return jnp.where(kept | (lo >= hi), lo, mid + 1), jnp.where(kept & (lo < hi), mid, hi)

    iterations = max(1, replay.capacity(steps).bit_length())
    first, _ = jax.lax.fori_loop(0, iterations, halve, (jnp.zeros((), jnp.int32), steps.size))
    overwrote = state.frames.size >= replay.capacity(state.frames)
    # The newest transition's frames are always kept (the ring holds a few steps' frames).
    return jnp.where(overwrote, jnp.minimum(first, jnp.maximum(steps.size - 1, 0)), 0)


def sample_rows(
    state: FrameReplayState, key: Key, batch_size: int, newest_excluded: int = 0
) -> Array:
    """Rows of the step ring drawn uniformly with replacement from the transitions whose frames
    are kept, but the newest `newest_excluded`; the same rows `jaxrl.replay.sample_rows` draws
    with the same key while every frame is kept."""
    start = live_start(state)
    count = state.steps.size - start - newest_excluded
    draw = jax.random.randint(key, (batch_size,), 0, jnp.maximum(count, 1))
    rows = replay.row_at_age(state.steps, start + draw)
    return jnp.where(start == 0, draw, rows) if newest_excluded == 0 else rows


def eligible_rows(state: FrameReplayState, newest_excluded: int = 0) -> Array:
    """bool per row of the step ring: a transition whose frames are kept (from `live_start`),
    and not one of the newest `newest_excluded`."""
    age = replay.row_ages(state.steps)
    return (age >= live_start(state)) & (age < state.steps.size - newest_excluded)


def gather(state: FrameReplayState, rows: Array) -> Transition:
    """The transitions at `rows` of the step ring, their stacks rebuilt ([..., H, W, k])."""
    step = jax.tree.map(lambda x: x[rows], state.steps.data)
    serials = jnp.concatenate([step.obs_frames, step.next_frame[..., None]], axis=-1)
    ring = state.frames
    frame_rows = jnp.mod(ring.position - (state.frames_written - serials), replay.capacity(ring))
    frames = jnp.moveaxis(ring.data[frame_rows], -3, -1)  # [..., H, W, k + 1]
    return Transition(
        frames[..., :-1], step.action, step.reward, step.terminated, step.truncated, frames[..., 1:]
    )


def sample(state: FrameReplayState, key: Key, batch_size: int) -> Transition:
    """`batch_size` transitions drawn uniformly with replacement from those whose frames are kept
    (the buffer must not be empty)."""
    return gather(state, sample_rows(state, key, batch_size))


def nbytes(state: PyTree) -> int:
    """Bytes of a buffer's arrays (works on `jax.eval_shape` output: nothing is allocated)."""
    return sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(state))
