"""The JAX-native family through gymnax: classic control run inside the compiled program."""

from __future__ import annotations

import gymnax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces as gymnax_spaces

from envs import GYMNAX_MAX_EPISODE_STEPS
from jaxrl.datatypes import Box, Discrete, EnvSpec, Space
from jaxrl.env import EnvCore, VectorEnv


def _space(space: object) -> Space:
    if isinstance(space, gymnax_spaces.Discrete):
        return Discrete(int(space.n))
    if isinstance(space, gymnax_spaces.Box):
        shape = tuple(space.shape) if space.shape else (1,)
        low = np.broadcast_to(np.asarray(space.low, np.float32), shape).copy()
        high = np.broadcast_to(np.asarray(space.high, np.float32), shape).copy()
        # gymnax marks "unbounded" with float32 max; say inf so agents do not squash to it.
        low[low <= -3e38] = -np.inf
        high[high >= 3e38] = np.inf
        return Box(low, high, shape)
    raise TypeError(f"unsupported gymnax space {type(space).__name__}")


def make_gymnax(name: str, num_envs: int, max_episode_steps: int | None) -> VectorEnv:
    """Wrap gymnax's `step_env`/`reset_env` (no gymnax auto-reset) into our VectorEnv."""
    env, params = gymnax.make(name)
    # Older gymnax releases fold `time >= max_steps_in_episode` into `step_env`'s done flag, which
    # would report our time limit as a termination; lift that cap out of reach, VectorEnv truncates.
    params = params.replace(max_steps_in_episode=np.iinfo(np.int32).max)
    action_space = _space(env.action_space(params))
    observation_space = _space(env.observation_space(params))
    assert isinstance(observation_space, Box)

    def reset(key):
        obs, state = env.reset_env(key, params)
        return state, obs.astype(jnp.float32)

    def step(key, state, action):
        if isinstance(action_space, Box) and action.ndim == 0:
            action = action[None]
        obs, state, reward, terminated, _ = env.step_env(key, state, action, params)
        return state, obs.astype(jnp.float32), reward, terminated

    spec = EnvSpec(
        name=name,
        family="jax",
        observation_space=observation_space,
        action_space=action_space,
        num_envs=num_envs,
        max_episode_steps=max_episode_steps or GYMNAX_MAX_EPISODE_STEPS[name],
    )
    return VectorEnv(EnvCore(reset, step), spec)
