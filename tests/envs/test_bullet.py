"""Our PyBullet envs: Gymnasium's checker, seeding, frames, hand-checked physics, and a hand-written
controller per env showing the task can be solved (what a learner has to reach)."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
pytest.importorskip("pybullet")

from gymnasium.utils.env_checker import check_env  # noqa: E402

import envs.bullet  # noqa: E402  (registers the bullet/ ids)
from envs.bullet.cartpole import CartPoleBulletEnv  # noqa: E402
from envs.bullet.racecar import OvalTrack  # noqa: E402

G = 9.81


def _make(env_id: str, **kwargs):
    return gymnasium.make(env_id, **kwargs)


@pytest.mark.parametrize("env_id", envs.bullet.IDS)
def test_passes_gymnasium_env_checker(env_id: str) -> None:
    env = _make(env_id, render_mode="rgb_array")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    # The only complaint allowed: unbounded observation boxes (velocities have no natural bound).
    others = [str(w.message) for w in caught if "infinity" not in str(w.message)]
    assert others == []
    env.close()


@pytest.mark.parametrize("env_id", envs.bullet.IDS)
def test_same_seed_and_actions_give_identical_observations(env_id: str) -> None:
    """Bitwise, across two envs and across episodes of one env (the saved world is restored)."""
    first, second = _make(env_id), _make(env_id)
    first.action_space.seed(0)
    action_list = [first.action_space.sample() for _ in range(60)]

    def trajectory(env) -> np.ndarray:
        obs, _ = env.reset(seed=123)
        out = [obs]
        for action in action_list:
            obs, reward, terminated, truncated, _ = env.step(action)
            out.append(np.append(obs, reward))
            if terminated or truncated:
                break
        return np.concatenate(out)

    a = trajectory(first)
    second.reset(seed=7)
    for action in action_list[:20]:  # a different episode in between
        second.step(action)
    b = trajectory(second)
    c = trajectory(first)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    other, _ = first.reset(seed=124)
    assert not np.array_equal(other, a[: other.size])
    first.close()
    second.close()


@pytest.mark.parametrize("env_id", envs.bullet.IDS)
def test_renders_a_frame_that_is_not_blank(env_id: str) -> None:
    env = _make(env_id, render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame.shape == (240, 320, 3) and frame.dtype == np.uint8
    _, counts = np.unique(frame.reshape(-1, 3), axis=0, return_counts=True)
    assert len(counts) >= 5 and counts.max() < 0.8 * counts.sum() and frame.std() > 20
    env.close()
    quiet = _make(env_id)
    quiet.reset(seed=0)
    with pytest.warns(UserWarning, match="render_mode"):
        assert quiet.render() is None  # no render_mode: no frame


def test_making_envs_prints_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    """pybullet prints `argv[0]=` from C for a connect given `options`; a pool of 64 envs would
    print 64 lines."""
    capfd.readouterr()
    made = [_make(env_id) for env_id in envs.bullet.IDS for _ in range(2)]
    for env in made:
        env.reset(seed=0)
        env.close()
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


def test_render_mode_is_checked() -> None:
    with pytest.raises(ValueError, match="rgb_array"):
        CartPoleBulletEnv(render_mode="human")


# --- CartPole -------------------------------------------------------------------------------------

M_CART, M_POLE, HALF_POLE = 1.0, 0.1, 0.5
POLE_INERTIA = M_POLE * (1.0**2 + 0.05**2) / 12  # about its centre: Bullet's from the 5 cm box
PIVOT_INERTIA = POLE_INERTIA + M_POLE * HALF_POLE**2


def _cartpole_model(dt: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """The cart-pole linearised about upright, (x, ẋ, θ, θ̇), with the force held for dt:
    (M+m) ẍ + m l θ̈ = F and (I + m l²) θ̈ + m l ẍ = m g l θ."""
    from scipy.linalg import expm

    mass = np.array([[M_CART + M_POLE, M_POLE * HALF_POLE], [M_POLE * HALF_POLE, PIVOT_INERTIA]])
    inv = np.linalg.inv(mass)
    a = np.zeros((4, 4))
    a[0, 1] = a[2, 3] = 1.0
    a[1, 2], a[3, 2] = inv[:, 1] * M_POLE * G * HALF_POLE
    b = np.array([0.0, inv[0, 0], 0.0, inv[1, 0]])
    block = np.zeros((5, 5))
    block[:4, :4], block[:4, 4] = a, b
    discrete = expm(block * dt)
    return discrete[:4, :4], discrete[:4, 4]


def test_cartpole_one_push_from_rest_matches_the_hand_computed_dynamics() -> None:
    """From rest upright, +50 N gives ẍ = F / (M + m - m²l²/(I + ml²)) = 48.78 m/s² and
    θ̈ = -m l ẍ / (I + ml²) = -73.1 rad/s². Over one step (12 substeps of h = 1/240 s) Bullet's
    semi-implicit Euler gives ẋ = 12 h ẍ = 2.439 and x = h² ẍ (1 + ... + 12) = 78 h² ẍ."""
    env = _make("bullet/CartPole-v0")
    obs, _ = env.reset(seed=0, options={"state": (0.0, 0.0, 0.0, 0.0)})
    np.testing.assert_array_equal(obs, np.zeros(4, np.float32))
    obs, reward, terminated, truncated, _ = env.step(1)
    x_acc = 50.0 / (M_CART + M_POLE - (M_POLE * HALF_POLE) ** 2 / PIVOT_INERTIA)
    theta_acc = -M_POLE * HALF_POLE * x_acc / PIVOT_INERTIA
    assert x_acc == pytest.approx(48.78, abs=0.01)
    assert theta_acc == pytest.approx(-73.1, abs=0.1)
    h = 1 / 240
    assert obs[1] == pytest.approx(12 * h * x_acc, rel=1e-3)
    assert obs[0] == pytest.approx(78 * h**2 * x_acc, rel=1e-3)
    # The pole's angle feeds back through gravity within the step: percent-level agreement.
    assert obs[3] == pytest.approx(12 * h * theta_acc, rel=0.01)
    assert obs[2] == pytest.approx(78 * h**2 * theta_acc, rel=0.01)
    assert (reward, terminated, truncated) == (1.0, False, False)
    # The linearised model the lookahead controller below uses predicts the velocities too.
    model_a, model_b = _cartpole_model()
    np.testing.assert_allclose(obs[[1, 3]], (model_b * 50.0)[[1, 3]], rtol=0.01)
    obs, *_ = env.step(0)  # and pushing back nearly cancels it: within 2% of one push's change
    predicted = model_a @ (model_b * 50.0) - model_b * 50.0
    np.testing.assert_allclose(obs[[1, 3]], predicted[[1, 3]], atol=0.02 * 3.68)


def test_cartpole_terminates_exactly_when_the_angle_passes_the_limit() -> None:
    env = _make("bullet/CartPole-v0")
    env.reset(seed=0, options={"state": (0.0, 0.0, 0.1, 0.3)})  # falling towards +x
    thetas = []
    while True:
        obs, reward, terminated, truncated, _ = env.step(0)  # pushing the cart away: it falls
        thetas.append(float(obs[2]))
        assert reward == 1.0 and not truncated
        assert terminated == (abs(obs[2]) > 0.2095)
        if terminated:
            break
    assert all(t <= 0.2095 for t in thetas[:-1]) and thetas[-1] > 0.2095
    env.reset(seed=0, options={"state": (9.99, 1.0, 0.0, 0.0)})  # the cart runs off the bar
    obs, _, terminated, *_ = env.step(1)
    assert obs[0] > 10.0 and abs(obs[2]) < 0.2095 and terminated


def test_cartpole_is_solvable_for_500_steps_by_lookahead_control() -> None:
    """±50 N at 20 Hz is coarse: one push changes θ̇ by 3.7 rad/s, so θ moves on a lattice of
    ~0.09 rad steps and a PD rule (sign of θ + 0.1 θ̇) keeps the pole up but lets the cart drift
    past ±10 m. An exhaustive 10-step (0.5 s) lookahead over the linearised model above,
    keeping |θ| < 0.2 and penalising cart position and momentum, holds every seed we tried to
    the 500-step truncation."""
    model_a, model_b = _cartpole_model()
    pushes = np.array(list(itertools.product((-50.0, 50.0), repeat=10)))

    def act(obs: np.ndarray) -> int:
        s = np.repeat(obs[None].astype(np.float64), len(pushes), axis=0)
        cost = np.zeros(len(pushes))
        for k in range(pushes.shape[1]):
            s = s @ model_a.T + model_b[None] * pushes[:, k : k + 1]
            momentum = s[:, 1] + model_b[1] / -model_b[3] * s[:, 3]  # unchanged by pushes
            cost += s[:, 0] ** 2 + momentum**2 + 1e6 * (np.abs(s[:, 2]) > 0.2)
        return int(pushes[np.argmin(cost), 0] > 0)

    env = _make("bullet/CartPole-v0")
    for seed in (0, 1):
        obs, _ = env.reset(seed=seed)
        steps = 0
        while True:
            obs, _, terminated, truncated, _ = env.step(act(obs))
            steps += 1
            if terminated or truncated:
                break
        assert (steps, terminated, truncated) == (500, False, True)


# --- BalancingPlate -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("angles", "axis", "sign"), [((0.05, 0.0), 2, 1.0), ((0.0, 0.05), 3, -1.0)]
)
def test_ball_rolls_down_a_tilt_at_three_fifths_g_sin_theta(angles, axis, sign) -> None:
    """A thin shell rolling without slipping: a = g sin θ / (1 + 2/3) = 0.294 m/s² at 0.05 rad
    (a solid ball would reach 5/7 g sin θ = 0.350), less ~3% of rolling resistance. Positive
    pitch lowers the +x edge; positive roll lifts the +y edge."""
    env = _make("bullet/BalancingPlateContinuous-v0")
    start = (-0.1, 0.0) if axis == 2 else (0.0, 0.1)
    obs, _ = env.reset(seed=0, options={"plate_angles": angles, "ball_position": start})
    np.testing.assert_allclose(obs[:2], start, atol=1e-6)
    np.testing.assert_allclose(obs[4:6], angles, atol=1e-6)
    speeds = []
    for _ in range(20):  # 1 s; the 5 mm drop has stopped bouncing after about 0.4 s
        obs, reward, terminated, *_ = env.step(np.zeros(2, np.float32))
        assert reward == 1.0 and not terminated
        speeds.append(obs[axis])
    acceleration = (speeds[19] - speeds[9]) / 0.5
    assert acceleration == pytest.approx(sign * 0.6 * G * math.sin(0.05), rel=0.04)
    across = 3 if axis == 2 else 2
    assert abs(obs[across]) < 1e-4  # no motion across the slope
    ball = env.unwrapped.ball
    velocity, spin = env.unwrapped._p.getBaseVelocity(ball)
    assert np.linalg.norm(spin) * 0.01 == pytest.approx(np.linalg.norm(velocity), rel=0.01)


def test_ball_released_off_the_plate_terminates_with_no_reward() -> None:
    env = _make("bullet/BalancingPlate-v0")
    obs, _ = env.reset(seed=0, options={"plate_angles": (0.0, 0.0), "ball_position": (0.2, 0.0)})
    assert obs[0] == pytest.approx(0.2)
    obs, reward, terminated, truncated, _ = env.step(0)
    assert (reward, terminated, truncated) == (0.0, True, False)


def test_discrete_actions_step_the_servo_targets() -> None:
    env = _make("bullet/BalancingPlate-v0")
    env.reset(seed=0, options={"plate_angles": (0.0, 0.0), "ball_position": (0.0, 0.0)})
    for action, expected in [
        (0, (0.01, 0.0)),
        (0, (0.02, 0.0)),
        (3, (0.02, -0.01)),
        (1, (0.01, -0.01)),
    ]:
        obs, *_ = env.step(action)
        np.testing.assert_allclose(obs[4:6], expected, atol=5e-4)  # the servo follows in a step


def _plate_controller(obs: np.ndarray) -> np.ndarray:
    """PD on the ball: the tilt each axis should have, as (pitch, roll) targets."""
    u, v, du, dv, pitch, roll = obs[:6]
    wanted = np.array([-(u + 0.5 * du), v + 0.5 * dv])
    return wanted - np.array([pitch, roll])


@pytest.mark.parametrize("continuous", [False, True])
def test_plate_keeps_the_ball_for_the_full_cap_under_pd_control(continuous: bool) -> None:
    env_id = "bullet/BalancingPlateContinuous-v0" if continuous else "bullet/BalancingPlate-v0"
    env = _make(env_id)
    obs, _ = env.reset(seed=0)
    total = 0.0
    while True:
        error = _plate_controller(obs)
        if continuous:
            action = np.clip(error / 0.01, -1.0, 1.0).astype(np.float32)
        else:
            joint = int(np.argmax(np.abs(error)))
            action = 2 * joint + (0 if error[joint] > 0 else 1)
        obs, reward, terminated, truncated, _ = env.step(action)
        total += reward
        if terminated or truncated:
            break
    assert (total, terminated, truncated) == (1000.0, False, True)
    assert np.abs(obs[:2]).max() < 0.02  # held near the centre


def test_plate_random_policy_loses_the_ball_quickly() -> None:
    env = _make("bullet/BalancingPlate-v0")
    env.action_space.seed(0)
    lengths = []
    for seed in range(3):
        env.reset(seed=seed)
        steps = 0
        while True:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            steps += 1
            if terminated or truncated:
                break
        lengths.append(steps)
    assert max(lengths) < 200 and terminated


# --- RaceCar --------------------------------------------------------------------------------------


def test_track_geometry_is_the_hand_computed_oval() -> None:
    track = OvalTrack(half_straight=5.0, radius=4.0)
    assert track.length == pytest.approx(20 + 8 * math.pi)
    assert track.point(0.0) == pytest.approx((0.0, -4.0))
    assert track.point(5.0) == pytest.approx((5.0, -4.0))
    quarter = 5.0 + 2 * math.pi  # a quarter of the right half circle past its start
    assert track.point(quarter) == pytest.approx((9.0, 0.0))
    assert track.project(9.0, 0.0) == pytest.approx((quarter, 0.0, math.pi / 2))
    assert track.project(8.5, 0.0) == pytest.approx((quarter, 0.5, math.pi / 2))  # inside: +
    top = 10.0 + 4 * math.pi  # the middle of the top straight
    assert track.point(top) == pytest.approx((0.0, 4.0))
    assert track.project(0.0, 4.5) == pytest.approx((top, -0.5, math.pi))
    assert track.project(-1.0, -4.0)[0] == pytest.approx(track.length - 1.0)
    for s in np.linspace(0.0, track.length, 37, endpoint=False):
        assert track.project(*track.point(s))[:2] == pytest.approx((s, 0.0), abs=1e-9)


def test_racecar_full_throttle_straight_earns_its_progress_then_leaves_the_track() -> None:
    env = _make("bullet/RaceCar-v0")
    obs, _ = env.reset(seed=0)
    start_x = env.unwrapped._p.getBasePositionAndOrientation(env.unwrapped.car)[0][0]
    rewards = []
    while True:
        obs, reward, terminated, truncated, _ = env.step(np.array([0.0, 1.0], np.float32))
        rewards.append(reward)
        if terminated or truncated:
            break
        x = env.unwrapped._p.getBasePositionAndOrientation(env.unwrapped.car)[0][0]
        if x < 5.0:  # on the bottom straight, progress is the distance along x
            assert sum(rewards) == pytest.approx(x - start_x, abs=0.05)
    assert rewards[0] > 0.0 and rewards[5] > rewards[1] > rewards[0]  # it speeds up
    assert obs[0] == pytest.approx(3.0, abs=0.15)  # 60 rad/s on 5 cm wheels
    # Going straight it runs off the outside of the first bend: offset beyond the half width.
    assert terminated and not truncated and obs[3] < -1.0
    assert sum(rewards) > 5.0


def test_racecar_reverse_throttle_loses_progress() -> None:
    env = _make("bullet/RaceCar-v0")
    env.reset(seed=0)
    total = sum(env.step(np.array([0.0, -1.0], np.float32))[1] for _ in range(20))
    assert total < -1.0


def test_racecar_pure_pursuit_laps_the_track() -> None:
    """Steering towards the centreline point 3 m ahead at full throttle: ~3 m/s for 20 s."""
    env = _make("bullet/RaceCar-v0", max_episode_steps=400)
    obs, _ = env.reset(seed=0)
    total = 0.0
    while True:
        steer = np.clip(2.0 * math.atan2(obs[9], obs[8]), -1.0, 1.0)
        obs, reward, terminated, truncated, _ = env.step(np.array([steer, 1.0], np.float32))
        total += reward
        assert abs(obs[3]) <= 1.0
        if terminated or truncated:
            break
    assert truncated and not terminated
    assert total > 55.0  # more than a lap (45.1 m) in 20 s
