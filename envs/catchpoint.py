"""HyAR's "Catch Point" (Li et al., ICLR 2022), JAX-native: `CatchPoint-v0`. A point agent moves
in a chosen direction or tries to catch a target point; a catch succeeds within reach of it, and
too many failed catches end the episode.

Followed: github.com/TJU-DRL-LAB/self-supervised-rl, `RL_with_Action_Representation/HyAR`, commit
ece9562: `multiagent/environment.py` (`MultiAgentEnv._set_action1`, branch `action[0][0] == 1`),
`multiagent/core.py` (`World`, its physics; `Agent.target_distance`, `valid_time`),
`multiagent/scenarios/simple_catch.py` (start, reward, observation), and
`HyAR_RL/main_embedding_direction_catch_td3.py` (`pad_action`: the action layout; its loops: the
25-step cap, success and the two episode ends). The code here is ours.

* Choices: 0 moves, 1 tries to catch. One parameter, the direction of a move in [-1, 1], read as
  the angle pi times it; a catch has none (HyAR's agents output the one parameter for both and
  the env ignores it on a catch), so `PARAMETER_SLICES` is ((0, 1), (1, 1)).
* Physics, one `World.step` of HyAR's particle world per env step, as in Hard Move: a move pushes
  with force 2 (sin angle, cos angle) (HyAR's sine along x, cosine along y), a catch with none;
  velocity <- 0.75 velocity + 0.1 force; position <- position + 0.1 velocity.
* Start: agent and target uniform in [-1, 1]^2, the agent at rest, no failed catches.
* Reward, from the positions after the step: minus the squared distance to the target. A catch
  within `CATCH_RADIUS` (0.2) of the target adds 20: the episode ends, a success (HyAR's loops
  end it on a reward above 4, which is exactly this). A catch beyond it counts as failed. Once
  more than `MAX_FAILED_CATCHES` (10) catches have failed, the next step's reward is 0 and the
  episode ends, a failure (HyAR's loops end it on a reward of exactly 0; a squared distance of
  exactly 0 without a catch would end theirs too, which we do not copy). Both ends are
  terminations; HyAR's loops cut episodes at 25 steps (`MAX_EPISODE_STEPS`), a truncation.

Observation: float32[4], the agent's velocity then the target minus the agent's position.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from envs import HYBRID_MAX_EPISODE_STEPS
from jaxrl.datatypes import Array, Key
from jaxrl.env import EnvCore

NAME = "CatchPoint-v0"
MAX_EPISODE_STEPS = HYBRID_MAX_EPISODE_STEPS[NAME]
MOVE, CATCH = 0, 1
NUM_CHOICES = 2
PARAMETER_LOW = np.array([-1.0], np.float32)
PARAMETER_HIGH = np.array([1.0], np.float32)
PARAMETER_SLICES = ((0, 1), (1, 1))  # a move's direction; a catch has no parameter

START_RANGE = 1.0  # agent and target start uniform in [-1, 1]^2
CATCH_RADIUS = 0.2  # HyAR's `Agent.target_distance`
CATCH_BONUS = 20.0
MAX_FAILED_CATCHES = 10  # HyAR's `valid_time <= 10`: the 11th failed catch is the last
FORCE_SCALE = 2.0
DAMPING = 0.25
DT = 0.1
MASS = 1.0


class CatchPointState(NamedTuple):
    position: Array  # float32[2]
    velocity: Array  # float32[2]
    target: Array  # float32[2]
    failed_catches: Array  # int32
    caught: Array  # bool: the last step's catch succeeded


def observe(state: CatchPointState) -> Array:
    """float32[4]: velocity, then the target relative to the agent."""
    return jnp.concatenate([state.velocity, state.target - state.position])


def success(state: CatchPointState) -> Array:
    """Whether the episode's last step caught the target (HyAR's success)."""
    return state.caught


def reset(key: Key) -> tuple[CatchPointState, Array]:
    position, target = jax.random.uniform(key, (2, 2), minval=-START_RANGE, maxval=START_RANGE)
    state = CatchPointState(
        position, jnp.zeros((2,), jnp.float32), target, jnp.zeros((), jnp.int32), jnp.array(False)
    )
    return state, observe(state)


def step(
    key: Key, state: CatchPointState, action: tuple[Array, Array]
) -> tuple[CatchPointState, Array, Array, Array]:
    del key  # deterministic
    choice, parameters = action
    angle = jnp.pi * jnp.asarray(parameters, jnp.float32)[0]
    push = FORCE_SCALE * jnp.stack([jnp.sin(angle), jnp.cos(angle)])
    force = jnp.where(choice == MOVE, push, 0.0)
    velocity = state.velocity * (1 - DAMPING) + force / MASS * DT
    position = state.position + velocity * DT
    squared = jnp.sum(jnp.square(position - state.target))
    may_catch = state.failed_catches <= MAX_FAILED_CATCHES
    catching = may_catch & (choice == CATCH)
    caught = catching & (squared <= CATCH_RADIUS**2)
    failed = state.failed_catches + (catching & ~caught).astype(jnp.int32)
    reward = jnp.where(may_catch, jnp.where(caught, CATCH_BONUS - squared, -squared), 0.0)
    state = CatchPointState(position, velocity, state.target, failed, caught)
    return state, observe(state), reward, caught | ~may_catch


CORE = EnvCore(reset, step)
