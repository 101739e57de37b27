"""CatchPoint-v0 (envs/catchpoint.py): step-by-step parity with HyAR's env (a catch, eleven
failed catches, a truncated episode), a move and a catch by hand, and jit + vmap through
`envs.make` with the success rate in the episode statistics. A handful of float operations: the
file runs in seconds."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from envs import catchpoint
from envs.catchpoint import (
    CATCH,
    MAX_EPISODE_STEPS,
    MAX_FAILED_CATCHES,
    MOVE,
    CatchPointState,
    success,
)
from jaxrl.config import EnvConfig


class Episode(NamedTuple):
    agent: list  # start position
    target: list
    steps: list  # (choice, parameter, observation after the step, reward, failed catches after)


# Recorded once from HyAR's env (github.com/TJU-DRL-LAB/self-supervised-rl, commit ece9562,
# RL_with_Action_Representation/HyAR: multiagent.environment.MultiAgentEnv on
# multiagent/scenarios/simple_catch.py, `gym` shimmed by gymnasium's spaces), driven as
# HyAR_RL/main_embedding_direction_catch_td3.py drives it: `np.random.seed(seed); env.reset()`,
# then per step `env.step(pad_action(choice, [parameter]))`, ending on a reward above 4 or of 0
# or after 25 steps. The harness (/tmp/hyar/dump_catch.py, not kept) ran seed 0: 2 random moves
# (parameters from `np.random.RandomState(seed + 10)`, rounded to 3 decimals), then moves
# towards the target and a catch within 0.15 of it (caught on the 7th step); seed 1: catches
# at random on even steps and from the 16th on, random moves between (the 11th failed catch is
# followed by the reward 0 that ends it); seed 2: two catches far away, then moves towards the
# target, never catching (cut at 25 steps). Rounded to 7 decimals.
REFERENCE = (
    Episode(agent=[0.097627, 0.4303787], target=[0.2055268, 0.0897664], steps=[
        (0, 0.543, [0.1981779, -0.0269356, 0.088082, -0.3379188], -0.1219476, 0),
        (0, -0.958, [0.1223205, -0.2184632, 0.0758499, -0.3160725], -0.105655, 0),
        (0, 0.925, [0.1384295, -0.3583214, 0.062007, -0.2802403], -0.0823795, 0),
        (0, 0.931, [0.1468374, -0.4640605, 0.0473232, -0.2338343], -0.056918, 0),
        (0, 0.936, [0.15007, -0.5440164, 0.0323162, -0.1794327], -0.0332404, 0),
        (0, 0.943, [0.1481756, -0.6048142, 0.0174987, -0.1189512], -0.0144556, 0),
        (1, 0.0, [0.1111317, -0.4536107, 0.0063855, -0.0735902], 19.9945437, 0),
    ]),
    Episode(agent=[-0.165956, 0.440649], target=[-0.9997713, -0.3953349], steps=[
        (1, -0.639, [0.0, 0.0, -0.8338153, -0.8359838], -1.3941169, 1),
        (0, -0.961, [-0.0244432, -0.1985007, -0.8313709, -0.8161338], -1.357252, 1),
        (1, -0.074, [-0.0183324, -0.1488755, -0.8295377, -0.8012462], -1.3301283, 2),
        (0, 0.45, [0.1837884, -0.0803698, -0.8479165, -0.7932092], -1.3481434, 2),
        (1, -0.16, [0.1378413, -0.0602773, -0.8617007, -0.7871815], -1.3621828, 3),
        (0, -0.029, [0.0851849, 0.1539626, -0.8702192, -0.8025778], -1.4014125, 3),
        (1, -0.974, [0.0638887, 0.1154719, -0.876608, -0.814125], -1.4312411, 4),
        (0, -0.025, [0.0322247, 0.2859874, -0.8798305, -0.8427237], -1.484285, 4),
        (1, 0.884, [0.0241685, 0.2144906, -0.8822474, -0.8641728], -1.525155, 5),
        (0, 0.702, [0.179188, 0.0422965, -0.9001662, -0.8684024], -1.5644219, 5),
        (1, 0.46, [0.134391, 0.0317224, -0.9136053, -0.8715746], -1.5943169, 6),
        (0, -0.783, [-0.0252335, -0.1315055, -0.9110819, -0.8584241], -1.5669622, 6),
        (1, 0.788, [-0.0189252, -0.0986291, -0.9091894, -0.8485612], -1.5466814, 7),
        (0, 0.714, [0.1422843, -0.1985294, -0.9234178, -0.8287082], -1.5394578, 7),
        (1, -0.67, [0.1067132, -0.148897, -0.9340891, -0.8138185], -1.5348231, 8),
        (1, 0.265, [0.0800349, -0.1116728, -0.9420926, -0.8026513], -1.5317876, 9),
        (1, -0.959, [0.0600262, -0.0837546, -0.9480952, -0.7942758], -1.5297587, 10),
        (1, -0.767, [0.0450196, -0.0628159, -0.9525972, -0.7879942], -1.5283763, 11),
        (1, -0.367, [0.0337647, -0.047112, -0.9559737, -0.783283], 0.0, 11),
    ]),
    Episode(agent=[-0.1280102, -0.9481475], target=[0.099325, -0.1293552], steps=[
        (1, 0.5, [0.0, 0.0, 0.2273352, 0.8187923], -0.7221021, 1),
        (1, 0.5, [0.0, 0.0, 0.2273352, 0.8187923], -0.7221021, 2),
        (0, 0.086, [0.0533804, 0.1927447, 0.2219971, 0.7995178], -0.6885115, 2),
        (0, 0.086, [0.0934157, 0.3373033, 0.2126555, 0.7657875], -0.6316529, 2),
        (0, 0.086, [0.1234422, 0.4457222, 0.2003113, 0.7212153], -0.5602761, 2),
        (0, 0.086, [0.145962, 0.5270364, 0.1857151, 0.6685117], -0.4813979, 2),
        (0, 0.086, [0.1628519, 0.588022, 0.1694299, 0.6097095], -0.4004521, 2),
        (0, 0.086, [0.1755193, 0.6337613, 0.151878, 0.5463333], -0.321547, 2),
        (0, 0.086, [0.1850199, 0.6680657, 0.133376, 0.4795268], -0.2477351, 2),
        (0, 0.086, [0.1921453, 0.693794, 0.1141615, 0.4101474], -0.1812537, 2),
        (0, 0.086, [0.1974894, 0.7130902, 0.0944125, 0.3388383], -0.1237251, 2),
        (0, 0.086, [0.2014974, 0.7275624, 0.0742628, 0.2660821], -0.0763146, 2),
        (0, 0.087, [0.2051087, 0.7382479, 0.0537519, 0.1922573], -0.0398521, 2),
        (0, 0.087, [0.2078172, 0.746262, 0.0329702, 0.1176311], -0.0149241, 2),
        (0, 0.087, [0.2098486, 0.7522726, 0.0119853, 0.0424039], -0.0019417, 2),
        (0, 0.088, [0.2119768, 0.75661, -0.0092123, -0.0332571], -0.0011909, 2),
        (0, -0.914, [0.1056022, 0.3747127, -0.0197726, -0.0707284], -0.0053935, 2),
        (0, -0.913, [0.025216, 0.0884585, -0.0222942, -0.0795743], -0.0068291, 2),
        (0, -0.913, [-0.0350737, -0.1262322, -0.0187868, -0.066951], -0.0048354, 2),
        (0, -0.913, [-0.0802909, -0.2872503, -0.0107577, -0.038226], -0.001577, 2),
        (0, -0.913, [-0.1142038, -0.4080138, 0.0006627, 0.0025754], -7.1e-06, 2),
        (0, 0.08, [-0.0359149, -0.1122937, 0.0042542, 0.0138047], -0.0002087, 2),
        (0, 0.095, [0.0318719, 0.1069383, 0.001067, 0.0031109], -1.08e-05, 2),
        (0, 0.105, [0.0886874, 0.2694208, -0.0078018, -0.0238312], -0.0006288, 2),
        (0, -0.899, [0.0041149, 0.0120494, -0.0082133, -0.0250361], -0.0006943, 2),
    ]),
)  # fmt: skip


def start_state(agent, target) -> CatchPointState:
    as32 = lambda v: jnp.asarray(v, jnp.float32)
    zero = jnp.zeros((), jnp.int32)
    return CatchPointState(as32(agent), jnp.zeros((2,), jnp.float32), as32(target), zero, False)


@pytest.mark.parametrize("episode", REFERENCE, ids=["caught", "eleven-failed", "truncated"])
def test_steps_match_hyars_env(episode: Episode):
    step = jax.jit(catchpoint.step)
    state = start_state(episode.agent, episode.target)
    key = jax.random.PRNGKey(0)
    for index, (choice, parameter, obs, reward, failed) in enumerate(episode.steps):
        action = (jnp.int32(choice), jnp.array([parameter], jnp.float32))
        state, got_obs, got_reward, terminated = step(key, state, action)
        np.testing.assert_allclose(got_obs, obs, atol=1e-6, err_msg=f"step {index}")
        np.testing.assert_allclose(float(got_reward), reward, atol=1e-6, err_msg=f"step {index}")
        assert int(state.failed_catches) == failed, index
        assert bool(success(state)) == (reward > 4), index
        assert bool(terminated) == (reward > 4 or reward == 0), index
    last = episode.steps[-1][3]
    assert (last > 4, last == 0, len(episode.steps)) in (
        (True, False, 7),
        (False, True, 19),
        (False, False, 25),
    )


def test_a_move_and_a_catch_by_hand():
    """A move with parameter 0.5 (angle pi / 2: sin 1, cos 0) from rest pushes along +x with
    force 2: velocity (0.2, 0), the agent 0.02 further. A catch then pushes nothing: velocity
    0.75 * 0.2 = 0.15, the agent 0.015 further; the target 0.2 from the start is 0.165 away,
    within reach: reward 20 - 0.165^2, a success that ends the episode."""
    step = jax.jit(catchpoint.step)
    state = start_state([0.0, 0.0], [0.2, 0.0])
    state, obs, reward, terminated = step(None, state, (jnp.int32(MOVE), jnp.array([0.5])))
    np.testing.assert_allclose(obs, [0.2, 0.0, 0.18, 0.0], atol=1e-7)
    np.testing.assert_allclose(float(reward), -(0.18**2), rtol=1e-6)
    assert not terminated
    # The parameter is ignored on a catch.
    state, obs, reward, terminated = step(None, state, (jnp.int32(CATCH), jnp.array([-0.9])))
    np.testing.assert_allclose(obs, [0.15, 0.0, 0.165, 0.0], atol=1e-7)
    np.testing.assert_allclose(float(reward), 20 - 0.165**2, rtol=1e-6)
    assert terminated and success(state) and int(state.failed_catches) == 0


def test_the_eleventh_failed_catch_is_the_last():
    """Catches out of reach: failed catches 1..11 are rewarded -distance^2; the step after the
    11th is rewarded 0 and ends the episode, a failure, whatever the action."""
    step = jax.jit(catchpoint.step)
    state = start_state([0.0, 0.0], [0.9, 0.0])
    catch = (jnp.int32(CATCH), jnp.zeros((1,)))
    for failed in range(1, MAX_FAILED_CATCHES + 2):
        state, _, reward, terminated = step(None, state, catch)
        assert int(state.failed_catches) == failed and not terminated
        np.testing.assert_allclose(float(reward), -0.81, rtol=1e-6)
    state, _, reward, terminated = step(None, state, (jnp.int32(MOVE), jnp.zeros((1,))))
    assert float(reward) == 0.0 and terminated and not success(state)


def test_batched_env_catches_and_truncates():
    """Through `envs.make`, 32 envs: moving (straight up) and never catching, every episode is cut
    at 25 steps, a truncation without success; a policy that heads for the target and catches
    within 0.15 of it succeeds in most episodes, each ending on a termination with success."""
    env = envs.make(EnvConfig(id="CatchPoint-v0"), 32)
    step = jax.jit(env.step)
    state, ts = jax.jit(env.reset)(jax.random.PRNGKey(0))
    up = (jnp.zeros((32,), jnp.int32), jnp.zeros((32, 1)))
    for t in range(MAX_EPISODE_STEPS):
        state, ts = step(state, up, jax.random.PRNGKey(t))
    assert bool(jnp.all(ts.truncated)) and not bool(jnp.any(ts.terminated))
    assert not bool(jnp.any(ts.info["episode_success"]))

    def heading(obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        near = jnp.hypot(obs[:, 2], obs[:, 3]) <= 0.15
        direction = jnp.arctan2(obs[:, 2], obs[:, 3]) / jnp.pi  # sin along x, cos along y
        return jnp.where(near, CATCH, MOVE).astype(jnp.int32), direction[:, None]

    state, ts = jax.jit(env.reset)(jax.random.PRNGKey(1))
    successes = ends = 0
    for t in range(MAX_EPISODE_STEPS):
        state, ts = step(state, heading(ts.obs), jax.random.PRNGKey(t))
        done = ts.terminated | ts.truncated
        assert not bool(jnp.any(ts.info["episode_success"] & ~ts.terminated))
        successes += int(jnp.sum(ts.info["episode_success"]))
        ends += int(jnp.sum(done))
    assert successes >= 24 and ends >= successes
