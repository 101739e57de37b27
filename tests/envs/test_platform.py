"""Platform (`Platform-v0`, envs/platform.py): step-by-step parity with gym-platform's physics on
recorded trajectories, and hand checks of the reward, termination, parameter clipping, the
observation's platform features and batching. One jitted step serves every test (a few seconds).

The reference numbers below come from gym-platform's `gym_platform/envs/platform_env.py` (HyAR's
copy, github.com/TJU-DRL-LAB/AI-Optimizer commit 8a45c22,
`ssrl/RL_with_Action_Representation/HyAR/gym-platform-master/`), run in float64 from a local copy
with rendering and gym removed (`cd /tmp/gym-platform-ref && python record.py`, which printed
these literals). Its `np_random` draws were replaced by the draws our step makes, so that both
sides see the same noise: action t of an episode uses key fold_in(make_key(0), t), and its
sub-step i z = normal(fold_in(key, i), (4,)); the jump's normal(0, dev, 2) returned dev * z[0:2],
the player's normal(0, s) s * z[2], the moving enemy's normal(0, s) s * z[3]. The recorded
observations are gym-platform's features in [0, 1]; ours are those mapped onto [−1, 1] by the
`ScaledStateWrapper` the references' Platform scripts add (`wrapped`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs import platform
from envs.platform import (
    PARAMETER_HIGH,
    PARAMETER_LOW,
    PLATFORM_HEIGHT,
    RIGHT_BOUND,
    SUBSTEP_LIMIT,
    PlatformState,
    observe,
    on_platforms,
    success,
)
from jaxrl.prng import make_key

# After each action, from the reference: (choice, parameters, reward, terminated, sub-steps,
# obs), with the player's position after it in the comment.
# fmt: off
RESET_OBS = [0.018957345971563982, 0.0, 0.2222222222222222, 0.0, 0.9090909090909091, 1.0,
             0.9574468085106383, 0.0, 0.0]
# Hop over the first enemy, run to the edge; out-of-range and unused parameters on purpose.
PREFIX = [
    (1, [-7, 300, 5], 0.1032609738, False, 141,  # x=106.88 y=40.00
     [0.12026077, 0, 0.020592031, 0.0079940998, 0.90909091, 1, 0.95744681, 0, 0]),
    (0, [45, 0, 0], 0.0651994993, False, 20,  # x=174.36 y=40.00
     [0.18422426, 0.693, 0.0071442974, 0.99263621, 0.90909091, 1, 0.95744681, 0, 0]),
    (0, [3, -1, 0], 0.06763285024, False, 20,  # x=244.36 y=40.00
     [0.25057497, 0.693, 0.035693256, 0.99283735, 0.90909091, 1, 0.95744681, 0, 0]),
]
# From the prefix: hops across both gaps and over the second enemy, then a run onto the goal.
SUCCESS = [
    (1, [0, 720, 0], 0.2503372014, False, 142,  # x=503.46 y=40.00
     [0.49616644, 0, 0.66343382, 0.0021147038, 1, 0.18181818, 1, 0.4589372, 0]),
    (1, [0, 300, 0], 0.1023742937, False, 139,  # x=609.41 y=40.00
     [0.59659999, 0, 0.46293242, 6.76244e-05, 1, 0.18181818, 1, 0.4589372, 0]),
    (1, [0, 300, 0], 0.1042729036, False, 142,  # x=717.34 y=40.00
     [0.69889615, 0, 0.6593256, 0.99816117, 1, 0.18181818, 1, 0.4589372, 0]),
    (0, [3, 0, 0], 0.02847149874, False, 20,  # x=746.80 y=40.00
     [0.72682791, 0.53789562, 0.68826796, 0.99898274, 1, 0.18181818, 1, 0.4589372, 0]),
    (1, [0, 720, 0], 0.2519943141, False, 144,  # x=1007.62 y=40.00
     [0.97404508, 0, 0.5154191, 0.0057124979, 0.18181818, 0, 0, 0.95169082, 0]),
    (0, [3, 0, 0], 0.02645646516, True, 20,  # x=1035.00 y=40.00
     [1, 0.53728339, 0.48679942, 0.005631093, 0.18181818, 0, 0, 0.95169082, 0]),
]
# From the prefix: a full leap (1000 clipped to 430) lands on the second platform's overhang.
LEAP_ACROSS = [
    (2, [99, 99, 1000], 0.2079638794, False, 101,  # x=459.60 y=40.00
     [0.4545964, 0, 0.17984, 0.99296161, 0.90909091, 1, 0.95744681, 0, 0]),
    (0, [30, 0, 0], 0.06520083223, False, 20,  # x=527.08 y=40.00
     [0.5185612, 0.693, 0.68652804, 0.00062720833, 1, 0.18181818, 1, 0.4589372, 0]),
]
# From the prefix: a leap aimed 0 ahead brakes and falls into the first gap.
LEAP_SHORT = [
    (2, [0, 0, 0], 0.117136066, True, 101,  # x=365.59 y=39.16
     [0.36549044, 0.1296321, 0.17984, 0.99296161, 0.90909091, 1, 0.95744681, 0, 0]),
]
# From the prefix: running on off the edge falls on the third sub-step.
RUN_OFF_EDGE = [
    (0, [30, 0, 0], 0.01010924994, True, 3,  # x=254.82 y=39.98
     [0.26049257, 0.68568859, 0.039981493, 0.99283063, 0.90909091, 1, 0.95744681, 0, 0]),
]
# From the start: running into the first enemy.
ENEMY = [
    (0, [30, 0, 0], 0.06520092032, False, 20,  # x=67.48 y=40.00
     [0.08292223, 0.693, 0.19471431, 0.0016164158, 0.90909091, 1, 0.95744681, 0, 0]),
    (0, [30, 0, 0], 0.06763285024, False, 20,  # x=137.48 y=40.00
     [0.14927294, 0.693, 0.1658056, 0.00048752254, 0.90909091, 1, 0.95744681, 0, 0]),
    (0, [30, 0, 0], 0.01014492754, True, 3,  # x=147.98 y=40.00
     [0.15922555, 0.693, 0.16146004, 0.00011509888, 0.90909091, 1, 0.95744681, 0, 0]),
]
# fmt: on
EPISODES = {
    "success": PREFIX + SUCCESS,
    "leap_across": PREFIX + LEAP_ACROSS,
    "leap_short": PREFIX + LEAP_SHORT,
    "run_off_edge": PREFIX + RUN_OFF_EDGE,
    "enemy": ENEMY,
}

ROOT = make_key(0)
STEP = jax.jit(platform.step)


def wrapped(features: list[float]) -> np.ndarray:
    """gym-platform's features as the references' agents saw them: 2f − 1, the
    `ScaledStateWrapper` over gym-platform's [0, 1] observation box."""
    return 2.0 * np.asarray(features, np.float64) - 1.0


def action(choice: int, parameters: list[float]) -> tuple[jax.Array, jax.Array]:
    return jnp.int32(choice), jnp.asarray(parameters, jnp.float32)


def play(episode: list[tuple]) -> list[tuple[PlatformState, np.ndarray, float, bool]]:
    """(state, obs, reward, terminated) after each action of `episode`, from the start, action t
    with key fold_in(ROOT, t) as the reference was run."""
    state, _ = platform.reset(ROOT)
    out = []
    for t, (choice, parameters, *_) in enumerate(episode):
        state, obs, reward, terminated = STEP(
            jax.random.fold_in(ROOT, t), state, action(choice, parameters)
        )
        out.append((state, np.asarray(obs), float(reward), bool(terminated)))
    return out


def test_reset_matches_the_reference_and_the_formula() -> None:
    state, obs = platform.reset(ROOT)
    assert obs.dtype == jnp.float32 and obs.shape == (platform.OBS_SIZE,)
    np.testing.assert_allclose(obs, wrapped(RESET_OBS), atol=2e-7)
    # x = 0 (+20) / 1055, standing still; enemy 1 at 250 - 20 walking left at full speed;
    # platform 1 (250 wide) then 275 wide after a 225 gap, at x 0, height difference 0.
    by_hand = [20 / 1055, 0, 230 / 1035, (-30 + 30) / 60, 250 / 275, 275 / 275, 225 / 235, 0, 0]
    np.testing.assert_allclose(RESET_OBS, by_hand, atol=1e-12)
    np.testing.assert_allclose(np.asarray(obs)[[1, 5, 7, 8]], [-1, 1, -1, -1], atol=2e-7)  # 2f − 1
    np.testing.assert_array_equal(state.position, [0.0, PLATFORM_HEIGHT])
    np.testing.assert_array_equal(platform.reset(make_key(1))[1], obs)  # nothing is drawn


@pytest.mark.parametrize("name", list(EPISODES))
def test_trajectory_matches_the_reference(name: str) -> None:
    episode = EPISODES[name]
    for t, ((state, obs, reward, terminated), expected) in enumerate(
        zip(play(episode), episode, strict=True)
    ):
        _, _, ref_reward, ref_terminated, ref_substeps, ref_obs = expected
        np.testing.assert_allclose(obs, wrapped(ref_obs), atol=4e-6, err_msg=f"{name} action {t}")
        assert reward == pytest.approx(ref_reward, abs=2e-6), (name, t)
        assert terminated == ref_terminated, (name, t)
        assert int(state.substeps) == ref_substeps < SUBSTEP_LIMIT, (name, t)


def test_a_full_run_through_scores_one() -> None:
    steps = play(PREFIX + SUCCESS)
    rewards = [reward for _, _, reward, _ in steps]
    assert sum(rewards) == pytest.approx(1.0, abs=1e-5)
    # Each reward is the distance the action covered over the world's width.
    xs = [0.0] + [float(state.position[0]) for state, *_ in steps]
    np.testing.assert_allclose(rewards, np.diff(xs) / RIGHT_BOUND, atol=1e-6)
    assert xs[-1] == RIGHT_BOUND
    assert [bool(success(state)) for state, *_ in steps] == [False] * 8 + [True]
    assert [terminated for *_, terminated in steps] == [False] * 8 + [True]


@pytest.mark.parametrize("name", ["leap_short", "run_off_edge"])
def test_falling_into_the_first_gap_terminates(name: str) -> None:
    steps = play(EPISODES[name])
    before, after = steps[-2][0], steps[-1][0]
    assert bool(on_platforms(before.position))
    x, y = (float(v) for v in after.position)
    assert 250.0 < x < 475.0 - 20.0 and y < PLATFORM_HEIGHT  # over the gap, below the platforms
    assert steps[-1][3] and not bool(on_platforms(after.position)) and not bool(success(after))
    assert steps[-1][2] == pytest.approx((x - float(before.position[0])) / RIGHT_BOUND, abs=1e-6)


def test_touching_an_enemy_terminates() -> None:
    (*_, (state, _, _, terminated)) = play(ENEMY)
    gap = float(state.position[0] - state.enemy_x[0])
    assert terminated and abs(gap) < 20.0 and float(state.position[1]) == PLATFORM_HEIGHT
    assert not bool(success(state))


def test_parameters_are_clipped_and_the_others_ignored() -> None:
    np.testing.assert_array_equal(PARAMETER_LOW, [0, 0, 0])
    np.testing.assert_array_equal(PARAMETER_HIGH, [30, 720, 430])  # the reference's bounds
    start = play(PREFIX[:1])[0][0]  # standing on platform 1, enemy 1 behind
    key = make_key(3)

    def after(choice: int, parameters: list[float]) -> PlatformState:
        return STEP(key, start, action(choice, parameters))[0]

    def same(a: PlatformState, b: PlatformState) -> bool:
        return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))

    for choice, outside, bound, inside in [
        (0, 45.0, 30.0, 10.0),
        (0, -5.0, 0.0, 10.0),
        (1, 800.0, 720.0, 100.0),
        (1, -10.0, 0.0, 100.0),
        (2, 1000.0, 430.0, 100.0),
        (2, -1.0, 0.0, 100.0),
    ]:
        clipped = after(choice, [bound if i == choice else 0.0 for i in range(3)])
        wild = after(choice, [outside if i == choice else 1e4 for i in range(3)])
        assert same(wild, clipped), (choice, outside)
        other = after(choice, [inside if i == choice else 0.0 for i in range(3)])
        assert not same(other, clipped), (choice, inside)  # the chosen parameter does matter


def test_platform_features_switch_as_the_reference_does() -> None:
    state, _ = platform.reset(ROOT)
    enemy_x = np.asarray(state.enemy_x)  # 230 and 730
    segments = {  # this width, the next, the gap, its x; scaled as the reference scales them
        0: [250 / 275, 275 / 275, 225 / 235, 0 / 1035],
        1: [275 / 275, 50 / 275, 235 / 235, 475 / 1035],
        2: [50 / 275, 0, 0, 985 / 1035],
    }
    # At exactly x = 475 the reference shows platform 2's features but still enemy 1 (x > 475).
    for x, segment, enemy in [(474.5, 0, 0), (475.0, 1, 0), (475.5, 1, 1), (985.0, 2, 1)]:
        obs = observe(state._replace(position=jnp.array([x, PLATFORM_HEIGHT], jnp.float32)))
        np.testing.assert_allclose(obs[4:8], wrapped(segments[segment]), atol=2e-7, err_msg=str(x))
        assert obs[2] == pytest.approx(2 * enemy_x[enemy] / 1035 - 1, abs=2e-7), x
        assert obs[0] == pytest.approx(2 * (x + 20) / 1055 - 1, abs=2e-7), x


def test_jit_vmap_matches_unbatched() -> None:
    states = [platform.reset(ROOT)[0]] + [state for state, *_ in play(PREFIX)]
    actions = [
        action(0, [20, 0, 0]),
        action(1, [0, 500, 0]),
        action(2, [0, 0, 430]),
        action(2, [0, 0, 430]),
    ]
    keys = jax.random.split(make_key(5), 4)
    batched = jax.jit(jax.vmap(platform.CORE.step))(
        keys,
        jax.tree.map(lambda *xs: jnp.stack(xs), *states),
        jax.tree.map(lambda *xs: jnp.stack(xs), *actions),
    )
    for i in range(4):
        single = STEP(keys[i], states[i], actions[i])
        for got, want in zip(jax.tree.leaves(batched), jax.tree.leaves(single), strict=True):
            np.testing.assert_allclose(got[i], want, atol=1e-6, err_msg=f"env {i}")
    # The four envs did different things: a run, a hop, a leap into the gap, a leap across it.
    np.testing.assert_array_equal(batched[3], [False, False, True, False])
    np.testing.assert_array_equal(batched[0].substeps, [20, 143, 103, 102])
    _, obs = jax.vmap(platform.CORE.reset)(keys)
    np.testing.assert_allclose(obs, np.tile(wrapped(RESET_OBS), (4, 1)), atol=2e-7)
