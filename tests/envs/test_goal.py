"""Goal-v0 (envs/goal.py): step-by-step parity with gym-goal and HyAR's observation, the physics
by hand (a kick, a shot, a ball out of play), the action's clipping and its unused y, starts, and
jit + vmap. One `advance` program serves the parity tests; the file runs in a few seconds."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from envs import goal
from envs.goal import (
    BALL,
    CORE,
    DRAWS_PER_TICK,
    KICKABLE,
    MAX_EPISODE_STEPS,
    NUM_CHOICES,
    PARAMETER_HIGH,
    PARAMETER_LOW,
    PARAMETER_SLICES,
    GoalState,
    advance,
    goal_distance,
    observe,
    raw_state,
    start,
    success,
)

# The reference's draws, scripted so that the test can replay them: the draws of tick t of step i
# (0-based), slot s (0-2: the player's kick or dash, 3-5: the goalie's move; numpy's
# U(lo, hi) = lo + (hi - lo) u) are u = frac(PHI * (1000 i + 8 t + s + 1)).
PHI = 0.6180339887498949
TICKS = 256  # more than any reference step took (250)


def scripted_draws(step_index: int) -> np.ndarray:
    """float32[TICKS, 6]: the draws of every tick of step `step_index`."""
    n = 1000 * step_index + 8 * np.arange(TICKS)[:, None] + np.arange(DRAWS_PER_TICK) + 1
    return np.modf(n * PHI)[0].astype(np.float32)


class Episode(NamedTuple):
    reset_u: float  # the start's draw: player y = -15 + 30 u
    steps: list  # (choice, parameters float[4], ticks, reward, terminated) per step
    states: list  # gym-goal's state (`raw_state`) after each step
    final_obs: list  # HyAR's observation after the last step


# Recorded once from gym-goal (github.com/cycraig/gym-goal, commit 8e142be, gym_goal/envs) with
# HyAR's GoalObservationWrapper and ScaledStateWrapper (github.com/TJU-DRL-LAB/self-supervised-rl,
# commit ece9562, RL_with_Action_Representation/HyAR/common), `gym` shimmed by gymnasium's spaces:
#   python record_goal.py EPISODES  (a throwaway harness in /tmp, not kept). It sets
#   `env.np_random` to an object whose `uniform(lo, hi, size)` returns the scripted draws above,
#   numbered per tick by wrapping `GoalEnv._update` and `Goalie.move`, and whose `random_sample()`
#   returns 0 (the goalie's catch probability is 1); it prints `env.step`'s state, steps, reward
#   and terminal, and the wrappers' observation, for each step of the scripted actions below.
# Rounded to 6 decimals. Episode 1 scores with shoot-goal-right, 2 with shoot-goal-left, 3 kicks
# 5 times (up to 138 ticks) before the goalie catches, 4 shoots and is caught, 5 scores after
# 250 ticks of chasing and re-shooting, 6 kicks the ball off the pitch.
REFERENCE = (
    Episode(reset_u=0.37, steps=[
        (0, [1.3, 0.0, -5.8, -3.9], 52, 0.0, False),
        (0, [4.2, 0.0, -6.1, -6.1], 44, 0.0, False),
        (2, [2.6, 0.0, 0.8, 3.8], 49, 50.0, True),
    ], states=[
        [2.489275, -0.126045, 0.009479, 0.03647, 1.246982, 10.571361, -0.160178,
         -0.032653, 0.005548, 2.916582, 2.740085, 1.416867, 0.002928, 0.012544],
        [3.856122, 3.962585, 0.01656, 0.037366, 1.246982, 8.083603, 2.286811,
         -0.018125, 0.025115, 2.383678, 4.264121, 5.49383, 0.006431, 0.017204],
        [6.911021, 4.820491, 0.019312, 0.002391, 0.14025, 8.541317, 5.598994,
         -0.003081, 0.061931, 1.561241, 20.004256, 5.343431, 0.047851, -0.000457],
    ], final_obs=[-0.308898, 0.321366, 0.019312, 0.002391, 0.044643, -0.145868,
               0.373266, -0.003081, 0.061931, 0.496959, 1.000426, 0.356229,
               0.01595, -0.000152, 0.999752, -0.022289, 0.174848]),
    Episode(reset_u=0.27, steps=[
        (0, [0.6, 0.0, -5.7, 0.8], 75, 0.0, False),
        (0, [3.2, 0.0, -0.7, -0.4], 33, 0.0, False),
        (0, [2.3, 0.0, 1.7, 6.9], 1, 0.0, False),
        (1, [1.9, 0.0, 4.5, -1.0], 70, 50.0, True),
    ], states=[
        [2.197649, -0.435225, 0.006012, 0.040613, 1.362348, 8.797226, -0.497237,
         -0.030053, 0.010067, 2.906108, 1.975926, 1.058739, 0.000271, 0.004349],
        [2.894808, 2.684768, 0.004717, 0.037834, 1.362348, 6.861907, 1.235547,
         -0.026949, 0.018374, 2.421932, 2.785405, 4.241151, 0.007244, 0.028477],
        [2.899525, 2.722601, 0.001887, 0.015134, 1.362348, 6.790477, 1.2785,
         -0.028572, 0.017181, 2.626085, 2.747007, 4.221159, -0.036094, -0.018792],
        [5.726673, 4.394617, -0.015178, -0.007542, 0.443616, 7.511366, 4.628864,
         -0.00571, 0.075634, -1.465146, 20.001222, 6.05089, 0.013796, 0.001463],
    ], final_obs=[-0.427333, 0.292974, -0.015178, -0.007542, 0.141207, -0.248863,
               0.308591, -0.00571, 0.075634, -0.46637, 1.000122, 0.403393,
               0.004599, 0.000488, 0.993581, 0.113124, 0.242107]),
    Episode(reset_u=0.2, steps=[
        (0, [0.9, 0.0, 3.2, 2.2], 101, 0.0, False),
        (0, [3.5, 0.0, 2.9, -4.9], 30, 0.0, False),
        (0, [3.4, 0.0, -0.7, 5.1], 1, 0.0, False),
        (0, [11.0, 0.0, -0.9, -5.7], 138, 0.0, False),
        (0, [13.5, 0.0, 6.6, 4.8], 83, 0.0, False),
        (0, [5.5, 0.0, 4.6, 0.8], 2, -8.460103, True),
    ], states=[
        [2.464822, 0.053154, 0.009223, 0.03819, 1.489609, 7.012143, 0.067848,
         -0.030938, 0.003062, 2.842752, 2.184582, 1.551645, 8.4e-05, 0.001149],
        [2.771609, 2.94059, 0.00928, 0.038119, 1.489609, 5.596846, 1.949126,
         -0.022436, 0.020789, 2.246158, 3.001291, 4.476929, 0.009075, 0.032505],
        [2.780889, 2.978709, 0.003712, 0.015248, 1.489609, 5.545262, 2.011252,
         -0.020634, 0.024851, 2.152366, 3.038317, 4.505827, 0.034805, 0.027164],
        [9.667933, 12.097264, -0.01319, -0.010974, 0.776144, 9.940659, 10.318044,
         -0.005381, -0.012326, 1.111332, 11.112805, 12.689168, 9.5e-05, 9.6e-05],
        [13.380497, 13.815817, 0.038982, 0.014336, 0.39506, 12.547299, 12.190087,
         0.026872, 0.017783, 0.679392, 14.909742, 14.117621, 0.001348, 0.000507],
        [13.143067, 13.946455, 0.006237, 0.002294, 0.39506, 12.492569, 12.146729,
         -0.017332, -0.013068, -2.455744, 14.139276, 13.111251, 0.494456, 0.393142],
    ], final_obs=[0.314307, 0.929764, 0.006237, 0.002294, 0.125752, 0.249257,
               0.809782, -0.017332, -0.013068, -0.781688, 0.413928, 0.874083,
               0.164819, 0.131047, 0.862878, 0.505412, 1.0]),
    Episode(reset_u=0.53, steps=[
        (0, [0.5, 0.0, 3.5, 6.8], 3, 0.0, False),
        (0, [1.2, 0.0, -6.1, -2.6], 1, 0.0, False),
        (0, [0.1, 0.0, 4.8, -0.4], 1, 0.0, False),
        (2, [14.1, 0.0, 0.0, 1.8], 12, -7.67814, True),
    ], states=[
        [0.14205, 0.894641, 0.032845, -0.001051, -0.04497, 14.310491, 0.260529,
         -0.029064, 0.002851, 3.127702, 1.682548, 0.759634, 0.024758, -0.020132],
        [0.174895, 0.893589, 0.013138, -0.000421, -0.04497, 14.231342, 0.268054,
         -0.03166, 0.00301, 3.069866, 1.744831, 0.779651, 0.058546, 0.018816],
        [0.188033, 0.893169, 0.005255, -0.000168, -0.04497, 14.14951, 0.273295,
         -0.032733, 0.002096, -3.126377, 1.736314, 0.737425, -0.008007, -0.039692],
        [1.226876, 0.85813, 0.041358, -0.002337, -0.04497, 14.169095, 1.391964,
         -0.004743, 0.055422, 1.618884, 12.32186, 1.246854, 0.576768, 0.027757],
    ], final_obs=[-0.877312, 0.057209, 0.041358, -0.002337, -0.014314, 0.416909,
               0.092798, -0.004743, 0.055422, 0.515307, 0.232186, 0.083124,
               0.192256, 0.009252, -0.996929, -0.078314, -0.157393]),
    Episode(reset_u=0.82, steps=[
        (0, [5.8, 0.0, 6.4, 5.7], 73, 0.0, False),
        (0, [1.9, 0.0, 0.6, 2.7], 89, 0.0, False),
        (0, [2.9, 0.0, -1.1, -4.1], 1, 0.0, False),
        (2, [8.7, 0.0, -1.3, -5.0], 250, 50.0, True),
    ], states=[
        [6.152786, 6.30012, 0.026465, -0.027219, -0.783397, 9.078923, 4.439891,
         -0.032013, 0.011295, 2.815769, 7.15322, 5.109952, 0.003784, -0.002516],
        [3.583115, 1.713334, -0.031877, -0.023249, -2.353667, 5.392826, 2.100483,
         -0.030421, -0.010125, -2.695474, 2.457408, 0.694331, -0.001153, -0.001083],
        [3.551238, 1.690085, -0.012751, -0.009299, -2.353667, 5.312256, 2.090112,
         -0.032228, -0.004149, -3.074876, 2.413631, 0.764008, -0.04115, 0.065496],
        [18.362186, -5.896906, 0.006824, -0.00083, -0.095063, 17.523077, -4.304456,
         -0.012086, 0.041853, -1.164946, 20.031404, -5.596171, 0.114846, 0.04935],
    ], final_obs=[0.836219, -0.393127, 0.006824, -0.00083, -0.03026, 0.752308,
               -0.286964, -0.012086, 0.041853, -0.370814, 1.00314, -0.373078,
               0.038282, 0.01645, 0.88904, -0.45783, -0.864004]),
    Episode(reset_u=0.5, steps=[
        (0, [30.0, 0.0, 0.0, 0.0], 16, -8.864256, True),
    ], states=[
        [1.224528, 0.54293, 0.035285, 0.015883, 0.446495, 15.016343, 1.107122,
         0.010922, 0.031231, 1.152339, 16.457615, 15.135672, 0.527099, 0.536963],
    ], final_obs=[-0.877547, 0.036195, 0.035285, 0.015883, 0.142124, 0.501634,
               0.073808, 0.010922, 0.031231, 0.366801, 0.645761, 1.009045,
               0.1757, 0.178988, 0.1022, 0.994764, 1.0]),
)  # fmt: skip


START_Y = -9.0  # episode 3's start: reset_u 0.2
START_STATE = [0.0, -9.0, 0.0, 0.0, 0.422854, 14.5, -2.475, 0.0, 0.0, -2.718739, 1.459074,
               -8.343417, 0.0, 0.0]  # fmt: skip
START_OBS = [-1.0, -0.6, 0.0, 0.0, 0.134599, 0.45, -0.165, 0.0, 0.0, -0.865401, -0.854093,
             -0.556228, 0.0, 0.0, -0.911922, -0.410365, -0.333333]  # fmt: skip

NOISE_FREE = np.full((TICKS, DRAWS_PER_TICK), 0.5, np.float32)  # U(-r, r) = 0 for every draw


@jax.jit
def run_step(state: GoalState, choice: jax.Array, parameters: jax.Array, draws: jax.Array):
    """`advance` with the draws of tick t read from `draws[t]`."""
    return advance(state, (choice, parameters), lambda tick: draws[tick])


def placed(player, ball, goalie, orientation: float = 0.0) -> GoalState:
    """A state at rest with the bodies where given; the goalie faces the +x axis."""
    zero = jnp.zeros((2,), jnp.float32)
    as32 = lambda v: jnp.asarray(v, jnp.float32)
    return GoalState(
        as32(player), zero, as32(orientation), as32(goalie), zero, as32(0.0), as32(ball), zero
    )


def pick(tree, i: int):
    """Env `i` of a batched pytree."""
    return jax.tree.map(lambda leaf: leaf[i], tree)


def test_action_layout_and_caps():
    assert NUM_CHOICES == 3 and PARAMETER_SLICES == ((0, 2), (2, 3), (3, 4))
    assert PARAMETER_LOW.dtype == PARAMETER_HIGH.dtype == np.float32
    np.testing.assert_allclose(PARAMETER_LOW, [0, -15, -7.01, -7.01], rtol=1e-6)
    np.testing.assert_allclose(PARAMETER_HIGH, [40, 15, 7.01, 7.01], rtol=1e-6)
    assert MAX_EPISODE_STEPS == 99  # the reference's 100th step moves nothing


def test_steps_match_gym_goal_tick_for_tick():
    for episode in REFERENCE:
        state = start(jnp.float32(-15 + 30 * episode.reset_u))
        for index, ((choice, parameters, ticks, reward, end), expected) in enumerate(
            zip(episode.steps, episode.states, strict=True)
        ):
            state, got_reward, got_end, got_ticks = run_step(
                state, jnp.int32(choice), jnp.asarray(parameters, jnp.float32),
                scripted_draws(index),
            )  # fmt: skip
            where = f"episode {episode.reset_u}, step {index}"
            assert int(got_ticks) == ticks, where
            assert bool(got_end) == end, where
            np.testing.assert_allclose(float(got_reward), reward, atol=1e-3, err_msg=where)
            np.testing.assert_allclose(raw_state(state), expected, atol=2e-4, err_msg=where)
        np.testing.assert_allclose(observe(state), episode.final_obs, atol=1e-4)
        assert bool(success(state)) == (reward == 50.0)


def test_the_start_is_the_references_and_kickable():
    state = start(jnp.float32(START_Y))
    np.testing.assert_allclose(raw_state(state), START_STATE, atol=2e-5)
    np.testing.assert_allclose(observe(state), START_OBS, atol=2e-6)
    # By hand: the goalie stands where the line from (0, -9) to the goal centre crosses x = 14.5.
    np.testing.assert_allclose(state.goalie_position, [14.5, -9 * 5.5 / 20], rtol=1e-6)

    states, obs = jax.jit(jax.vmap(goal.reset))(jax.random.split(jax.random.PRNGKey(0), 256))
    y = np.asarray(states.player_position[:, 1])
    assert obs.shape == (256, 17) and obs.dtype == jnp.float32
    assert (states.player_position[:, 0] == 0).all() and (np.abs(y) <= 15).all() and y.std() > 7
    gap = np.linalg.norm(np.asarray(states.ball_position - states.player_position), axis=1)
    assert (gap <= KICKABLE).all() and (gap > KICKABLE - 1e-4).all()
    np.testing.assert_allclose(states.player_orientation, np.arctan2(-y, 20), atol=1e-6)
    assert (states.goalie_position[:, 0] == 14.5).all() and not success(states).any()


def test_a_shot_from_close_in_scores_after_ten_ticks():
    """By hand, without noise: kick power share 1 - 0.25 * 1.5 / 1.6 = 0.765625 (facing the ball,
    1.5 away); the kick wants the ball to stop at the target x 20.4, so it gets velocity
    0.06 * (20.4 - 17) = 0.204 along x, and after n ticks sits at 18.5 + 3.4 (1 - 0.94^n):
    19.952 after 9, 20.069 (in the net) after 10."""
    state = placed(player=[17.0, 0.0], ball=[18.5, 0.0], goalie=[15.0, 14.0])
    parameters = jnp.array([0.0, 0.0, 0.0, 0.0], jnp.float32)  # shoot-goal-right at y = 0
    state, reward, end, ticks = run_step(state, jnp.int32(2), parameters, NOISE_FREE)
    assert int(ticks) == 10 and bool(end) and float(reward) == 50.0 and bool(success(state))
    np.testing.assert_allclose(state.ball_position, [18.5 + 3.4 * (1 - 0.94**10), 0], atol=1e-5)
    np.testing.assert_allclose(state.ball_velocity, [0.204 * 0.94**10, 0], atol=1e-6)


def test_a_kick_at_full_power_leaves_the_pitch_with_minus_the_distance_to_the_post():
    """By hand, without noise: kick-to (40, 40) from (10, 10), ball at (11.5, 10). The kick wants
    0.06 * (30, 30), power |(1.8, 1.8)| / (0.765625 * 0.027) = 123, capped at 100: the ball
    leaves at 100 * 0.765625 * 0.027 = 2.0672 along 45 degrees and crosses y = 15 on tick 4,
    before x = 20. The reward is minus its distance to the post (20, 7.01)."""
    state = placed(player=[10.0, 10.0], ball=[11.5, 10.0], goalie=[19.0, -14.0])
    parameters = jnp.array([40.0, -3.0, 0.0, 0.0], jnp.float32)
    state, reward, end, ticks = run_step(state, jnp.int32(0), parameters, NOISE_FREE)
    speed = 100 * (1 - 0.25 * 1.5 / KICKABLE) * BALL.power_rate
    kick = speed * np.array([np.cos(np.pi / 4), np.sin(np.pi / 4)])
    ball = np.array([11.5, 10.0]) + kick * (1 - 0.94**4) / 0.06
    assert int(ticks) == 4 and bool(end) and not bool(success(state))
    assert ball[1] > 15 > 10 + kick[1] * (1 - 0.94**3) / 0.06 and ball[0] < 20
    np.testing.assert_allclose(state.ball_position, ball, atol=1e-5)
    np.testing.assert_allclose(state.ball_velocity, kick * 0.94**4, atol=1e-6)
    np.testing.assert_allclose(float(reward), -np.hypot(*(ball - [20, 7.01])), atol=1e-5)


def test_goal_distance_is_the_references_quirks_included():
    """In front of the mouth: to the goal line; beside it: to the near post; beyond the line:
    to the mouth's edge, below it 7.01 - y as the reference has it (not -7.01 - y)."""
    cases = {
        (12.0, 3.0): 8.0,
        (12.0, 10.0): np.hypot(8.0, 2.99),
        (12.0, -10.0): np.hypot(8.0, 2.99),
        (21.0, 9.0): 1.99,
        (21.0, -8.0): 15.01,
        (21.0, 5.0): 0.0,
    }
    for ball, distance in cases.items():
        np.testing.assert_allclose(float(goal_distance(jnp.array(ball))), distance, rtol=1e-6)


def test_parameters_are_clipped_kick_to_ignores_y_and_both_shots_are_one():
    """As in the reference: the kick-to target is (x, x); shots clip y to the goal mouth."""
    state = start(jnp.float32(2.0))

    def outcome(choice: int, parameters: list[float]) -> np.ndarray:
        after, reward, _, ticks = run_step(
            state, jnp.int32(choice), jnp.asarray(parameters, jnp.float32), NOISE_FREE
        )
        return np.append(raw_state(after), [reward, ticks])

    kick = outcome(0, [6.0, 15.0, 0.0, 0.0])
    np.testing.assert_array_equal(kick, outcome(0, [6.0, -15.0, 0.0, 0.0]))
    assert not np.array_equal(kick, outcome(0, [7.0, 15.0, 0.0, 0.0]))
    np.testing.assert_array_equal(kick, outcome(0, [6.0, 99.0, 0.0, 0.0]))  # y out of range
    np.testing.assert_array_equal(outcome(0, [40.0, 0, 0, 0]), outcome(0, [90.0, 0, 0, 0]))
    left = outcome(1, [0.0, 0.0, 3.0, -5.0])
    np.testing.assert_array_equal(left, outcome(2, [0.0, 0.0, -5.0, 3.0]))
    assert not np.array_equal(left, outcome(1, [0.0, 0.0, -5.0, 3.0]))
    np.testing.assert_array_equal(outcome(1, [0, 0, 7.01, 0]), outcome(1, [0, 0, 50.0, 0]))


def test_jit_and_vmap_over_4_envs_equal_unbatched_steps():
    reset_keys = jax.random.split(jax.random.PRNGKey(1), 4)
    step_keys = jax.random.split(jax.random.PRNGKey(2), 4)
    states, _ = jax.vmap(CORE.reset)(reset_keys)
    choices = jnp.array([0, 1, 2, 0], jnp.int32)
    parameters = jnp.asarray(
        np.random.default_rng(0).uniform(PARAMETER_LOW, PARAMETER_HIGH, (4, 4)), jnp.float32
    )
    batched = jax.jit(jax.vmap(CORE.step))(step_keys, states, (choices, parameters))
    single = jax.jit(CORE.step)
    for i in range(4):
        one = single(step_keys[i], pick(states, i), (choices[i], parameters[i]))
        for got, want in zip(jax.tree.leaves(pick(batched, i)), jax.tree.leaves(one), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    # The noise comes from the key: another key moves the bodies elsewhere.
    other = single(step_keys[1], pick(states, 0), (choices[0], parameters[0]))
    assert np.abs(np.asarray(other[1]) - np.asarray(batched[1][0])).max() > 1e-4
