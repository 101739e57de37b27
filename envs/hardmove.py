"""HyAR's "Hard Move" (Li et al., ICLR 2022), JAX-native: `HardMove-v0`. A point agent drives n
equally spaced actuators to reach a target; a choice is which actuators fire (2^n of them), its
parameter how hard.

Followed: github.com/TJU-DRL-LAB/self-supervised-rl, `RL_with_Action_Representation/HyAR`, commit
ece9562: `multiagent/environment.py` (`MultiAgentEnv._set_action1`, branch `action[0][0] == 8`,
`get_movements`, `get_action_motions`, `binaryEncoding`), `multiagent/core.py` (`World`, its
physics), `multiagent/scenarios/simple_move_4_direction_v1.py` (start, reward, observation), and
`HyAR_RL/main_embedding_hard_move_td3.py` with the `Raw_RL/main_hard_move_*.py` scripts (how
they drive it: the action layout, the 30-step cap, success and the episode end). The code here is
ours.

* Actuators: actuator k of n points at angle 2 pi k / n, its direction rounded to 3 decimals as
  HyAR rounds it (`actuator_directions`). Choice c fires actuator k when bit n-1-k of c is set
  (HyAR's binary encoding puts actuator 0 in the most significant bit). A choice's motion is the
  sum of its actuators' directions, divided by the longest such sum over all choices
  (`choice_motions`), so the longest motion has length 1; choice 0 fires none, and opposite
  actuators cancel.
* Parameters: one magnitude per choice, float32[2^n], in [-1, 1] (HyAR's parameter bounds; a
  negative magnitude moves backwards). Not n magnitudes, one per actuator: HyAR's `pad_action_`
  puts the decoded parameter at the choice's index of a 2^n list and the env reads that entry
  alone, so `PARAMETER_SLICES[c]` is (c, c + 1). Like HyAR's env we do not clip it.
* Physics, one `World.step` of HyAR's multi-agent particle world per env step: force =
  2 * magnitude * motion; velocity <- 0.75 velocity + 0.1 force (damping 0.25, dt 0.1, mass 1);
  position <- position + 0.1 velocity. No walls, no speed limit, no noise.
* Start: agent and target uniform in [-1, 1]^2, the agent at rest.
* Reward: minus the squared distance to the target, plus 20 within `TARGET_RADIUS` (0.2) of it.
  HyAR's loops end the episode, and count a success, when the reward exceeds 4, which is exactly
  reaching the target (`success`); the env's own `done` is always False. Their loops cut episodes
  at 30 steps (`MAX_EPISODE_STEPS`), a truncation.

Observation: float32[4], the agent's velocity then the target minus the agent's position.

HyAR's default is n = 4 (every script but `main_embedding_hard_move_td3.py`, which uses 8); the
port is checked against HyAR's env at n = 4, 6, 8 and 10. `HardMove(num_actuators)` is the env
for any n up to `MAX_NUM_ACTUATORS`; the module's
`NUM_CHOICES`, `PARAMETER_*` and `CORE` are those of `DEFAULT_NUM_ACTUATORS`.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from envs import HYBRID_MAX_EPISODE_STEPS
from envs.configs import DEFAULT_NUM_ACTUATORS, MAX_NUM_ACTUATORS
from jaxrl.datatypes import Array, Key
from jaxrl.env import EnvCore

NAME = "HardMove-v0"
MAX_EPISODE_STEPS = HYBRID_MAX_EPISODE_STEPS[NAME]


START_RANGE = 1.0  # agent and target start uniform in [-1, 1]^2
TARGET_RADIUS = 0.2
SUCCESS_BONUS = 20.0
FORCE_SCALE = 2.0  # HyAR's `accel * 2.0`
DAMPING = 0.25
DT = 0.1
MASS = 1.0


def actuator_directions(num_actuators: int) -> np.ndarray:
    """float64[n, 2]: the unit direction of each actuator, rounded to 3 decimals as HyAR's
    `get_movements` rounds it (so n = 4 pushes along the axes exactly)."""
    angles = np.linspace(0, 2 * np.pi, num_actuators + 1)[:-1]
    return np.around(np.stack([np.cos(angles), np.sin(angles)], axis=1), decimals=3)


def choice_motions(num_actuators: int) -> np.ndarray:
    """float32[2^n, 2]: each choice's motion, its actuators' directions summed and divided by the
    longest sum (HyAR's `get_action_motions`); actuator k fires on bit n-1-k of the choice."""
    choices = np.arange(2**num_actuators)[:, None]
    fires = (choices >> (num_actuators - 1 - np.arange(num_actuators))) & 1
    motions = fires @ actuator_directions(num_actuators)
    return (motions / np.linalg.norm(motions, axis=-1).max()).astype(np.float32)


class HardMoveState(NamedTuple):
    position: Array  # float32[2]
    velocity: Array  # float32[2]
    target: Array  # float32[2]


def observe(state: HardMoveState) -> Array:
    """float32[4]: velocity, then the target relative to the agent."""
    return jnp.concatenate([state.velocity, state.target - state.position])


def _squared_distance(state: HardMoveState) -> Array:
    return jnp.sum(jnp.square(state.position - state.target))


def success(state: HardMoveState) -> Array:
    """Whether the agent is within `TARGET_RADIUS` of the target (HyAR's success; it ends the
    episode)."""
    return _squared_distance(state) <= TARGET_RADIUS**2


@dataclasses.dataclass(frozen=True)
class HardMove:
    """Hard Move with `num_actuators` actuators: its action layout and its `EnvCore` functions."""

    num_actuators: int = DEFAULT_NUM_ACTUATORS

    def __post_init__(self) -> None:
        if not 1 <= self.num_actuators <= MAX_NUM_ACTUATORS:
            raise ValueError(
                f"num_actuators={self.num_actuators} must be in [1, {MAX_NUM_ACTUATORS}] "
                "(HyAR's paper: 4 to 10)"
            )

    @property
    def num_choices(self) -> int:
        return 2**self.num_actuators

    @property
    def parameter_low(self) -> np.ndarray:
        return np.full((self.num_choices,), -1.0, np.float32)

    @property
    def parameter_high(self) -> np.ndarray:
        return np.full((self.num_choices,), 1.0, np.float32)

    @property
    def parameter_slices(self) -> tuple[tuple[int, int], ...]:
        return tuple((c, c + 1) for c in range(self.num_choices))

    def reset(self, key: Key) -> tuple[HardMoveState, Array]:
        position, target = jax.random.uniform(key, (2, 2), minval=-START_RANGE, maxval=START_RANGE)
        state = HardMoveState(position, jnp.zeros((2,), jnp.float32), target)
        return state, observe(state)

    def step(
        self, key: Key, state: HardMoveState, action: tuple[Array, Array]
    ) -> tuple[HardMoveState, Array, Array, Array]:
        del key  # deterministic
        choice, parameters = action
        magnitude = jnp.asarray(parameters, jnp.float32)[choice]
        force = jnp.asarray(choice_motions(self.num_actuators))[choice] * magnitude * FORCE_SCALE
        velocity = state.velocity * (1 - DAMPING) + force / MASS * DT
        state = state._replace(position=state.position + velocity * DT, velocity=velocity)
        reached = success(state)
        squared = _squared_distance(state)
        reward = jnp.where(reached, SUCCESS_BONUS - squared, -squared)
        return state, observe(state), reward, reached

    def core(self) -> EnvCore:
        return EnvCore(self.reset, self.step)


def make_core(num_actuators: int = DEFAULT_NUM_ACTUATORS) -> EnvCore:
    """The `EnvCore` of Hard Move with `num_actuators` actuators."""
    return HardMove(num_actuators).core()


_DEFAULT = HardMove()
NUM_CHOICES = _DEFAULT.num_choices
PARAMETER_LOW: np.ndarray = _DEFAULT.parameter_low
PARAMETER_HIGH: np.ndarray = _DEFAULT.parameter_high
PARAMETER_SLICES = _DEFAULT.parameter_slices
CORE = _DEFAULT.core()
