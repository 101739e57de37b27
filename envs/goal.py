"""The robot-soccer goal domain of Masson, Ranchod & Konidaris (2016, "Reinforcement Learning with
Parameterized Actions") as the HyAR paper (Li et al., ICLR 2022) ran it, JAX-native: `Goal-v0`.

Followed: github.com/cycraig/gym-goal, `gym_goal/envs/goal_env.py`, `config.py` and `util.py`,
commit 8e142be (HyAR vendors the same files, differing by one blank line, in
github.com/TJU-DRL-LAB/self-supervised-rl, `RL_with_Action_Representation/HyAR/gym-goal-master`,
commit ece9562), and HyAR's observation wrappers there: `common/goal_domain.py`
(`GoalObservationWrapper`) and `common/wrappers.py` (`ScaledStateWrapper`), as
`HyAR_RL/main_embedding_goal_td3.py` stacks them. The code here is ours.

* Pitch: the attacking half, x in [0, 20], y in [-15, 15]; the goal mouth at x = 20, |y| <= 7.01,
  the net 2.44 deep. A player (radius 0.9), a goalie (0.9) and a ball (0.4), each with position
  and velocity, players with an orientation. Constants are the reference's (`config.py`).
* Actions (`CHOICES`): 0 kick-to(x, y), 1 shoot-goal-left(y), 2 shoot-goal-right(y). Parameters
  are clipped to `PARAMETER_LOW`/`PARAMETER_HIGH` as the reference clips them. The two shots are
  the same action in the reference (both `shootgoal` over the whole mouth); only Masson et al.'s
  initial policies told them apart. Kick-to kicks at the target (x, x), not (x, y): the reference
  passes `parameters[0]` where the kick wants a point, and numpy broadcasts the scalar (so did
  Masson's own code: github.com/WarwickMasson/aaai-goal, `simulator.py`, `perform_action`, commit
  aea52b2). The published Goal results ran that, so we keep it: the y parameter has no effect.
* One env step is many simulator ticks (`advance`): a kick-to runs until the ball is slower than
  0.1 and kickable again, a shot until the episode ends (the player chases and re-shoots a ball
  that stops short). A tick: the player acts (a kick when the ball is within `KICKABLE`, else it
  turns to face the ball or dashes at it), the goalie moves to intercept, every body moves and
  decays, overlaps are pushed apart (pairs player-goalie, player-ball, goalie-ball, in turn), then
  the end is checked. Accelerations carry the reference's noise: the direction scaled by
  1 + U(-rand, rand), plus U(-rand |v|, rand |v|) per component. A safety cap, `MAX_TICKS`, bounds
  the loop (the reference has none; in about 6,000 random steps of the reference no step took
  more than 268 ticks). Under vmap a batch's step lasts as many ticks as its longest env's.
* Reward and end (per tick; a step's reward is its last tick's): 50 for a ball in the net; minus
  the ball's distance to the goal mouth (`goal_distance`, the reference's formula, quirks kept)
  when the goalie is within `CATCHABLE` of the ball or the ball leaves the pitch; 0 otherwise.
  `success` is the HyAR paper's metric: scored (an episode return of 50).
* Start: player at (0, y), y ~ U(-15, 15), facing the goal centre; the ball just within kicking
  range in front of it; the goalie on the line from the ball to the goal centre at x = 14.5.
* Episode cap (`MAX_EPISODE_STEPS`, 99): the reference's 100th step runs no physics and ends the
  episode with minus the goal distance. That is a time limit, which is the vectoriser's business,
  so we cap at the 99 steps that move the world; the time-out penalty is dropped.

Observation (`observe`): float32[17], HyAR's: gym-goal's state, player x, y, vx, vy, orientation;
goalie x, y, vx, vy, orientation; ball x, y, vx, vy, then the unit vector from the goalie to the
ball (2) and where the goalie-ball line crosses the goal line (1), each mapped from
[`OBS_LOW`, `OBS_HIGH`] to [-1, 1]. As in HyAR nothing is clipped: orientations are not wrapped
and a ball in the net or off the pitch lies beyond the bounds, so values can leave [-1, 1].
The reference's second observation element, the tick count, is left out (HyAR ignores it).

Differences, for float32: the start puts the ball `START_MARGIN` (1e-5) inside kicking range where
the reference uses 1e-12, so that the first state stays kickable after rounding; noise is drawn
from the step's key (`step`), so trajectories match the reference's only given its draws
(`advance`, which the tests drive with them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from envs import HYBRID_MAX_EPISODE_STEPS, scaled_state
from jaxrl.datatypes import Array, Key
from jaxrl.env import EnvCore

NAME = "Goal-v0"
MAX_EPISODE_STEPS = HYBRID_MAX_EPISODE_STEPS[NAME]

PITCH_LENGTH = 40.0  # the whole pitch; the env uses its attacking half
PITCH_WIDTH = 30.0
GOAL_WIDTH = 14.02
GOAL_DEPTH = 2.44
GOAL_AREA_WIDTH = 18.32
GOAL_AREA_LENGTH = 5.5
GOAL_X = PITCH_LENGTH / 2
KICKABLE = 0.9 + 0.7  # the player's size + 0.7
CATCHABLE = 2.0
INERTIA_MOMENT = 5.0
MAX_POWER = 100.0
DASH_POWER = 10.0
INTERCEPT_POWER = 20.0  # the goalie's, when the ball heads for the goal
FOLLOW_POWER = 8.0  # the goalie's, otherwise
GOAL_REWARD = 50.0
START_MARGIN = 1e-5
MAX_TICKS = 1000

CHOICES = ("kick-to", "shoot-goal-left", "shoot-goal-right")
NUM_CHOICES = len(CHOICES)
PARAMETER_SLICES = ((0, 2), (2, 3), (3, 4))
PARAMETER_LOW: np.ndarray = np.array(
    [0.0, -PITCH_WIDTH / 2, -GOAL_WIDTH / 2, -GOAL_WIDTH / 2], np.float32
)
PARAMETER_HIGH: np.ndarray = np.array(
    [PITCH_LENGTH, PITCH_WIDTH / 2, GOAL_WIDTH / 2, GOAL_WIDTH / 2], np.float32
)


def _parameter_prior() -> tuple[np.ndarray, np.ndarray]:
    """MP-DQN's hand-made parameter policy for Goal (github.com/cycraig/MP-DQN, eec13eb,
    `run_goal_pdqn.py` with `--initialise-params --scale-actions`): each parameter in [−1, 1]
    units is bias + weights · observation. Kick-to aims from the ball's position (observation 10,
    11) and the keeper-to-ball direction (14, 15); the shots aim at fixed points of the mouth.
    Returns (weights float32[4, 17], bias float32[4]); P-DQN's `agent.parameter_prior`."""
    weights = np.zeros((4, 17), np.float32)
    weights[0, [10, 11, 14, 15]] = [0.5, 0.0, 0.0625, 0.0]
    weights[1, [10, 11, 14, 15]] = [0.0, 5 / 6, 0.0, 1 / 9]
    shot = 0.857346647646219686
    return weights, np.array([-0.375, 0.0, shot, -shot], np.float32)


PARAMETER_PRIOR = _parameter_prior()
# The draws one tick may use: the player's action (a kick or a dash) 3, the goalie's move 3.
DRAWS_PER_TICK = 6

_STATE_LOW = [0.0, -PITCH_WIDTH / 2, -1.0, -1.0, -np.pi]
_STATE_HIGH = [GOAL_X, PITCH_WIDTH / 2, 1.0, 1.0, np.pi]
# gym-goal's LOW_VECTOR/HIGH_VECTOR, then HyAR's bounds of the three extra features (the upper one
# of the goal-line crossing is GOAL_WIDTH, not half of it, in HyAR's wrapper).
OBS_LOW: np.ndarray = np.array(
    [*_STATE_LOW, *_STATE_LOW, 0.0, -PITCH_WIDTH / 2, -3.0, -3.0, -1.0, -1.0, -GOAL_WIDTH / 2],
    np.float32,
)
OBS_HIGH: np.ndarray = np.array(
    [*_STATE_HIGH, *_STATE_HIGH, GOAL_X, PITCH_WIDTH / 2, 3.0, 3.0, 1.0, 1.0, GOAL_WIDTH],
    np.float32,
)


class Body(NamedTuple):
    """Physical constants of a body (the reference's PLAYER_CONFIG and BALL_CONFIG)."""

    power_rate: float
    size: float
    rand: float
    accel_max: float
    speed_max: float
    decay: float


PLAYER = Body(power_rate=0.006, size=0.9, rand=0.1, accel_max=1.0, speed_max=1.0, decay=0.4)
BALL = Body(power_rate=0.027, size=0.4, rand=0.05, accel_max=2.7, speed_max=2.7, decay=0.94)


class GoalState(NamedTuple):
    player_position: Array  # float32[2]
    player_velocity: Array  # float32[2]
    player_orientation: Array  # float32, radians, not wrapped
    goalie_position: Array  # float32[2]
    goalie_velocity: Array  # float32[2]
    goalie_orientation: Array  # float32
    ball_position: Array  # float32[2]
    ball_velocity: Array  # float32[2]


# --- geometry ------------------------------------------------------------------------------------


def _norm(v: Array) -> Array:
    return jnp.sqrt(v[0] * v[0] + v[1] * v[1])


def _angle_between(a: Array, b: Array) -> Array:
    diff = b - a
    return jnp.arctan2(diff[1], diff[0])


def _unit(theta: Array) -> Array:
    return jnp.stack([jnp.cos(theta), jnp.sin(theta)])


def _wrap_angle(angle: Array) -> Array:
    """Into [-pi, pi] by whole turns, as the reference's loops do (`norm_angle`)."""
    turn = 2 * np.pi
    above = jnp.ceil((angle - np.pi) / turn)
    below = jnp.ceil((-np.pi - angle) / turn)
    return jnp.where(
        angle > np.pi, angle - turn * above, jnp.where(angle < -np.pi, angle + turn * below, angle)
    )


def _angle_close(a: Array, b: Array) -> Array:
    return jnp.abs(_wrap_angle(a - b)) < np.pi / 8


def _in_box(p: Array, left: float, right: float, bottom: float, top: float) -> Array:
    return (left <= p[0]) & (p[0] <= right) & (bottom <= p[1]) & (p[1] <= top)


def goal_distance(ball: Array) -> Array:
    """The reference's distance from the ball to the goal mouth: to the near post beside the goal,
    to the line in front of it, 0 inside it. Beyond the goal line and below the mouth it is
    7.01 - y (not -7.01 - y), as in the reference."""
    x, y = ball[0], ball[1]
    half = GOAL_WIDTH / 2
    post = jnp.stack([jnp.float32(GOAL_X), jnp.where(y < 0, -half, half)])
    in_front = jnp.where(jnp.abs(y) > half, _norm(ball - post), GOAL_X - x)
    beyond = jnp.where(y < -half, half - y, jnp.where(y > half, y - half, 0.0))
    return jnp.where(x < GOAL_X, in_front, beyond)


def in_net(ball: Array) -> Array:
    return _in_box(ball, GOAL_X, GOAL_X + GOAL_DEPTH, -GOAL_WIDTH / 2, GOAL_WIDTH / 2)


def goalie_catches(goalie: Array, ball: Array) -> Array:
    """Whether the goalie is within `CATCHABLE` of the ball: an end, lost."""
    return _norm(goalie - ball) < CATCHABLE


# --- bodies --------------------------------------------------------------------------------------


def _accelerate(velocity: Array, power: Array, theta: Array, u: Array, body: Body) -> Array:
    """The velocity after pushing with `power` towards `theta`, noisy by the uniforms `u[:3]` in
    [0, 1) (the reference's `Entity.accelerate`; U(lo, hi) = lo + (hi - lo) u, as numpy draws)."""
    theta = (1 + (-body.rand + 2 * body.rand * u[0])) * theta
    rmax = body.rand * _norm(velocity)
    noise = -rmax + 2 * rmax * u[1:3]
    acceleration = power * body.power_rate * _unit(theta) + noise
    acceleration = jnp.clip(acceleration, -body.accel_max, body.accel_max)
    return jnp.clip(velocity + acceleration, -body.speed_max, body.speed_max)


def _kick_power(player: Array, orientation: Array, ball: Array) -> Array:
    """The share of a kick's power that reaches the ball: less off the player's facing and far."""
    off = jnp.abs(_wrap_angle(_angle_between(player, ball) - orientation))
    return 1 - 0.25 * off / np.pi - 0.25 * _norm(ball - player) / KICKABLE


def _player_acts(s: GoalState, target: Array, u: Array) -> GoalState:
    """The reference's `Player.kick_to(ball, target)`: kick so that the ball stops at `target`
    when it is kickable, else `to_ball` (turn to face it, or dash when facing it)."""
    kickable = _norm(s.ball_position - s.player_position) <= KICKABLE
    power_share = _kick_power(s.player_position, s.player_orientation, s.ball_position)
    wanted = (1 - BALL.decay) * (target - s.player_position) - s.ball_velocity
    power = jnp.clip(_norm(wanted) / (power_share * BALL.power_rate), -MAX_POWER, MAX_POWER)
    theta = jnp.arctan2(wanted[1], wanted[0])
    kicked = _accelerate(s.ball_velocity, power * power_share, theta, u, BALL)

    to_ball = _angle_between(s.player_position, s.ball_position)
    facing = _angle_close(s.player_orientation, to_ball)
    speed = _norm(s.player_velocity)
    turned = s.player_orientation + _wrap_angle(to_ball - s.player_orientation) / (
        1 + INERTIA_MOMENT * speed
    )
    dashed = _accelerate(s.player_velocity, DASH_POWER, s.player_orientation, u, PLAYER)
    return s._replace(
        ball_velocity=jnp.where(kickable, kicked, s.ball_velocity),
        player_velocity=jnp.where(~kickable & facing, dashed, s.player_velocity),
        player_orientation=jnp.where(~kickable & ~facing, turned, s.player_orientation),
    )


def _goalie_moves(s: GoalState, u: Array) -> GoalState:
    """The reference's `Goalie.move`: run to where the ball will cross the goalie's path when the
    ball's resting point is behind a widened goal mouth, else run at that resting point."""
    ball, keeper = s.ball_position, s.goalie_position
    ball_end = ball + s.ball_velocity / (1 - BALL.decay)
    diff = ball_end - ball
    moving_x = diff[0] != 0
    grad = jnp.where(moving_x, diff[1] / jnp.where(moving_x, diff[0], 1.0), 0.0)
    yint = ball[1] - grad * ball[0]
    goal_y = grad * GOAL_X + yint
    reach = GOAL_WIDTH / 2 + CATCHABLE
    heading_in = (ball_end[0] > GOAL_X) & (-reach <= goal_y) & (goal_y <= reach) & (grad != 0)
    safe_grad = jnp.where(grad != 0, grad, 1.0)
    grad2 = -1 / safe_grad
    yint2 = keeper[1] - grad2 * keeper[0]
    cross_x = (yint2 - yint) / (safe_grad - grad2)
    intercept = jnp.stack([cross_x, grad * cross_x + yint])
    target = jnp.where(heading_in, intercept, ball_end)
    power = jnp.where(heading_in, INTERCEPT_POWER, FOLLOW_POWER)
    theta = _angle_between(keeper, target)
    return s._replace(
        goalie_velocity=_accelerate(s.goalie_velocity, power, theta, u, PLAYER),
        goalie_orientation=theta,
    )


def _decollide(
    a: Array, va: Array, size_a: float, b: Array, vb: Array, size_b: float
) -> tuple[Array, Array, Array, Array]:
    """Push two overlapping bodies apart, each by half the overlap, and reverse both velocities
    (the reference's `Entity.decollide`); bodies apart are returned as they were."""
    distance = _norm(a - b)
    overlap = (size_a + size_b - distance) / 2
    hit = distance < size_a + size_b
    new_a = a + overlap * _unit(_angle_between(b, a))
    new_b = b + overlap * _unit(_angle_between(a, b))
    return (
        jnp.where(hit, new_a, a),
        jnp.where(hit, -va, va),
        jnp.where(hit, new_b, b),
        jnp.where(hit, -vb, vb),
    )


def _tick(s: GoalState, target: Array, u: Array) -> tuple[GoalState, Array, Array]:
    """One simulator tick (the reference's `_update`): the new state, its reward and end."""
    s = _goalie_moves(_player_acts(s, target, u[:3]), u[3:])
    player_position = s.player_position + s.player_velocity
    goalie_position = s.goalie_position + s.goalie_velocity
    ball_position = s.ball_position + s.ball_velocity
    player_velocity = s.player_velocity * PLAYER.decay
    goalie_velocity = s.goalie_velocity * PLAYER.decay
    ball_velocity = s.ball_velocity * BALL.decay
    player_position, player_velocity, goalie_position, goalie_velocity = _decollide(
        player_position, player_velocity, PLAYER.size, goalie_position, goalie_velocity, PLAYER.size
    )
    player_position, player_velocity, ball_position, ball_velocity = _decollide(
        player_position, player_velocity, PLAYER.size, ball_position, ball_velocity, BALL.size
    )
    goalie_position, goalie_velocity, ball_position, ball_velocity = _decollide(
        goalie_position, goalie_velocity, PLAYER.size, ball_position, ball_velocity, BALL.size
    )
    s = s._replace(
        player_position=player_position,
        player_velocity=player_velocity,
        goalie_position=goalie_position,
        goalie_velocity=goalie_velocity,
        ball_position=ball_position,
        ball_velocity=ball_velocity,
    )
    scored = in_net(ball_position)
    caught = goalie_catches(goalie_position, ball_position)
    out = ~_in_box(ball_position, 0.0, GOAL_X, -PITCH_WIDTH / 2, PITCH_WIDTH / 2)
    lost = caught | out
    reward = jnp.where(scored, GOAL_REWARD, jnp.where(lost, -goal_distance(ball_position), 0.0))
    return s, reward.astype(jnp.float32), scored | lost


# --- one env, pure functions ---------------------------------------------------------------------


def start(player_y: Array) -> GoalState:
    """The start with the player at (0, `player_y`) (the reference's `reset` given its draw)."""
    player = jnp.stack([jnp.float32(0.0), jnp.asarray(player_y, jnp.float32)])
    angle = _angle_between(player, jnp.array([GOAL_X, 0.0], jnp.float32))
    ball = player + (KICKABLE - START_MARGIN) * _unit(angle)
    # The reference's `_keeper_target`: on the line from the ball to the goal centre, at x 14.5
    # (its other case, a ball within 5.5 of the goal line, never happens at a start).
    grad = -ball[1] / (GOAL_X - ball[0])
    keeper_x = GOAL_X - GOAL_AREA_LENGTH
    keeper_y = jnp.clip(
        ball[1] + grad * (keeper_x - ball[0]), -GOAL_AREA_WIDTH / 2, GOAL_AREA_WIDTH / 2
    )
    goalie = jnp.stack([jnp.float32(keeper_x), keeper_y])
    zero = jnp.zeros((2,), jnp.float32)
    return GoalState(
        player_position=player,
        player_velocity=zero,
        player_orientation=angle,
        goalie_position=goalie,
        goalie_velocity=zero,
        goalie_orientation=_angle_between(goalie, ball),
        ball_position=ball,
        ball_velocity=zero,
    )


def raw_state(state: GoalState) -> Array:
    """float32[14]: gym-goal's state vector (`get_state`), before HyAR's features and scaling."""
    parts = (
        state.player_position,
        state.player_velocity,
        state.player_orientation[None],
        state.goalie_position,
        state.goalie_velocity,
        state.goalie_orientation[None],
        state.ball_position,
        state.ball_velocity,
    )
    return jnp.concatenate(parts).astype(jnp.float32)


def observe(state: GoalState) -> Array:
    """float32[17]: HyAR's observation (module docstring)."""
    ball, keeper = state.ball_position, state.goalie_position
    to_ball = (ball - keeper) / _norm(ball - keeper)
    same_x = keeper[0] == ball[0]
    grad = (keeper[1] - ball[1]) / jnp.where(same_x, 1.0, keeper[0] - ball[0])
    crossing = jnp.clip(grad * GOAL_X + ball[1] - grad * ball[0], -GOAL_WIDTH / 2, GOAL_WIDTH)
    vertical = jnp.where(keeper[1] < ball[1], -GOAL_WIDTH / 2, GOAL_WIDTH / 2)
    crossing = jnp.where(same_x, vertical, crossing)
    features = jnp.concatenate([raw_state(state), to_ball, crossing[None]])
    return scaled_state(features, OBS_LOW, OBS_HIGH).astype(jnp.float32)


def reset(key: Key) -> tuple[GoalState, Array]:
    state = start(jax.random.uniform(key, (), minval=-PITCH_WIDTH / 2, maxval=PITCH_WIDTH / 2))
    return state, observe(state)


def advance(
    state: GoalState, action: tuple[Array, Array], uniforms: Callable[[Array], Array]
) -> tuple[GoalState, Array, Array, Array]:
    """One env step given its noise: `uniforms(tick)` is float32[DRAWS_PER_TICK] in [0, 1), the
    player's action's 3 draws then the goalie's 3 (unused ones are ignored). Returns the state,
    reward, terminated and the ticks it took (the reference's second observation element)."""
    choice, parameters = action
    parameters = jnp.clip(jnp.asarray(parameters, jnp.float32), PARAMETER_LOW, PARAMETER_HIGH)
    shot_y = jnp.where(choice == 1, parameters[2], parameters[3])
    shoot = choice != 0
    target = jnp.where(
        shoot,
        jnp.stack([jnp.float32(GOAL_X + BALL.size), shot_y]),
        jnp.stack([parameters[0], parameters[0]]),  # (x, x): see the module docstring
    )

    def body(carry):
        s, tick, _, _, _ = carry
        s, reward, end = _tick(s, target, uniforms(tick))
        kickable = _norm(s.ball_position - s.player_position) <= KICKABLE
        settled = kickable & (_norm(s.ball_velocity) <= 0.1)
        return s, tick + 1, reward, end, ~end & (shoot | ~settled)

    carry = (state, jnp.int32(0), jnp.float32(0.0), jnp.bool_(False), jnp.bool_(True))
    state, ticks, reward, end, _ = jax.lax.while_loop(
        lambda c: c[4] & (c[1] < MAX_TICKS), body, carry
    )
    return state, reward, end, ticks


def step(
    key: Key, state: GoalState, action: tuple[Array, Array]
) -> tuple[GoalState, Array, Array, Array]:
    """`advance` with the draws of each tick taken from `key`."""

    def uniforms(tick: Array) -> Array:
        return jax.random.uniform(jax.random.fold_in(key, tick), (DRAWS_PER_TICK,))

    state, reward, terminated, _ = advance(state, action, uniforms)
    return state, observe(state), reward, terminated


def success(state: GoalState) -> Array:
    """Whether the ball is in the net: a step that returns such a state scored (HyAR's success)."""
    return in_net(state.ball_position)


CORE = EnvCore(reset, step)
