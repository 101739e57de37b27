"""VectorEnv semantics (docs/architecture.md, Environments) checked against hand-computed values
on a counter env.

The counter env makes every number predictable: the action is added to a counter, the reward is
1 + the new counter, and the episode terminates once the counter reaches 3. A per-episode random
`tag` (drawn from the reset key) tells episodes apart, so same-step auto-reset can be seen in the
observations: `obs` must carry the new episode's tag, `final_obs` the old one's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import cache
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from jaxrl.config import EnvConfig
from jaxrl.datatypes import Array, Box, Discrete, EnvSpec, Hybrid, Key, TimeStep
from jaxrl.env import EnvCore, VectorEnv, VectorState, random_actions


class CounterState(NamedTuple):
    count: Array  # int32 scalar
    tag: Array  # float32[2], drawn at reset, constant within an episode


def _obs(state: CounterState) -> Array:
    return jnp.concatenate([state.count[None].astype(jnp.float32), state.tag])


def _counter_reset(key: Key) -> tuple[CounterState, Array]:
    state = CounterState(jnp.zeros((), jnp.int32), jax.random.uniform(key, (2,)))
    return state, _obs(state)


def _counter_step(
    key: Key, state: CounterState, action: Array
) -> tuple[CounterState, Array, Array, Array]:
    count = state.count + action
    state = CounterState(count, state.tag)
    return state, _obs(state), 1.0 + count.astype(jnp.float32), count >= 3


def _counter_spec(num_envs: int, max_episode_steps: int) -> EnvSpec:
    return EnvSpec(
        name="Counter",
        family="jax",
        observation_space=Box(np.full(3, -np.inf), np.full(3, np.inf), (3,)),
        action_space=Discrete(3),
        num_envs=num_envs,
        max_episode_steps=max_episode_steps,
    )


class Jitted(NamedTuple):
    env: VectorEnv
    reset: Callable[[Key], tuple[VectorState, TimeStep]]
    step: Callable[[VectorState, Array, Key], tuple[VectorState, TimeStep]]


@cache
def _counter_env(num_envs: int, max_episode_steps: int) -> Jitted:
    """A counter VectorEnv and its jitted reset/step, compiled once per shape and time limit."""
    env = VectorEnv(
        EnvCore(_counter_reset, _counter_step), _counter_spec(num_envs, max_episode_steps)
    )
    return Jitted(env, jax.jit(env.reset), jax.jit(env.step))


class Rollout(NamedTuple):
    reset_ts: TimeStep
    reset_state: VectorState
    states: list[VectorState]  # after each step
    ts: TimeStep | None  # stacked over steps: leading axis time, then env


def _rollout(max_episode_steps: int, actions: list[int], steps: int) -> Rollout:
    """Reset, then step `steps` times with the same per-env actions every step."""
    j = _counter_env(len(actions), max_episode_steps)
    key = jax.random.key(0)
    state0, ts0 = j.reset(key)
    state, states, timesteps = state0, [], []
    action = jnp.asarray(actions, jnp.int32)
    for t in range(steps):
        state, ts = j.step(state, action, jax.random.fold_in(key, t + 1))
        states.append(state)
        timesteps.append(ts)
    stacked = jax.tree.map(lambda *xs: np.stack(xs), *jax.device_get(timesteps)) if steps else None
    return Rollout(jax.device_get(ts0), jax.device_get(state0), jax.device_get(states), stacked)


# Actions [1, 0, 2] with a time limit of 4, stepped 8 times. By hand:
#   env 0 (+1): counter 1,2,3 -> terminates at steps 3 and 6 (return 2+3+4 = 9, length 3)
#   env 1 (+0): counter stays 0 -> truncated at steps 4 and 8 (return 1*4 = 4, length 4)
#   env 2 (+2): counter 2,4 -> terminates at steps 2,4,6,8 (return 3+5 = 8, length 2)
ACTIONS = [1, 0, 2]
# Per env (rows), per step (columns); transposed to [time, env] like the stacked TimeSteps.
FINAL_COUNT = np.array(
    [
        [1, 2, 3, 1, 2, 3, 1, 2],
        [0, 0, 0, 0, 0, 0, 0, 0],
        [2, 4, 2, 4, 2, 4, 2, 4],
    ]
).T
REWARD = 1.0 + FINAL_COUNT
TERMINATED = np.array(
    [
        [0, 0, 1, 0, 0, 1, 0, 0],
        [0, 0, 0, 0, 0, 0, 0, 0],
        [0, 1, 0, 1, 0, 1, 0, 1],
    ],
    bool,
).T
TRUNCATED = np.array(
    [
        [0, 0, 0, 0, 0, 0, 0, 0],
        [0, 0, 0, 1, 0, 0, 0, 1],
        [0, 0, 0, 0, 0, 0, 0, 0],
    ],
    bool,
).T
DONE = TERMINATED | TRUNCATED
TIME_AFTER = np.array(
    [
        [1, 2, 0, 1, 2, 0, 1, 2],
        [1, 2, 3, 0, 1, 2, 3, 0],
        [1, 0, 1, 0, 1, 0, 1, 0],
    ]
).T


def test_reset() -> None:
    """Reset: first observations with distinct tags per env (keys are split), zero reward,
    no flags, zero statistics, `final_obs` equal to `obs`."""
    r = _rollout(4, ACTIONS, steps=0)
    ts = r.reset_ts
    assert ts.obs.shape == (3, 3) and ts.obs.dtype == np.float32
    np.testing.assert_array_equal(ts.obs[:, 0], 0.0)
    assert len({tuple(row) for row in ts.obs[:, 1:]}) == 3
    np.testing.assert_array_equal(ts.final_obs, ts.obs)
    np.testing.assert_array_equal(ts.reward, 0.0)
    assert ts.reward.dtype == np.float32 and ts.terminated.dtype == bool
    assert not ts.terminated.any() and not ts.truncated.any()
    assert not ts.info["episode_done"].any()
    np.testing.assert_array_equal(ts.info["episode_return"], 0.0)
    np.testing.assert_array_equal(ts.info["episode_length"], 0)
    np.testing.assert_array_equal(r.reset_state.time, 0)


def test_step_flags_rewards_and_counters() -> None:
    """Rewards, terminated/truncated (kept apart) and the time counter match the hand table."""
    r = _rollout(4, ACTIONS, steps=8)
    np.testing.assert_array_equal(r.ts.reward, REWARD)
    np.testing.assert_array_equal(r.ts.terminated, TERMINATED)
    np.testing.assert_array_equal(r.ts.truncated, TRUNCATED)
    assert not (r.ts.terminated & r.ts.truncated).any()
    np.testing.assert_array_equal(np.stack([s.time for s in r.states]), TIME_AFTER)
    np.testing.assert_array_equal(np.stack([s.core.count for s in r.states]), FINAL_COUNT * ~DONE)


def test_same_step_auto_reset() -> None:
    """Where an episode ends, `obs` is the new episode's first observation (counter 0, fresh
    tag) and `final_obs` the old episode's last (its counter, its tag); elsewhere they agree."""
    r = _rollout(4, ACTIONS, steps=8)
    obs, final = r.ts.obs, r.ts.final_obs
    np.testing.assert_array_equal(final[..., 0], FINAL_COUNT)
    np.testing.assert_array_equal(obs[..., 0], FINAL_COUNT * ~DONE)
    np.testing.assert_array_equal(obs[~DONE], final[~DONE])
    # The tag each step acted in: the reset's, then whatever `obs` carried after the last step.
    prev_tag = np.concatenate([r.reset_ts.obs[None, :, 1:], obs[:-1, :, 1:]])
    np.testing.assert_array_equal(final[..., 1:], prev_tag)  # final_obs: the old episode
    changed = np.any(obs[..., 1:] != prev_tag, axis=-1)
    np.testing.assert_array_equal(changed, DONE)  # a new tag exactly where an episode ended
    # The core state carried on is the new episode's too.
    np.testing.assert_array_equal(np.stack([s.core.tag for s in r.states]), obs[..., 1:])


def test_step_restarting_starts_ended_episodes_from_the_first_state() -> None:
    """`step_restarting` (run_episodes' step): the same rewards, flags and statistics as `step`,
    but an env whose episode ends takes the first reset's state and observation (counter 0 and
    that episode's tag) instead of a fresh draw."""
    r = _rollout(4, ACTIONS, steps=8)
    j = _counter_env(len(ACTIONS), 4)
    key = jax.random.key(0)
    state, first_ts = j.reset(key)
    step = jax.jit(lambda s, a, k: j.env.step_restarting(s, a, k, (state.core, first_ts.obs)))
    action = jnp.asarray(ACTIONS, jnp.int32)
    timesteps = []
    for t in range(8):
        state, ts = step(state, action, jax.random.fold_in(key, t + 1))
        timesteps.append(jax.device_get(ts))
        np.testing.assert_array_equal(state.core.tag, first_ts.obs[:, 1:])
    restarted = jax.tree.map(lambda *xs: np.stack(xs), *timesteps)
    for name in ("reward", "terminated", "truncated"):
        np.testing.assert_array_equal(getattr(restarted, name), getattr(r.ts, name))
    for name, value in r.ts.info.items():
        np.testing.assert_array_equal(restarted.info[name], value)
    # Every episode is the first one again: its tag in both observations, counters as `step`'s.
    tags = np.broadcast_to(np.asarray(first_ts.obs)[:, 1:], restarted.obs[..., 1:].shape)
    np.testing.assert_array_equal(restarted.final_obs[..., 0], FINAL_COUNT)
    np.testing.assert_array_equal(restarted.obs[..., 0], FINAL_COUNT * ~DONE)
    np.testing.assert_array_equal(restarted.final_obs[..., 1:], tags)
    np.testing.assert_array_equal(restarted.obs[..., 1:], tags)


def test_episode_statistics() -> None:
    """info["episode_done"] marks ends; return and length there are the hand-computed sums."""
    r = _rollout(4, ACTIONS, steps=8)
    info = r.ts.info
    np.testing.assert_array_equal(info["episode_done"], DONE)
    expected_return = np.array([9.0, 4.0, 8.0])
    expected_length = np.array([3, 4, 2])
    t, e = np.nonzero(DONE)
    np.testing.assert_array_equal(info["episode_return"][t, e], expected_return[e])
    np.testing.assert_array_equal(info["episode_length"][t, e], expected_length[e])
    # And the running sums restart from zero after each end.
    last = r.states[-1]
    np.testing.assert_array_equal(last.episode_return, [2.0 + 3.0, 0.0, 0.0])
    np.testing.assert_array_equal(last.episode_length, [2, 0, 0])


def test_termination_on_the_time_limit_step_is_not_truncation() -> None:
    """With a limit of 3, env 0 (+1) terminates on step 3 exactly when time runs out: that is a
    termination only. Env 1 (+0) is truncated on the same step."""
    r = _rollout(3, [1, 0], steps=3)
    np.testing.assert_array_equal(r.ts.terminated, [[0, 0], [0, 0], [1, 0]])
    np.testing.assert_array_equal(r.ts.truncated, [[0, 0], [0, 0], [0, 1]])
    np.testing.assert_array_equal(r.ts.info["episode_return"][2], [2.0 + 3.0 + 4.0, 3.0])
    np.testing.assert_array_equal(r.ts.info["episode_length"][2], [3, 3])
    np.testing.assert_array_equal(r.states[-1].time, [0, 0])


def test_vmap_over_seeds_matches_single_runs() -> None:
    """Seeds are a vmap axis: a vmapped reset+step equals the per-seed runs."""
    j = _counter_env(3, 4)
    keys = jax.random.split(jax.random.key(5), 2)
    action = jnp.asarray(ACTIONS, jnp.int32)

    def run(key: Key) -> TimeStep:
        state, _ = j.env.reset(key)
        for t in range(3):
            state, ts = j.env.step(state, action, jax.random.fold_in(key, t))
        return ts

    batched = jax.jit(jax.vmap(run))(keys)
    for i in range(2):
        single = jax.jit(run)(keys[i])
        jax.tree.map(lambda b, s, i=i: np.testing.assert_array_equal(b[i], s), batched, single)
    assert batched.obs.shape == (2, 3, 3)
    np.testing.assert_array_equal(batched.terminated[:, 0], [True, True])


def test_with_num_envs() -> None:
    """`with_num_envs` changes the batch only, and leaves the original env alone."""
    env = envs.make(EnvConfig("CartPole-v1", num_envs=3, max_episode_steps=77))
    wider = env.with_num_envs(5)
    assert env.spec.num_envs == 3 and wider.spec.num_envs == 5
    assert wider.spec == dataclasses.replace(env.spec, num_envs=5)
    _, ts = jax.jit(wider.reset)(jax.random.key(0))
    assert ts.obs.shape == (5, 4) and ts.reward.shape == (5,)
    assert ts.info["episode_return"].shape == (5,)
    j = _counter_env(3, 4)
    assert j.env.with_num_envs(7).core is j.env.core


def test_random_actions_discrete() -> None:
    """Discrete: int32[num_envs] in [0, n), every action drawn about equally often."""
    spec = _counter_spec(3000, 4)
    a = np.asarray(random_actions(spec, jax.random.key(1)))
    assert a.shape == (3000,) and a.dtype == np.int32
    counts = np.bincount(a, minlength=4)
    assert counts[3] == 0 and a.min() == 0
    np.testing.assert_allclose(counts[:3], 1000, atol=100)  # ~5.5 sigma
    b = np.asarray(random_actions(spec, jax.random.key(2)))
    assert (a != b).mean() > 0.5


def test_random_actions_box() -> None:
    """Box: float[num_envs, *shape] inside per-dimension bounds, filling them uniformly."""
    low, high = np.array([-1.0, 0.0], np.float32), np.array([1.0, 5.0], np.float32)
    spec = dataclasses.replace(_counter_spec(4000, 4), action_space=Box(low, high, (2,)))
    a = np.asarray(random_actions(spec, jax.random.key(3)))
    assert a.shape == (4000, 2) and a.dtype == np.float32
    assert np.all(a >= low) and np.all(a <= high)
    span = high - low
    assert np.all(a.min(0) - low < 0.01 * span) and np.all(high - a.max(0) < 0.01 * span)
    np.testing.assert_allclose(a.mean(0), (low + high) / 2, atol=0.03 * span.max())
    pendulum = envs.make(EnvConfig("Pendulum-v1", num_envs=6))
    p = np.asarray(random_actions(pendulum.spec, jax.random.key(4)))
    assert p.shape == (6, 1) and np.all(np.abs(p) <= 2.0)


def test_random_actions_hybrid() -> None:
    """Hybrid: (choice int32[num_envs] uniform over the choices, parameters float32[num_envs, P]
    uniform within every parameter's bounds), drawn independently of each other."""
    low, high = np.array([0.0, -1.0, 10.0], np.float32), np.array([1.0, 1.0, 20.0], np.float32)
    space = Hybrid(Discrete(2), Box(low, high, (3,)), ((0, 1), (1, 3)))
    spec = dataclasses.replace(_counter_spec(4000, 4), action_space=space)
    choices, parameters = jax.device_get(random_actions(spec, jax.random.key(5)))
    assert choices.shape == (4000,) and choices.dtype == np.int32
    np.testing.assert_allclose(np.bincount(choices, minlength=2), 2000, atol=150)  # ~4.7 sigma
    assert parameters.shape == (4000, 3) and parameters.dtype == np.float32
    assert np.all(parameters >= low) and np.all(parameters <= high)
    span = high - low
    assert np.all(parameters.min(0) - low < 0.01 * span)
    assert np.all(high - parameters.max(0) < 0.01 * span)
    np.testing.assert_allclose(parameters.mean(0), (low + high) / 2, atol=0.03 * span.max())
    # The parameters do not depend on the choice drawn with them.
    by_choice = [parameters[choices == k, 2].mean() for k in (0, 1)]
    assert abs(by_choice[0] - by_choice[1]) < 0.5


def test_success_is_the_verdict_on_the_state_an_episode_ended_in() -> None:
    """With success "the counter ends at exactly 3", `episode_success` judges each step's state
    before any reset: env 0 (+1) ends its episodes at 3 (successes), env 2 (+2) at 4 and env 1
    (+0) is truncated at 0 (failures). False at reset; a spec must say it reports success."""
    spec = dataclasses.replace(_counter_spec(3, 4), reports_success=True)
    env = VectorEnv(EnvCore(_counter_reset, _counter_step), spec, lambda s: s.count == 3)
    state, ts = jax.jit(env.reset)(jax.random.key(0))
    np.testing.assert_array_equal(ts.info["episode_success"], [False] * 3)
    step, action, successes = jax.jit(env.step), jnp.asarray(ACTIONS, jnp.int32), []
    for t in range(8):
        state, ts = step(state, action, jax.random.key(t))
        successes.append(np.asarray(ts.info["episode_success"]))
    np.testing.assert_array_equal(np.stack(successes), FINAL_COUNT == 3)
    np.testing.assert_array_equal(np.stack(successes) & DONE, TERMINATED & (FINAL_COUNT == 3))
    with pytest.raises(ValueError, match=r"Counter: spec\.reports_success=False needs a success"):
        VectorEnv(EnvCore(_counter_reset, _counter_step), _counter_spec(3, 4), lambda s: s.count)
