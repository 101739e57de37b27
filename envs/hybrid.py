"""Our hybrid-action (parameterised-action) JAX-native envs behind `envs.make`: `Platform-v0`
(envs/platform.py), `Goal-v0` (envs/goal.py), `HardMove-v0` (envs/hardmove.py) and
`CatchPoint-v0` (envs/catchpoint.py).

Each is an `EnvCore` batched by `VectorEnv`, with a `Hybrid` action space: the action is
`(choice int32[B], parameters float32[B, P])`, every choice's parameters side by side. Each defines
success (the goal reached: HyAR's success rate), which `VectorEnv` reports at every episode's end
for evaluations to average. Hard Move takes its number of actuators as a keyword,
`env=HardMove-v0 env.kwargs.num_actuators=8`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from envs import HYBRID_MAX_EPISODE_STEPS, catchpoint, goal, hardmove, platform
from envs.configs import HardMoveConfig
from jaxrl.config import EnvConfig
from jaxrl.datatypes import Array, Box, Discrete, EnvSpec, Hybrid
from jaxrl.env import EnvCore, VectorEnv


class HybridGame(NamedTuple):
    """What `make_hybrid` needs of one env: its core, its action layout and its success test."""

    core: EnvCore
    num_choices: int
    parameter_low: np.ndarray
    parameter_high: np.ndarray
    parameter_slices: tuple[tuple[int, int], ...]
    success: Callable[[Any], Array]


# The envs whose module fixes their action layout (Hard Move's depends on its actuators).
FIXED_LAYOUT = {module.NAME: module for module in (platform, goal, catchpoint)}


def parameter_prior(env_name: str) -> tuple[np.ndarray, np.ndarray] | None:
    """The env's hand-made parameter policy as a linear map of the observation, (weights
    float32[P, obs], bias float32[P]) in [−1, 1] parameter units; None for envs without one.
    Only Goal has one (MP-DQN's, `envs.goal.PARAMETER_PRIOR`)."""
    return {goal.NAME: goal.PARAMETER_PRIOR}.get(env_name)


def hybrid_game(cfg: EnvConfig) -> HybridGame:
    """The env `cfg.id` names (Hard Move with `cfg`'s actuators)."""
    if cfg.id in FIXED_LAYOUT:
        module = FIXED_LAYOUT[cfg.id]
        return HybridGame(
            module.CORE,
            len(module.PARAMETER_SLICES),  # one slice per choice (`Hybrid` checks it)
            module.PARAMETER_LOW,
            module.PARAMETER_HIGH,
            module.PARAMETER_SLICES,
            module.success,
        )
    assert isinstance(cfg, HardMoveConfig), cfg
    game = hardmove.HardMove(cfg.num_actuators)
    return HybridGame(
        game.core(),
        game.num_choices,
        game.parameter_low,
        game.parameter_high,
        game.parameter_slices,
        hardmove.success,
    )


def make_hybrid(cfg: EnvConfig, num_envs: int) -> VectorEnv:
    """A hybrid-action env batched by `VectorEnv`, its success reported in episode statistics.
    Observations are unbounded: Goal's scaled features leave [-1, 1], Hard Move's are offsets."""
    game = hybrid_game(cfg)
    obs = jax.eval_shape(game.core.reset, jax.random.key(0))[1]
    unbounded = np.full(obs.shape, np.inf, np.float32)
    spec = EnvSpec(
        name=cfg.id,
        family="jax",
        observation_space=Box(-unbounded, unbounded, obs.shape),
        action_space=Hybrid(
            Discrete(game.num_choices),
            Box(game.parameter_low, game.parameter_high, game.parameter_low.shape),
            game.parameter_slices,
        ),
        num_envs=num_envs,
        max_episode_steps=cfg.max_episode_steps or HYBRID_MAX_EPISODE_STEPS[cfg.id],
        reports_success=True,
    )
    return VectorEnv(game.core, spec, game.success)
