"""The JAX-native family through gymnax: classic control run inside the compiled program.

gymnax envs have no renderer, but each has a Gymnasium twin whose dynamics it matches step for
step (tests/envs/test_gymnax_envs.py): videos run the episode in JAX and draw every state by
writing it into the twin's `unwrapped.state` and calling its `render()` (`GymnaxEnv`).
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from typing import Any

import jax.numpy as jnp
import numpy as np

from envs import GYMNAX_MAX_EPISODE_STEPS
from jaxrl.datatypes import Box, Discrete, EnvSpec, Space
from jaxrl.env import EnvCore, VectorEnv


class _DeferredModule(types.ModuleType):
    """Stands in for a module until one of its attributes is read, then reads the real one's.

    `__spec__` is set, so the import system, which reads it off any module in `sys.modules`,
    does not trigger the load (as it does through `importlib.util.LazyLoader`)."""

    def __init__(self, name: str, **submodules: types.ModuleType) -> None:
        super().__init__(name)
        self.__spec__ = None
        self.__dict__.update(submodules)

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        if sys.modules.get(self.__name__) is self:  # read during the import it stands in for
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attribute)


def _import_gymnax() -> types.ModuleType:
    """`import gymnax` without loading seaborn, scipy.stats and matplotlib.pyplot.

    gymnax's `__init__` imports every env, and its Pong and four-rooms import those plotting
    libraries at module level for their `render`, which we never call. They stand in as
    `_DeferredModule`s while gymnax imports, and load if gymnax's own renderers are used. Where
    one of them is imported already, gymnax imports as usual."""
    pyplot, colors = (_DeferredModule(f"matplotlib.{name}") for name in ("pyplot", "colors"))
    stand_ins = {
        "seaborn": _DeferredModule("seaborn"),
        "matplotlib": _DeferredModule("matplotlib", pyplot=pyplot, colors=colors),
        "matplotlib.pyplot": pyplot,
        "matplotlib.colors": colors,
    }
    if any(name in sys.modules for name in stand_ins):
        return importlib.import_module("gymnax")
    sys.modules.update(stand_ins)
    try:
        return importlib.import_module("gymnax")
    finally:
        for name, module in stand_ins.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]


gymnax = _import_gymnax()
gymnax_spaces = gymnax.environments.spaces

# The gymnax state fields that make up each twin's `unwrapped.state`, in Gymnasium's order, and
# extra attributes the twin's `render` reads.
TWIN_STATE: dict[str, tuple[str, ...]] = {
    "CartPole-v1": ("x", "x_dot", "theta", "theta_dot"),
    "Pendulum-v1": ("theta", "theta_dot"),
    "Acrobot-v1": ("joint_angle1", "joint_angle2", "velocity_1", "velocity_2"),
    "MountainCar-v0": ("position", "velocity"),
    "MountainCarContinuous-v0": ("position", "velocity"),
}
TWIN_ATTRIBUTES: dict[str, tuple[str, ...]] = {"Pendulum-v1": ("last_u",)}  # torque arrow


class TwinRenderer:
    """Draws single (unbatched) gymnax states of one env with its Gymnasium twin."""

    def __init__(self, name: str) -> None:
        import gymnasium

        # pygame draws offscreen: no display or sound card wanted (nor SDL's complaints about them).
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
        self.twin = gymnasium.make(name, render_mode="rgb_array")
        self.twin.reset()  # Gymnasium renders only after a reset; `draw` sets the whole state
        self.fields, self.attributes = TWIN_STATE[name], TWIN_ATTRIBUTES.get(name, ())
        self.fps = int(self.twin.metadata["render_fps"])

    def draw(self, state: Any) -> np.ndarray:
        self.twin.unwrapped.state = np.array([float(getattr(state, f)) for f in self.fields])
        for name in self.attributes:
            setattr(self.twin.unwrapped, name, float(getattr(state, name)))
        return self.twin.render()

    def close(self) -> None:
        self.twin.close()


class GymnaxEnv(VectorEnv):
    """A gymnax env batched by `VectorEnv`, drawn for videos through its Gymnasium twin."""

    def make_state_renderer(self) -> TwinRenderer:
        return TwinRenderer(self.spec.name)


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


def make_gymnax(name: str, num_envs: int, max_episode_steps: int | None) -> GymnaxEnv:
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
    return GymnaxEnv(EnvCore(reset, step), spec)
