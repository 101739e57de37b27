"""The Platform domain of Masson, Ranchod & Konidaris (2016, "Reinforcement Learning with
Parameterized Actions"), as gym-platform has it, JAX-native: `Platform-v0`.

Followed: gym-platform's `gym_platform/envs/platform_env.py` as HyAR (Li et al. 2022) vendored
it, github.com/TJU-DRL-LAB/AI-Optimizer, commit 8a45c22,
`ssrl/RL_with_Action_Representation/HyAR/gym-platform-master/` (cycraig/gym-platform's master);
its physics match cycraig/gym-platform at commit 59c1b4a, which predates the parameter clipping
and the per-action parameter boxes. The code here is ours; constants, equations and the order of
updates are the reference's.

* World: three platforms 40 high (x from 0, 475 and 985; widths 250, 275, 50; gaps 225 and 235),
  the goal at the third one's right end (`RIGHT_BOUND`, 1035). One enemy walks each of the first two
  platforms; player and enemies are 20 x 30 boxes whose `position` is the lower-left corner, so
  the player stands at y = 40.
* Actions: `(choice, parameters)`, `choice` int32 in {0 run, 1 hop, 2 leap}, `parameters`
  float32[3] holding each action's 1-d parameter (gym-platform's
  `Tuple(Discrete(3), Tuple(Box(1), Box(1), Box(1)))` flattened); only `parameters[choice]` is
  used, clipped to [`PARAMETER_LOW`, `PARAMETER_HIGH`][choice] as the reference clips it. Run adds
  the parameter to the horizontal speed (at most 70 on the ground) at each of its 20 sub-steps;
  hop and leap take off aiming `parameter` ahead (the speed change bounded to +-30) and last until
  the player stands on a platform again.
* One action is many physics sub-steps of `DT` (a `lax.while_loop`): run's 20, a jump's whole
  flight (at most ~145). In the air gravity acts instead of the action. Only the enemy of the
  platform the player is over moves. `SUBSTEP_LIMIT` guards the loop and never binds.
* Noise, as the reference's: a half-normal loss of speed at every acceleration, half-normal
  shortfalls on a jump's (dx, dy), normal changes of the moving enemy's speed. Sub-step i of an
  action draws z = normal(fold_in(key, i), (4,)): z[0:2] the jump's, z[2] the player's, z[3] the
  enemy's (each scaled as the reference scales its draws), so a trajectory is a function of the
  keys alone.
* Reward: the distance covered by the action / `RIGHT_BOUND`, so the rewards of an episode that
  reaches the goal sum to 1. Terminated when the player falls below platform height (into a gap),
  touches an enemy or reaches the goal (`success`).
* Start: always the same (player at x = 0 at rest, each enemy at its platform's right end walking
  left); the reference randomises nothing at reset.
* Episode cap: cycraig/gym-platform registers `Platform-v0` without one; HyAR's copy registers
  `max_episode_steps=200` (its old TODO), which is `MAX_EPISODE_STEPS`: a truncation for the
  vectoriser, never a termination here.

Observation, float32[9]: the reference's 9 features, scaled into [0, 1] as it scales them,
f = (raw + `OBS_SHIFT`) / `OBS_SCALE`, then mapped onto [−1, 1] as 2f − 1: the
`ScaledStateWrapper` (`common/wrappers.py`) that both the MP-DQN repository's and HyAR's Platform
scripts put on gym-platform (github.com/cycraig/MP-DQN, commit eec13eb, `run_platform_pdqn.py`;
HyAR's `HyAR_RL/main_embedding_platform_td3.py`), so our agents see what theirs saw. Features:
0 the player's x, 1 its horizontal speed, 2 the x and 3 the speed of the enemy of the platform the
player is over (the second once x > 475), then the current platform's 4 width, 5 the next
platform's width, 6 the gap to it, 7 its x and 8 the height difference (always 0, so −1). The
reference observes a tuple (those features, the number of sub-steps the last action took); we
observe the features alone, as HyAR's agents do (they drop the count), and keep the count in
`PlatformState.substeps`. Ours runs in float32 (the reference in float64): trajectories agree to
~1e-6 (tests/envs/test_platform.py).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from envs import HYBRID_MAX_EPISODE_STEPS, scaled_state
from jaxrl.datatypes import Array, Key
from jaxrl.env import EnvCore

NAME = "Platform-v0"
MAX_EPISODE_STEPS = HYBRID_MAX_EPISODE_STEPS[NAME]  # 200, HyAR's registration (module docstring)

ACTIONS = ("run", "hop", "leap")
RUN, HOP, LEAP = 0, 1, 2
PARAMETER_LOW: np.ndarray = np.array([0.0, 0.0, 0.0], np.float32)
PARAMETER_HIGH: np.ndarray = np.array([30.0, 720.0, 430.0], np.float32)
PARAMETER_SLICES = ((0, 1), (1, 2), (2, 3))  # choice k's parameter is parameters[k]

# Platforms: lower-left x and width; every platform stands on y = 0 and is PLATFORM_HEIGHT tall.
PLATFORM_HEIGHT = 40.0
PLATFORM_X: np.ndarray = np.array([0.0, 475.0, 985.0], np.float32)
PLATFORM_WIDTH: np.ndarray = np.array([250.0, 275.0, 50.0], np.float32)
RIGHT_BOUND = float(PLATFORM_X[-1] + PLATFORM_WIDTH[-1])  # 1035, the goal and the world's width
BODY_SIZE: np.ndarray = np.array([20.0, 30.0], np.float32)  # player and enemies alike

DT = 0.05
RUN_SUBSTEPS = 20  # the reference runs `difft -= DT` from 1.0 while `difft > 0`
SUBSTEP_LIMIT = 200  # a guard for the loop: a hop's flight, the longest action, takes ~145
MAX_VELOCITY: np.ndarray = np.array([100.0, 200.0], np.float32)
MAX_DX_ON_GROUND = 70.0
# The reference's MAX_DDX = (MAX_DX - MAX_DX_ON) / DT and MAX_DDY = MAX_DY / DT.
MAX_ACCELERATION: np.ndarray = np.array([600.0, 4000.0], np.float32)
GRAVITY = 9.8
VELOCITY_DECAY = 0.99
JUMP_DY = (0.0, 35.0, 25.0)  # per choice: a hop's and a leap's initial vertical speed
JUMP_DEVIATION = 1.0  # the reference's HOP_DEV and LEAP_DEV
PLAYER_NOISE = 0.5
ENEMY_NOISE = 0.5
ENEMY_SPEED = 30.0

# Per segment (x < 475, x < 985, beyond): this platform's width, the next one's, the gap to it,
# its x, the height difference; the reference's implicit platform features, unscaled.
PLATFORM_FEATURES: np.ndarray = np.array(
    [
        [250.0, 275.0, 225.0, 0.0, 0.0],
        [275.0, 50.0, 235.0, 475.0, 0.0],
        [50.0, 0.0, 0.0, 985.0, 0.0],
    ],
    np.float32,
)
OBS_SIZE = 9
OBS_SHIFT: np.ndarray = np.array([20.0, 0, 0, ENEMY_SPEED, 0, 0, 0, 0, 0], np.float32)
# x + body width, top speed, x, twice the enemies' speed; the widest platform (twice), the widest
# gap, x, the greatest height (1: all are 0).
OBS_SCALE: np.ndarray = np.array(
    [RIGHT_BOUND + 20.0, 100.0, RIGHT_BOUND, 60.0, 275.0, 275.0, 235.0, RIGHT_BOUND, 1.0],
    np.float32,
)


class PlatformState(NamedTuple):
    position: Array  # float32[2], the player's lower-left corner (x, y); y = 40 standing
    velocity: Array  # float32[2]
    enemy_x: Array  # float32[2], the enemies of platforms 1 and 2 (their y is always 40)
    enemy_dx: Array  # float32[2]
    substeps: Array  # int32, physics sub-steps the last action took (0 at reset)


def _colliding(position: Array, other: Array, other_size: Array) -> Array:
    """Whether the player's box overlaps the box at `other` (open intervals, as the reference)."""
    return jnp.all((other - BODY_SIZE < position) & (position < other + other_size))


def on_platforms(position: Array) -> Array:
    """Whether the player stands on a platform (its y exactly platform height, as the reference
    tests it: landing sets it so)."""
    offset = position[0] - jnp.asarray(PLATFORM_X)
    above = (-BODY_SIZE[0] <= offset) & (offset <= jnp.asarray(PLATFORM_WIDTH))
    return jnp.any(above) & (position[1] == PLATFORM_HEIGHT)


def _accelerate(velocity: Array, acceleration: Array, noise: Array) -> Array:
    """The reference's `Player.accelerate`: bounded acceleration for one `DT`, a half-normal loss
    of horizontal speed, bounded speed, never backwards."""
    acceleration = jnp.clip(acceleration, -MAX_ACCELERATION, MAX_ACCELERATION)
    velocity = velocity + acceleration * DT
    velocity = velocity.at[0].add(-jnp.abs(noise) * PLAYER_NOISE * DT)
    velocity = jnp.clip(velocity, -MAX_VELOCITY, MAX_VELOCITY)
    return velocity.at[0].max(0.0)


def _acceleration(
    choice: Array, parameter: Array, velocity: Array, jump_noise: Array, on: Array
) -> Array:
    """What the action asks of `_accelerate` this sub-step: run's push, a jump's take-off aimed
    `parameter` ahead, or gravity once in the air."""
    dy = jnp.asarray(JUMP_DY)[choice]
    flight = 2.0 * dy / GRAVITY + 1.0
    dx = jnp.clip(parameter / flight - velocity[0], -MAX_ACCELERATION[0], MAX_VELOCITY[1] - dy)
    jump = (jnp.stack([dx, dy]) - JUMP_DEVIATION * jnp.abs(jump_noise)) / DT
    run = jnp.stack([parameter / DT, jnp.zeros_like(parameter)])
    on_ground = jnp.where(choice == RUN, run, jump)
    return jnp.where(on, on_ground, jnp.array([0.0, -GRAVITY], jnp.float32))


def _decollide(position: Array, velocity: Array, index: int) -> tuple[Array, Array]:
    """Pushes the player out of platform `index` along the shorter way, stopping it (the
    reference's `Player.decollide`, then its zeroing of the horizontal speed)."""
    lower = jnp.array([PLATFORM_X[index], 0.0], jnp.float32)
    upper = lower + jnp.array([PLATFORM_WIDTH[index], PLATFORM_HEIGHT], jnp.float32)
    before, after = lower - BODY_SIZE, upper - BODY_SIZE
    new = jnp.where(position < lower, before, jnp.where(position > after, upper, position))
    moved = jnp.abs(position - new)
    shift_x = (new[0] != position[0]) & ((new[1] == position[1]) | (moved[0] < moved[1]))
    pushed = jnp.where(shift_x, position.at[0].set(new[0]), position.at[1].set(new[1]))
    stopped = jnp.where(shift_x, velocity, velocity.at[1].set(0.0)).at[0].set(0.0)
    hit = _colliding(position, lower, upper - lower)
    return jnp.where(hit, pushed, position), jnp.where(hit, stopped, velocity)


def _substep(
    state: PlatformState, start_x: Array, choice: Array, parameter: Array, z: Array
) -> tuple[PlatformState, Array, Array]:
    """One `DT` of the reference's `_update`: act (or fall), bound the speed on the ground, move
    the player and the enemy of its platform, land, then reward and termination."""
    on = on_platforms(state.position)
    acceleration = _acceleration(choice, parameter, state.velocity, z[0:2], on)
    velocity = _accelerate(state.velocity, acceleration, z[2])
    grounded = velocity.at[0].set(jnp.clip(velocity[0], 0.0, MAX_DX_ON_GROUND))
    velocity = jnp.where(on, grounded, velocity)

    # Only the enemy of the platform the player is over moves (chosen before the player moves).
    moving = jnp.arange(2) == jnp.where(state.position[0] > PLATFORM_X[1], 1, 0)
    left = jnp.asarray(PLATFORM_X[:2])
    right = left + jnp.asarray(PLATFORM_WIDTH[:2]) - BODY_SIZE[0]
    inside = (left < state.enemy_x) & (state.enemy_x < right)
    enemy_dx = jnp.where(inside, state.enemy_dx, -state.enemy_dx) + ENEMY_NOISE * DT * z[3]
    enemy_dx = jnp.clip(enemy_dx, -ENEMY_SPEED, ENEMY_SPEED)
    enemy_x = jnp.clip(state.enemy_x + enemy_dx * DT, left, right)
    enemy_x = jnp.where(moving, enemy_x, state.enemy_x)
    enemy_dx = jnp.where(moving, enemy_dx, state.enemy_dx)

    position = state.position + velocity * DT
    position = position.at[0].set(jnp.clip(position[0], 0.0, RIGHT_BOUND))
    velocity = velocity.at[0].multiply(VELOCITY_DECAY)
    for index in range(len(PLATFORM_X)):  # in order, as the reference (at most one overlaps)
        position, velocity = _decollide(position, velocity, index)

    # x is clipped to RIGHT_BOUND: at the goal this is also the reference's goal reward.
    reward = (position[0] - start_x) / RIGHT_BOUND
    enemies = jnp.stack([enemy_x, jnp.full((2,), PLATFORM_HEIGHT, jnp.float32)], axis=-1)
    hit = jax.vmap(_colliding, (None, 0, None))(position, enemies, jnp.asarray(BODY_SIZE))
    terminated = (position[1] < PLATFORM_HEIGHT) | jnp.any(hit) | (position[0] >= RIGHT_BOUND)
    return PlatformState(position, velocity, enemy_x, enemy_dx, state.substeps), reward, terminated


def observe(state: PlatformState) -> Array:
    """float32[9]: the reference's features in [0, 1], mapped onto [−1, 1] as the references'
    agents received them (module docstring)."""
    x = state.position[0]
    enemy = (x > PLATFORM_X[1]).astype(jnp.int32)
    segment = jnp.sum(x >= jnp.asarray(PLATFORM_X[1:])).astype(jnp.int32)
    basic = jnp.stack([x, state.velocity[0], state.enemy_x[enemy], state.enemy_dx[enemy]])
    raw = jnp.concatenate([basic, jnp.asarray(PLATFORM_FEATURES)[segment]])
    return scaled_state(raw + OBS_SHIFT, 0.0, OBS_SCALE)  # gym-platform's f, then 2f − 1


def reset(key: Key) -> tuple[PlatformState, Array]:
    """The reference's fixed start; `key` is unused (nothing is drawn)."""
    del key
    state = PlatformState(
        position=jnp.array([0.0, PLATFORM_HEIGHT], jnp.float32),
        velocity=jnp.zeros((2,), jnp.float32),
        enemy_x=jnp.asarray(PLATFORM_X[:2] + PLATFORM_WIDTH[:2] - BODY_SIZE[0]),
        enemy_dx=jnp.full((2,), -ENEMY_SPEED, jnp.float32),
        substeps=jnp.zeros((), jnp.int32),
    )
    return state, observe(state)


def step(
    key: Key, state: PlatformState, action: tuple[Array, Array]
) -> tuple[PlatformState, Array, Array, Array]:
    """One hybrid action `(choice, parameters)`, run for all its sub-steps; the reward of the
    whole action and whether the episode ended."""
    choice, parameters = action
    choice = jnp.asarray(choice, jnp.int32)
    low, high = jnp.asarray(PARAMETER_LOW)[choice], jnp.asarray(PARAMETER_HIGH)[choice]
    parameter = jnp.clip(jnp.asarray(parameters, jnp.float32)[choice], low, high)
    start_x = state.position[0]

    def running(carry: tuple[PlatformState, Array, Array, Array]) -> Array:
        s, _, _, go = carry
        return go & (s.substeps < SUBSTEP_LIMIT)

    def substep(
        carry: tuple[PlatformState, Array, Array, Array],
    ) -> tuple[PlatformState, Array, Array, Array]:
        s, _, _, _ = carry
        z = jax.random.normal(jax.random.fold_in(key, s.substeps), (4,), jnp.float32)
        s, reward, terminated = _substep(s, start_x, choice, parameter, z)
        s = s._replace(substeps=s.substeps + 1)
        more = jnp.where(choice == RUN, s.substeps < RUN_SUBSTEPS, ~on_platforms(s.position))
        return s, reward, terminated, more & ~terminated

    begin = state._replace(substeps=jnp.zeros((), jnp.int32))
    carry = (begin, jnp.zeros((), jnp.float32), jnp.zeros((), bool), jnp.ones((), bool))
    state, reward, terminated, _ = jax.lax.while_loop(running, substep, carry)
    return state, observe(state), reward, terminated


def success(state: PlatformState) -> Array:
    """bool: the player reached the goal (HyAR's success rate counts these episodes)."""
    return state.position[0] >= RIGHT_BOUND


CORE = EnvCore(reset=reset, step=step)
