"""run_episodes: one episode per env, counted exactly, on a deterministic toy env.

The toy env adds the action to a counter, pays 1 + the new counter and terminates once the
counter reaches 10; the policy gives each env a fixed increment, so every return, length, loop
count and acted-on observation can be written down by hand.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import io_callback

import envs
from jaxrl.config import EnvConfig
from jaxrl.datatypes import Array, Box, Discrete, EnvSpec, Key, TimeStep
from jaxrl.env import EnvCore, VectorEnv, random_actions
from jaxrl.rollout import Episodes, run_episodes, while_each


def _obs(count: Array) -> Array:
    return jnp.stack([count, 2.0 * count + 1.0])


def _reset(key: Key) -> tuple[Array, Array]:
    count = jnp.zeros((), jnp.float32)
    return count, _obs(count)


def _step(key: Key, count: Array, action: Array) -> tuple[Array, Array, Array, Array]:
    count = count + action.astype(jnp.float32)
    return count, _obs(count), 1.0 + count, count >= 10.0


def _toy_env(num_envs: int, max_episode_steps: int) -> VectorEnv:
    spec = EnvSpec(
        name="Toy",
        family="jax",
        observation_space=Box(np.full(2, -np.inf), np.full(2, np.inf), (2,)),
        action_space=Discrete(6),
        num_envs=num_envs,
        max_episode_steps=max_episode_steps,
    )
    return VectorEnv(EnvCore(_reset, _step), spec)


@cache
def _run_toy(increments: tuple[int, ...], max_episode_steps: int) -> Episodes:
    """run_episodes under jit with the fixed per-env increments as the policy."""
    env = _toy_env(len(increments), max_episode_steps)
    action = jnp.asarray(increments, jnp.int32)
    run = jax.jit(lambda key: run_episodes(env, lambda obs, k: action, key))
    return jax.device_get(run(jax.random.key(0)))


def _acted_on(increments: tuple[int, ...], lengths: list[int]) -> np.ndarray:
    """The observations each env acted on in its first episode: counters 0, a, 2a, ..."""
    counts = np.concatenate([np.arange(n) * a for a, n in zip(increments, lengths, strict=True)])
    return np.stack([counts, 2.0 * counts + 1.0], axis=1)


def _assert_stats(episodes: Episodes, samples: np.ndarray) -> None:
    stats = episodes.obs_stats
    assert float(stats.count) == len(samples)
    np.testing.assert_allclose(stats.mean, samples.mean(0), rtol=1e-5)
    np.testing.assert_allclose(stats.m2 / stats.count, samples.var(0), rtol=1e-5)


def test_returns_lengths_and_truncation() -> None:
    """Increments (1, 2, 5, 0) with a limit of 12. By hand:
    env 0: counters 1..10 -> 10 steps, return 10 + (1 + ... + 10) = 65
    env 1: 2, 4, ..., 10  ->  5 steps, return 5 + 30 = 35
    env 2: 5, 10          ->  2 steps, return 2 + 15 = 17
    env 3: stays 0        -> truncated after 12 steps, return 12.
    The loop runs 12 times (env 3 keeps it going), so 12 * 4 = 48 steps are computed, including
    the ones envs 0-2 spend in later episodes, which must count neither toward returns nor stats.
    """
    inc = (1, 2, 5, 0)
    ep = _run_toy(inc, 12)
    np.testing.assert_array_equal(ep.returns, [65.0, 35.0, 17.0, 12.0])
    np.testing.assert_array_equal(ep.lengths, [10, 5, 2, 12])
    np.testing.assert_array_equal(ep.truncated, [False, False, False, True])  # env 3 only
    assert ep.returns.dtype == np.float32 and ep.lengths.dtype == np.int32
    assert int(ep.steps_computed) == 48
    _assert_stats(ep, _acted_on(inc, [10, 5, 2, 12]))
    assert ep.successes is None  # the toy defines no success


def test_successes_of_an_env_that_reports_them() -> None:
    """Success "the counter ends at exactly 10", increments (1, 2, 5, 3, 0), limit 12: envs 0-2
    end at 10 (successes), env 3 at 12 (3, 6, 9, 12) and env 4 is truncated at 0 (failures)."""
    toy = _toy_env(5, 12)
    spec = dataclasses.replace(toy.spec, reports_success=True)
    env = VectorEnv(toy.core, spec, lambda count: count == 10.0)
    action = jnp.asarray((1, 2, 5, 3, 0), jnp.int32)
    ep = jax.jit(lambda key: run_episodes(env, lambda obs, k: action, key))(jax.random.key(0))
    np.testing.assert_array_equal(ep.successes, [True, True, True, False, False])
    np.testing.assert_array_equal(ep.lengths, [10, 5, 2, 4, 12])


def test_stops_when_every_env_is_done() -> None:
    """Increments (1, 2, 5, 5): the slowest env ends after 10 steps, so the loop stops there
    (10 * 4 = 40 steps computed) although the time limit would allow 12."""
    inc = (1, 2, 5, 5)
    ep = _run_toy(inc, 12)
    np.testing.assert_array_equal(ep.returns, [65.0, 35.0, 17.0, 17.0])
    np.testing.assert_array_equal(ep.lengths, [10, 5, 2, 2])
    assert int(ep.steps_computed) == 40
    # obs_stats: 19 observations; the counters are 0..9, 0,2,..,8, 0,5, 0,5.
    _assert_stats(ep, _acted_on(inc, [10, 5, 2, 2]))
    assert float(ep.obs_stats.count) == 19


def test_cartpole_random_policy() -> None:
    """On CartPole (reward 1 per step) each return equals its length, every length is within
    the limit, the loop ran as long as the longest episode, and the stats saw sum(lengths)
    observations."""
    env = envs.make(EnvConfig("CartPole-v1", num_envs=8, max_episode_steps=20))

    def policy(obs: Array, key: Key) -> Array:
        return random_actions(env.spec, key)

    ep = jax.device_get(jax.jit(lambda k: run_episodes(env, policy, k))(jax.random.key(3)))
    np.testing.assert_array_equal(ep.returns, ep.lengths.astype(np.float32))
    assert np.all(ep.lengths >= 1) and np.all(ep.lengths <= 20)
    assert len(set(ep.lengths.tolist())) > 1  # some episodes terminated, not all truncated
    assert not ep.truncated[ep.lengths < 20].any()  # the limit cuts only the 20-step ones
    assert int(ep.steps_computed) == ep.lengths.max() * 8
    assert float(ep.obs_stats.count) == ep.lengths.sum()
    # CartPole starts within ±0.05 and the pole falls at ±0.21 rad: the acted-on mean is small.
    assert np.all(np.abs(ep.obs_stats.mean[[0, 2]]) < 0.21)


@dataclasses.dataclass(frozen=True)
class _AnyEnv:
    """An `Env` that is not a `VectorEnv`: run_episodes steps it with its auto-resetting `step`."""

    inner: VectorEnv

    @property
    def spec(self) -> EnvSpec:
        return self.inner.spec

    def reset(self, key: Key) -> tuple[Any, TimeStep]:
        return self.inner.reset(key)

    def step(self, state: Any, action: Array, key: Key) -> tuple[Any, TimeStep]:
        return self.inner.step(state, action, key)

    def with_num_envs(self, num_envs: int) -> _AnyEnv:
        return _AnyEnv(self.inner.with_num_envs(num_envs))


def test_restarting_a_vector_env_leaves_the_episodes_unchanged() -> None:
    """On a `VectorEnv` run_episodes restarts ended envs from their first state instead of drawing
    fresh resets; the counted episodes are bit for bit those of the auto-resetting `step`, here
    with rewards and resets drawn from the keys and a random policy."""

    def reset(key: Key) -> tuple[Array, Array]:
        count = jax.random.uniform(key, (), maxval=3.0)
        return count, _obs(count)

    def step(key: Key, count: Array, action: Array) -> tuple[Array, Array, Array, Array]:
        count = count + action.astype(jnp.float32)
        return count, _obs(count), jax.random.uniform(key) + count, count >= 10.0

    env = VectorEnv(EnvCore(reset, step), _toy_env(16, 12).spec)
    policy = lambda obs, k: random_actions(env.spec, k)
    run = lambda e: jax.device_get(jax.jit(lambda k: run_episodes(e, policy, k))(jax.random.key(5)))
    restarted, stepped = run(env), run(_AnyEnv(env))
    assert len(set(stepped.lengths.tolist())) > 2  # episodes of several lengths ended and restarted
    for a, b in zip(jax.tree.leaves(restarted), jax.tree.leaves(stepped), strict=True):
        np.testing.assert_array_equal(a, b)


def _doubling(limits: Array, with_io: bool):
    """x doubles while i < limit: instance k ends with (limit_k, 2**limit_k)."""
    calls = []

    def body(carry):
        i, x = carry
        if with_io:  # a side effect in the loop, as a host env's step on GPU is
            i = io_callback(lambda v: calls.append(1) or v, jax.ShapeDtypeStruct((), jnp.int32), i)
        return i + 1, x * 2

    def run(limit):
        return while_each(lambda carry: carry[0] < limit, body, (jnp.int32(0), jnp.float32(1)))

    return jax.jit(jax.vmap(run))(limits), calls


def test_while_each_stops_each_instance_at_its_own_end_with_an_unbatched_predicate() -> None:
    limits = jnp.array([1, 3, 0], jnp.int32)
    (i, x), _ = _doubling(limits, with_io=False)
    np.testing.assert_array_equal(i, [1, 3, 0])
    np.testing.assert_array_equal(x, [2.0, 8.0, 1.0])
    # Nested vmap (seeds x hyperparameter values) reduces every axis to one predicate too.
    nested = jax.vmap(jax.vmap(lambda n: while_each(lambda c: c < n, lambda c: c + 1, n * 0)))
    np.testing.assert_array_equal(nested(jnp.array([[2, 5], [0, 1]])), [[2, 5], [0, 1]])
    jaxpr = jax.make_jaxpr(nested)(jnp.array([[2, 5], [0, 1]]))
    (loop,) = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "while"]
    assert loop.params["cond_jaxpr"].out_avals[0].shape == ()  # one predicate for the batch


def test_while_each_takes_io_callbacks_that_a_batched_while_loop_refuses() -> None:
    limits = jnp.array([1, 3], jnp.int32)
    (i, x), calls = _doubling(limits, with_io=True)
    np.testing.assert_array_equal(i, [1, 3])
    np.testing.assert_array_equal(x, [2.0, 8.0])
    # 3 iterations (the longest instance's) x 2 instances: a finished instance's body still runs,
    # its result discarded, as in JAX's own batched loop.
    assert len(calls) == 6
    loop = lambda n: jax.lax.while_loop(
        lambda c: c < n,
        lambda c: io_callback(lambda v: v + 1, jax.ShapeDtypeStruct((), jnp.int32), c),
        n * 0,
    )
    with pytest.raises(Exception, match="Unordered IO effects not supported in while_loop"):
        jax.jit(jax.vmap(loop))(limits)
