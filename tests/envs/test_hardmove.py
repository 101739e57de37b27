"""HardMove-v0 (envs/hardmove.py): step-by-step parity with HyAR's env for 4, 6, 8 and 10
actuators, the actuator table and a push by hand, reaching the target, and jit + vmap. The
programs are a handful of float operations: the file runs in a few seconds."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs import hardmove
from envs.hardmove import (
    MAX_EPISODE_STEPS,
    NUM_CHOICES,
    PARAMETER_HIGH,
    PARAMETER_LOW,
    PARAMETER_SLICES,
    HardMove,
    HardMoveState,
    actuator_directions,
    choice_motions,
    make_core,
    observe,
    success,
)


class Episode(NamedTuple):
    num_actuators: int
    agent: list  # start position
    target: list
    steps: list  # (choice, magnitude, observation after the step, reward) per step


# Recorded once from HyAR's env (github.com/TJU-DRL-LAB/self-supervised-rl, commit ece9562,
# RL_with_Action_Representation/HyAR: multiagent.environment.MultiAgentEnv on
# multiagent/scenarios/simple_move_4_direction_v1.py, `gym` shimmed by gymnasium's spaces), driven
# as HyAR_RL/main_embedding_hard_move_td3.py drives it: `np.random.seed(seed); env.reset()`, then
# per step `env.step([[8, choice, n, params]])` with params a 2^n list, 0 but at `choice`.
# The harness (/tmp/ref/dump_hardmove.py, not kept) ran `for n, seed in (4, 0), (6, 1), (8, 2),
# (10, 3)`: 2 random actions (choice uniform, magnitude U(-1, 1) rounded to 3 decimals, from
# `np.random.RandomState(seed)`), then the choice whose motion points most at the target at full
# magnitude, up to 8 steps or a reward above 4. Rounded to 7 decimals. The first episode reaches
# the target on its 7th step.
REFERENCE = (
    Episode(4, agent=[0.097627, 0.4303787], target=[0.2055268, 0.0897664], steps=[
        (12, 0.186, [0.0263044, 0.0263044, 0.1052693, -0.3432428], -0.1288972),
        (0, 0.206, [0.0197283, 0.0197283, 0.1032965, -0.3452156], -0.129844),
        (9, 1.0, [0.1562176, -0.1266252, 0.0876747, -0.3325531], -0.1182784),
        (9, 1.0, [0.2585845, -0.2363902, 0.0618163, -0.3089141], -0.0992492),
        (9, 1.0, [0.3353598, -0.318714, 0.0282803, -0.2770427], -0.0775524),
        (9, 1.0, [0.3929412, -0.3804569, -0.0110138, -0.238997], -0.0572409),
        (3, 1.0, [0.1532845, -0.426764, -0.0263423, -0.1963206], 19.9607639),
    ]),
    Episode(6, agent=[-0.165956, 0.440649], target=[-0.9997713, -0.3953349], steps=[
        (37, 0.994, [0.0497, -0.0860804, -0.8387852, -0.8273758], -1.3881115),
        (8, -1.0, [0.087275, -0.1511603, -0.8475128, -0.8122598], -1.3780438),
        (7, 1.0, [-0.0345437, -0.2865702, -0.8440584, -0.7836028], -1.3264679),
        (7, 1.0, [-0.1259078, -0.3881277, -0.8314676, -0.74479], -1.2460505),
        (7, 1.0, [-0.1944309, -0.4642957, -0.8120245, -0.6983604], -1.147091),
        (7, 1.0, [-0.2458231, -0.5214218, -0.7874422, -0.6462182], -1.0376632),
        (7, 1.0, [-0.2843674, -0.5642664, -0.7590055, -0.5897916], -0.9239434),
        (7, 1.0, [-0.3132755, -0.5963998, -0.7276779, -0.5301516], -0.8105759),
    ]),
    Episode(8, agent=[-0.1280102, -0.9481475], target=[0.099325, -0.1293552], steps=[
        (168, -0.63, [0.0, -0.0482218, 0.2273352, 0.8236145], -0.7300221),
        (72, 0.099, [-0.0022203, -0.0308089, 0.2275572, 0.8266954], -0.7352076),
        (240, 1.0, [0.0748773, 0.1616669, 0.2200695, 0.8105287], -0.7053874),
        (240, 1.0, [0.1327004, 0.3060237, 0.2067994, 0.7799264], -0.6510511),
        (240, 1.0, [0.1760678, 0.4142913, 0.1891926, 0.7384972], -0.581172),
        (240, 1.0, [0.2085933, 0.495492, 0.1683333, 0.688948], -0.5029855),
        (240, 1.0, [0.2329874, 0.5563925, 0.1450346, 0.6333088], -0.422115),
        (240, 1.0, [0.251283, 0.6020679, 0.1199063, 0.573102], -0.3428234),
    ]),
    Episode(10, agent=[0.1015958, 0.4162956], target=[-0.4181905, 0.0216552], steps=[
        (874, -0.859, [-0.0101391, -0.0312135, -0.5187724, -0.3915191], -0.422412),
        (643, -0.418, [-0.0702972, -0.0082213, -0.5117427, -0.390697], -0.4145247),
        (62, 1.0, [-0.2145091, -0.1237051, -0.4902918, -0.3783264], -0.3835169),
        (62, 1.0, [-0.3226681, -0.2103179, -0.458025, -0.3572946], -0.3374464),
        (62, 1.0, [-0.4037873, -0.2752776, -0.4176463, -0.3297669], -0.2831746),
        (62, 1.0, [-0.4646267, -0.3239973, -0.3711836, -0.2973672], -0.2262045),
        (62, 1.0, [-0.5102563, -0.3605371, -0.3201579, -0.2613135], -0.1707858),
        (62, 1.0, [-0.5444785, -0.387942, -0.2657101, -0.2225193], -0.1201167),
    ]),
)  # fmt: skip


def start_state(agent, target) -> HardMoveState:
    as32 = lambda v: jnp.asarray(v, jnp.float32)
    return HardMoveState(as32(agent), jnp.zeros((2,), jnp.float32), as32(target))


def one_hot_parameters(num_actuators: int, choice: int, magnitude: float) -> jax.Array:
    """HyAR's parameter list: the magnitude at the choice's index, 0 elsewhere."""
    return jnp.zeros((2**num_actuators,), jnp.float32).at[choice].set(magnitude)


@pytest.mark.parametrize("episode", REFERENCE, ids=lambda e: f"n{e.num_actuators}")
def test_steps_match_hyars_env(episode: Episode):
    env = HardMove(episode.num_actuators)
    step = jax.jit(env.step)
    state = start_state(episode.agent, episode.target)
    key = jax.random.PRNGKey(0)
    for index, (choice, magnitude, obs, reward) in enumerate(episode.steps):
        parameters = one_hot_parameters(episode.num_actuators, choice, magnitude)
        state, got_obs, got_reward, terminated = step(key, state, (jnp.int32(choice), parameters))
        np.testing.assert_allclose(got_obs, obs, atol=1e-6, err_msg=f"step {index}")
        np.testing.assert_allclose(float(got_reward), reward, atol=1e-6, err_msg=f"step {index}")
        assert bool(terminated) == bool(success(state)) == (reward > 4), index


def test_actuators_and_choice_motions_by_hand():
    """Actuator k points at 2 pi k / n (rounded to 3 decimals); choice c fires actuator k on bit
    n-1-k. The longest sum is that of the n/2 neighbouring actuators of a half circle (then
    rounded): sqrt(2), 2, |(1, 1 + 2 * 0.707)| and |(1, 2 * 0.588 + 2 * 0.951)|; every motion is
    divided by it."""
    np.testing.assert_array_equal(actuator_directions(4), [[1, 0], [0, 1], [-1, 0], [0, -1]])
    np.testing.assert_array_equal(actuator_directions(6)[1], [0.5, 0.866])
    longest = {4: np.sqrt(2), 6: 2.0, 8: np.hypot(1, 1 + 2 * 0.707), 10: np.hypot(1, 3.078)}
    for n, length in longest.items():
        motions = choice_motions(n)
        assert motions.shape == (2**n, 2) and motions.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(motions, axis=1).max(), 1.0, rtol=1e-6)
        np.testing.assert_allclose(motions[2 ** (n - 1)], [1 / length, 0], rtol=1e-6)  # actuator 0
        np.testing.assert_allclose(motions[1], actuator_directions(n)[-1] / length, rtol=1e-6)
        np.testing.assert_array_equal(motions[0], [0, 0])
    s = 1 / np.sqrt(2)
    np.testing.assert_allclose(
        choice_motions(4)[[0b1000, 0b0100, 0b1100, 0b1010, 0b0111, 0b1111]],
        [[s, 0], [0, s], [s, s], [0, 0], [-s, 0], [0, 0]],
        atol=1e-7,
    )  # right, up, right + up, right + left cancel, up + left + down, all four cancel


def test_firing_an_actuator_moves_the_agent_as_computed():
    """By hand, n = 4: actuator 1 (up, choice 0b0100) at magnitude 0.5 from rest: force
    2 * 0.5 * (0, 1 / sqrt 2); velocity 0.1 force = (0, 0.0707107); the agent moves 0.1 velocity.
    Again: velocity 0.75 * 0.0707107 + 0.0707107 = 0.1237437, position 0.0070711 + 0.0123744."""
    step = jax.jit(make_core(4).step)
    state = start_state([0.5, -0.5], [-0.9, 0.9])
    action = (jnp.int32(0b0100), one_hot_parameters(4, 0b0100, 0.5))
    state, obs, reward, terminated = step(jax.random.PRNGKey(0), state, action)
    push = 0.1 / np.sqrt(2)
    np.testing.assert_allclose(state.velocity, [0, push], atol=1e-7)
    np.testing.assert_allclose(state.position, [0.5, -0.5 + 0.1 * push], atol=1e-7)
    np.testing.assert_allclose(obs, [0, push, -1.4, 1.4 - 0.1 * push], atol=1e-6)
    np.testing.assert_allclose(float(reward), -(1.4**2 + (1.4 - 0.1 * push) ** 2), rtol=1e-6)
    assert not terminated
    state, *_ = step(jax.random.PRNGKey(1), state, action)
    np.testing.assert_allclose(state.velocity, [0, 1.75 * push], atol=1e-7)
    np.testing.assert_allclose(state.position, [0.5, -0.5 + 0.275 * push], atol=1e-7)
    # Only the chosen choice's magnitude counts, and a negative one pushes backwards.
    others = jnp.full((16,), 0.9).at[0b0100].set(-0.5)
    back, *_ = step(jax.random.PRNGKey(0), start_state([0, 0], [1, 1]), (jnp.int32(4), others))
    np.testing.assert_allclose(back.velocity, [0, -push], atol=1e-7)


def test_reaching_the_target_terminates_with_the_bonus():
    """By hand: full push right (n = 4, choice 0b1000) from the origin moves the agent to
    x = 0.02 / sqrt 2 = 0.0141421; a target at 0.21 is then 0.1958579 away, inside 0.2: reward
    20 - 0.1958579^2 = 19.9616397, terminated. A target at 0.25 stays 0.2358579 away: -0.0556290."""
    step = jax.jit(hardmove.CORE.step)
    action = (jnp.int32(0b1000), one_hot_parameters(4, 0b1000, 1.0))
    x = 0.02 / np.sqrt(2)
    for target, reached in ((0.21, True), (0.25, False)):
        state, _, reward, terminated = step(
            jax.random.PRNGKey(0), start_state([0, 0], [target, 0]), action
        )
        expected = 20 - (target - x) ** 2 if reached else -((target - x) ** 2)
        np.testing.assert_allclose(float(reward), expected, rtol=1e-6)
        assert bool(terminated) == bool(success(state)) == reached


def test_action_layout():
    assert MAX_EPISODE_STEPS == 30 and NUM_CHOICES == 16  # HyAR's default n = 4
    assert [(c, c + 1) for c in range(16)] == list(PARAMETER_SLICES)
    np.testing.assert_array_equal(PARAMETER_LOW, np.full(16, -1, np.float32))
    np.testing.assert_array_equal(PARAMETER_HIGH, np.full(16, 1, np.float32))
    eight = HardMove(8)
    assert eight.num_choices == 256 and len(eight.parameter_slices) == 256
    assert eight.parameter_slices[255] == (255, 256) and eight.parameter_low.shape == (256,)
    for bad in (0, 17):
        with pytest.raises(ValueError, match=f"num_actuators={bad}"):
            HardMove(bad)


@pytest.mark.parametrize("num_actuators", [4, 6, 8, 10])
def test_jit_and_vmap_over_4_envs_equal_unbatched_steps(num_actuators: int):
    core = make_core(num_actuators)
    keys = jax.random.split(jax.random.PRNGKey(num_actuators), 4)
    states, obs = jax.jit(jax.vmap(core.reset))(keys)
    assert (np.abs(states.position) <= 1).all() and (np.abs(states.target) <= 1).all()
    np.testing.assert_array_equal(obs[:, :2], 0)
    np.testing.assert_allclose(obs[:, 2:], states.target - states.position, atol=1e-7)
    rng = np.random.default_rng(num_actuators)
    choices = jnp.asarray(rng.integers(0, 2**num_actuators, 4), jnp.int32)
    parameters = jnp.asarray(rng.uniform(-1, 1, (4, 2**num_actuators)), jnp.float32)
    batched = jax.jit(jax.vmap(core.step))(keys, states, (choices, parameters))
    single = jax.jit(core.step)
    for i in range(4):
        state = jax.tree.map(lambda leaf, i=i: leaf[i], states)
        one = single(keys[i], state, (choices[i], parameters[i]))
        for got, want in zip(jax.tree.leaves(batched), jax.tree.leaves(one), strict=True):
            np.testing.assert_allclose(got[i], want, rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(observe(one[0]), one[1])
