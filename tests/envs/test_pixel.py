"""pixel/CartPole-v1: layout, frame stack, the drawn scene against hand-computed geometry (and
against Gymnasium's own renderer where pygame is installed), CartPole-v1's episode ends, seeding."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from envs.pixel import ENV_ID, episode_steps, render_cartpole


def cartpole_state(env: gym.Env) -> np.ndarray:
    return np.asarray(env.unwrapped.cartpole.unwrapped.state)


def balance(state: np.ndarray) -> int:
    """A linear controller that keeps the pole up for all 500 CartPole steps at frame skip 4."""
    x, x_dot, theta, theta_dot = state
    return int(theta + 0.3 * theta_dot + 0.05 * x + 0.1 * x_dot > 0)


def darkness_centroid(row: np.ndarray) -> float:
    weight = 255.0 - row.astype(np.float64)
    return float((weight * np.arange(row.size)).sum() / weight.sum())


def test_observation_layout_and_api() -> None:
    env = gym.make(ENV_ID)
    assert env.observation_space == gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
    assert env.action_space == gym.spaces.Discrete(2)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (84, 84, 4) and obs.dtype == np.uint8
    assert not obs[..., :3].any()  # zeros before the first frame
    np.testing.assert_array_equal(obs[..., 3], render_cartpole(cartpole_state(env)))
    assert env.spec is not None and env.spec.max_episode_steps is None
    assert episode_steps() == 125 and episode_steps(3) == 167
    check_env(env.unwrapped, skip_render_check=True)  # the one-frame env itself
    other = gym.make(ENV_ID, frame_skip=2, frame_stack=3)
    assert other.reset(seed=0)[0].shape == (84, 84, 3)


def test_frame_stack_shifts() -> None:
    env = gym.make(ENV_ID)
    previous, _ = env.reset(seed=1)
    for _ in range(8):
        obs, _, terminated, truncated, _ = env.step(balance(cartpole_state(env)))
        assert not (terminated or truncated)
        np.testing.assert_array_equal(obs[..., :3], previous[..., 1:])
        np.testing.assert_array_equal(obs[..., 3], render_cartpole(cartpole_state(env)))
        previous = obs
    assert (previous[..., 3] != previous[..., 2]).any()  # the frames do change


def test_scene_geometry_by_hand() -> None:
    """84 columns span 600 px (7.14 px each), 84 rows span 400 px (4.76 px each)."""
    upright = render_cartpole(np.zeros(4))
    # Blank above the pole's tip (y = 107.5 + 120.5 = 228 px, row 172 from the top → row 36).
    assert (upright[:36] == 255).all() and (upright[37:50, 41] < 255).all()
    # The pole covers x in [294.5, 305.5]: 5.5 of column 41's 7.14 px (and of column 42's), so
    # 255 − 0.77 × (255 − 161) = 183 there (the 4 × 4 sampling sees 3/4: 185); 40 and 43 white.
    np.testing.assert_allclose(upright[45, [41, 42]], 183, atol=3)
    assert (upright[45, [40, 43]] == 255).all()
    # The 1-px track line at row 299 takes 1/4.76 of output row 62 away from the white.
    assert upright[62, 5] == round(255 * (1 - 84 / 400))
    # Row 63 (y 95–100 px) crosses only the cart: pygame fills x in [275, 326) at x = 0, centre
    # 300.5 px = column 41.57; 1 m to the right is 125 px = 17.5 columns further.
    moved = render_cartpole(np.array([1.0, 0.0, 0.0, 0.0]))
    assert (upright[63, 39:45] == 0).all() and upright[63, 38] == 128  # half of column 38
    assert darkness_centroid(upright[63]) == pytest.approx(41.57, abs=0.1)
    assert darkness_centroid(moved[63]) == pytest.approx(41.57 + 17.5, abs=0.1)


@pytest.mark.parametrize("theta", [-0.2, -0.1, 0.1, 0.2])
def test_the_pole_moves_with_theta(theta: float) -> None:
    """At output row 38 (y = 400 − 38.5 × 4.76 = 216.7 px, 109.2 px above the pivot) the pole's
    centre is at x = 300 + 109.2 tan θ: column 41.5 + 15.3 tan θ."""
    upright = render_cartpole(np.zeros(4))
    leaning = render_cartpole(np.array([0.0, 0.0, theta, 0.0]))
    assert (leaning != upright).any()
    expected = 41.5 + 109.2 * np.tan(theta) / (600 / 84)
    assert darkness_centroid(leaning[38]) == pytest.approx(expected, abs=0.3)
    # The cart does not move.
    np.testing.assert_array_equal(leaning[60:66, :35], upright[60:66, :35])


def test_matches_gymnasiums_renderer() -> None:
    """Gymnasium's pygame frame, grey and area-resized by Pillow, is the reference picture."""
    pytest.importorskip("pygame")
    image = pytest.importorskip("PIL.Image")
    env = gym.make("CartPole-v1", render_mode="rgb_array")
    env.reset(seed=0)
    for state in ([0.0, 0, 0, 0], [1.0, 0, 0.2, 0], [-2.0, 0, -0.21, 0], [0.3, 0, 1.0, 0]):
        env.unwrapped.state = np.array(state)
        rgb = env.render()
        reference = image.fromarray(rgb).convert("L").resize((84, 84), image.BOX)
        difference = np.abs(np.asarray(reference, float) - render_cartpole(np.array(state)))
        assert difference.mean() < 0.3 and difference.max() < 50
    env.close()


def test_episode_ends_exactly_as_cartpole_v1() -> None:
    """Each agent step is 4 CartPole-v1 steps: the same rewards (summed) and the same end flags
    as CartPole-v1 stepped with the repeated actions."""
    rng = np.random.default_rng(0)
    for seed, policy in ((3, "random"), (4, "balance")):
        pixel, plain = gym.make(ENV_ID), gym.make("CartPole-v1")
        pixel.reset(seed=seed)
        plain.reset(seed=seed)
        agent_steps, total = 0, 0.0
        while True:
            action = int(rng.integers(2)) if policy == "random" else balance(cartpole_state(pixel))
            _, reward, terminated, truncated, _ = pixel.step(action)
            agent_steps += 1
            total += reward
            plain_reward = 0.0
            for _ in range(4):
                _, r, plain_terminated, plain_truncated, _ = plain.step(action)
                plain_reward += r
                if plain_terminated or plain_truncated:
                    break
            assert reward == plain_reward
            assert (terminated, truncated) == (plain_terminated, plain_truncated)
            np.testing.assert_array_equal(cartpole_state(pixel), plain.unwrapped.state)
            if terminated or truncated:
                break
        if policy == "random":
            assert terminated and not truncated and agent_steps < 20
        else:  # the 500-step cap is counted in CartPole steps: 125 agent steps
            assert truncated and not terminated
            assert (agent_steps, total) == (125, 500.0)


def test_seeding_is_deterministic() -> None:
    def run(seed: int) -> np.ndarray:
        env = gym.make(ENV_ID)
        frames = [env.reset(seed=seed)[0]]
        for action in [0, 1, 1, 0, 1, 0, 0, 1]:
            frames.append(env.step(action)[0])
        return np.stack(frames)

    np.testing.assert_array_equal(run(5), run(5))
    assert (run(5) != run(6)).any()


def test_show_last_action_draws_each_frames_action_in_its_bottom_row() -> None:
    """The bottom row is background in every frame of an episode (rows 0-82 cover the scene), so
    `show_last_action` changes only it: grey in the reset frame, then black after a push to the
    left and white after one to the right; the stack carries the last four."""
    for x in (-2.4, 0.0, 2.4):  # the scene's reach while an episode lasts, and beyond
        for theta in (-0.4, 0.0, 0.4):
            assert (render_cartpole(np.array([x, 0.0, theta, 0.0]))[-1] == 255).all()
    plain, shown = gym.make(ENV_ID), gym.make(ENV_ID, show_last_action=True)
    plain_obs, _ = plain.reset(seed=7)
    obs, _ = shown.reset(seed=7)
    assert (plain_obs[-1, :, 3] == 255).all()
    assert (obs[-1, :, 3] == 128).all() and not obs[..., :3].any()
    np.testing.assert_array_equal(obs[:-1], plain_obs[:-1])
    actions = [0, 1, 1, 0, 1, 0]
    for step, action in enumerate(actions):
        plain_obs, *_ = plain.step(action)
        obs, _, terminated, truncated, _ = shown.step(action)
        assert not (terminated or truncated)
        assert (plain_obs[-1, :, 3] == 255).all()  # the scene never reaches the bottom row
        np.testing.assert_array_equal(obs[:-1], plain_obs[:-1])
        drawn = [128, *(255 * a for a in actions[: step + 1])][-4:]
        expected = [0] * (4 - len(drawn)) + drawn  # zero padding before the first frame
        np.testing.assert_array_equal(obs[-1], np.tile(expected, (84, 1)))
    # A new episode starts grey again.
    obs, _ = shown.reset(seed=8)
    assert (obs[-1, :, 3] == 128).all()
