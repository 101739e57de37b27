"""Unrolls of (policy, env) inside the compiled program."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxrl import normalize
from jaxrl.datatypes import Agent, Array, Key, PyTree
from jaxrl.env import Env, VectorEnv
from jaxrl.normalize import RunningStats

Policy = Callable[[Array, Key], Array]  # (batched obs, key) -> batched action
# (batched obs, key, memory) -> (batched action, memory): a policy that carries memory
MemoryPolicy = Callable[[Array, Key, PyTree], tuple[Array, PyTree]]


class Episodes(NamedTuple):
    returns: Array  # float32[B]: return of each env's first episode
    lengths: Array  # int32[B]
    # bool[B]: whether each env's first episode was cut by a time limit rather than ended by
    # the env (a pole that never fell, a game that ran out of frames)
    truncated: Array
    steps_computed: Array  # int32: loop iterations x B, finished envs included
    obs_stats: RunningStats  # statistics of the observations acted on (finished envs masked out)
    # bool[B]: whether each env's first episode ended in success; None unless the env's spec
    # `reports_success`.
    successes: Array | None = None


@jax.custom_batching.custom_vmap
def any_in_batch(running: Array) -> Array:
    """`running` itself; under vmap (nested or not), whether any instance of the batch runs, as
    one unbatched value."""
    return running


@any_in_batch.def_vmap
def _any_in_batch_rule(axis_size: int, in_batched: tuple[bool], running: Array):
    if not in_batched[0]:
        return running, False
    return any_in_batch(jnp.any(running, axis=0)), False  # an outer vmap reduces its own axis


def while_each(
    running: Callable[[PyTree], Array], body: Callable[[PyTree], PyTree], carry: PyTree
) -> PyTree:
    """`lax.while_loop(running, body, carry)` with its meaning under vmap (each instance stops at
    its own end and is carried unchanged after it), written out so that the loop's predicate is
    never batched: JAX refuses a batched predicate around an `io_callback`, the host envs' call on
    GPU and TPU (envs/host.py). The loop runs while any instance of the batch runs."""

    def step(carry: PyTree) -> PyTree:
        active = running(carry)
        return jax.tree.map(lambda new, old: jnp.where(active, new, old), body(carry), carry)

    return jax.lax.while_loop(lambda carry: any_in_batch(running(carry)), step, carry)


def run_episodes(
    env: Env, policy: Policy | MemoryPolicy, key: Key, memory: PyTree = None
) -> Episodes:
    """Run every env of the batch for exactly one episode, stopping as soon as all have ended.
    Given the envs' initial `memory`, `policy` is a `MemoryPolicy` and the memory is carried from
    each step to the next.

    A `while_loop` rather than a fixed-length scan, so a batch whose episodes all end early costs
    only the steps it needed; steps after an env's episode ended are computed but not counted.
    An episode is what the env's statistics say (`info["episode_done"]`, `"episode_return"`): for
    Atari that is the whole game with its unclipped score, although training sees a life loss as
    `terminated` and clipped rewards.
    """
    n, reports_success = env.spec.num_envs, env.spec.reports_success
    obs_dim = env.spec.observation_space.shape
    reset_key, loop_key = jax.random.split(key)
    env_state, ts = env.reset(reset_key)
    step = env.step
    if isinstance(env, VectorEnv):  # what follows an episode's end is never counted here
        step = functools.partial(env.step_restarting, first=(env_state.core, ts.obs))

    def cond(carry):
        _, _, alive, *_, t, _, _ = carry
        return jnp.any(alive) & (t < env.spec.max_episode_steps)

    def body(carry):
        env_state, obs, alive, returns, lengths, truncated, successes, stats, t, key, memory = carry
        key, act_key, step_key = jax.random.split(key, 3)
        stats = normalize.update(stats, obs, alive)
        if memory is None:
            action = policy(obs, act_key)
        else:
            action, memory = policy(obs, act_key, memory)
        env_state, ts = step(env_state, action, step_key)
        ended = alive & ts.info["episode_done"]
        returns = jnp.where(ended, ts.info["episode_return"], returns)
        lengths = jnp.where(ended, ts.info["episode_length"], lengths)
        truncated = jnp.where(ended, ts.truncated & ~ts.terminated, truncated)
        if reports_success:
            successes = jnp.where(ended, ts.info["episode_success"], successes)
        alive = alive & ~ended
        return (
            env_state,
            ts.obs,
            alive,
            returns,
            lengths,
            truncated,
            successes,
            stats,
            t + 1,
            key,
            memory,
        )

    per_env_stats = RunningStats(
        jnp.zeros((n,), jnp.float32),
        jnp.zeros((n, *obs_dim), jnp.float32),
        jnp.zeros((n, *obs_dim), jnp.float32),
    )
    carry = (
        env_state,
        ts.obs,
        jnp.ones((n,), bool),
        jnp.zeros((n,), jnp.float32),
        jnp.zeros((n,), jnp.int32),
        jnp.zeros((n,), bool),
        jnp.zeros((n,), bool),
        per_env_stats,
        jnp.zeros((), jnp.int32),
        loop_key,
        memory,
    )
    _, _, _, returns, lengths, truncated, successes, stats, t, *_ = while_each(cond, body, carry)
    successes = successes if reports_success else None
    return Episodes(returns, lengths, truncated, t * n, normalize.merge(stats), successes)


def evaluate(
    agent: Agent, agent_state: PyTree, env: Env, key: Key, deterministic: bool = True
) -> Episodes:
    """One episode of `agent` per env of `env`, run in parallel: deterministic (a run's
    evaluations), or acting as the agent explores (`jaxrl.evaluate deterministic=false`). An
    agent that acts with memory (options) is evaluated with it, deterministically."""
    if agent.act_with_memory is not None:
        policy = lambda obs, k, memory: agent.act_with_memory(agent_state, obs, memory, k)
        return run_episodes(env, policy, key, agent.initial_memory(env.spec.num_envs))
    return run_episodes(env, lambda obs, k: agent.act(agent_state, obs, k, deterministic), key)
