"""The Atari pool: observation layout (ALE's, and the bridge's), frame stack, reward clipping,
life loss, same-step reset, truncation, seeding, and the end of a random game."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import jax
import numpy as np
import pytest

pytest.importorskip("ale_py")

import envs
from envs.atari import AtariPool, atari_spec, evaluation_config, make_atari_pool
from envs.configs import AtariConfig
from envs.host import HostStep, seed_from_key
from jaxrl.config import ConfigError
from jaxrl.prng import make_key


@contextlib.contextmanager
def opened(num_envs: int = 1, **options: object) -> Iterator[AtariPool]:
    """A pool on one ALE thread (the suite shares 2 cores); seeded by the test's `reset`."""
    pool = make_atari_pool(AtariConfig(threads=1, **options), num_envs, 0)  # type: ignore[arg-type]
    try:
        yield pool
    finally:
        pool.close()


def play(pool: AtariPool, actions: np.ndarray) -> list[HostStep]:
    return [pool.step(a) for a in actions]


def until_done(pool: AtariPool, actions: np.ndarray) -> list[HostStep]:
    """Steps until some env's episode ends (inclusive)."""
    steps = []
    for action in actions:
        steps.append(pool.step(action))
        if steps[-1].episode_done.any():
            return steps
    raise AssertionError(f"no episode ended in {len(actions)} steps")


def random_actions(steps: int, num_envs: int, n: int = 4, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, (steps, num_envs))


def test_breakout_spec_and_observations() -> None:
    spec = atari_spec(AtariConfig(), 8)
    assert spec.observation_space.shape == (84, 84, 4)
    assert spec.observation_space.dtype == np.uint8
    assert spec.action_space.n == 4  # NOOP, FIRE, RIGHT, LEFT
    assert (spec.family, spec.vmappable, spec.num_envs) == ("host", False, 8)
    assert spec.max_episode_steps == 27_000  # 108,000 frames at frame skip 4
    assert atari_spec(AtariConfig(full_action_space=True), 1).action_space.n == 18
    assert AtariConfig(frame_skip=5).episode_steps == 21_600
    assert AtariConfig(max_episode_steps=100).episode_steps == 100

    with opened(num_envs=2) as pool:
        first = pool.reset(0)
        assert first.shape == (2, 4, 84, 84) and first.dtype == np.uint8
        # The pool keeps ALE's [n, stack, H, W]. The stack starts with zeros; the newest frame
        # (the last) shows the game.
        assert not first[:, :3].any()
        assert first[:, 3].mean() > 10
        step = pool.step(np.array([1, 0]))
    assert step.obs.shape == step.final_obs.shape == (2, 4, 84, 84)
    assert step.obs.dtype == step.final_obs.dtype == np.uint8
    assert step.reward.dtype == step.episode_return.dtype == np.float32
    assert step.episode_length.dtype == np.int32
    for flags in (step.terminated, step.truncated, step.episode_done):
        assert flags.dtype == bool and flags.shape == (2,)


def test_the_bridge_hands_agents_the_pools_frames_as_height_width_stack() -> None:
    """The pool keeps ALE's layout; XLA permutes it after the host call (`HostEnv.obs_axes`)."""
    actions = random_actions(12, 2, seed=10).astype(np.int32)
    env = envs.make(AtariConfig(threads=1), 2)
    key = make_key(10)

    def rollout(key: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        state, first = env.reset(key)
        _, steps = jax.lax.scan(lambda s, a: env.step(s, a, key), state, actions)
        return first.obs, steps.obs, steps.final_obs

    first, obs, final_obs = jax.jit(rollout)(key)
    env.close()
    with opened(num_envs=2) as pool:
        ale_first = pool.reset(seed_from_key(key))
        ale = play(pool, actions)
    to_spec = (0, 2, 3, 1)  # [n, stack, H, W] -> [n, H, W, stack]
    assert first.shape == (2, 84, 84, 4)
    np.testing.assert_array_equal(first, ale_first.transpose(to_spec))
    np.testing.assert_array_equal(obs, np.stack([s.obs.transpose(to_spec) for s in ale]))
    np.testing.assert_array_equal(
        final_obs, np.stack([s.final_obs.transpose(to_spec) for s in ale])
    )
    assert obs[-1, :, :, :, 3].any() and not np.array_equal(obs[-1], obs[-2])


def test_frame_stack_shifts_by_one_frame_per_step() -> None:
    """Frame k of step t+1 is frame k+1 of step t, across life losses and into `final_obs`."""
    with opened(num_envs=2) as pool:
        previous = pool.reset(1)
        steps = play(pool, random_actions(400, 2, seed=1))
    new_frames = 0
    for step in steps:
        np.testing.assert_array_equal(step.final_obs[:, :3], previous[:, 1:])
        new_frames += int((step.final_obs[:, 3] != previous[:, 3]).any(axis=(1, 2)).sum())
        previous = step.obs
    assert sum(int(s.episode_done.sum()) for s in steps) >= 2  # resets were crossed
    assert new_frames > 0.9 * 2 * len(steps)  # the game moves: the check is not vacuous


def test_reward_clipping_keeps_the_game_score_in_the_statistics() -> None:
    actions = random_actions(200, 1, n=6, seed=2)  # Space Invaders' 6 actions
    game = "ALE/SpaceInvaders-v5"
    with opened(id=game, clip_rewards=False) as raw_pool:
        raw_pool.reset(2)
        raw = play(raw_pool, actions)
    with opened(id=game, clip_rewards=True) as clipped_pool:
        clipped_pool.reset(2)
        clipped = play(clipped_pool, actions)
    raw_rewards = np.array([s.reward[0] for s in raw])
    clipped_rewards = np.array([s.reward[0] for s in clipped])
    assert raw_rewards.max() >= 5  # invaders are worth 5 to 30 points
    np.testing.assert_array_equal(clipped_rewards, np.sign(raw_rewards))
    assert set(np.unique(clipped_rewards)) <= {0.0, 1.0}
    assert not any(s.episode_done[0] for s in raw[:-1])
    np.testing.assert_array_equal(
        [s.episode_return[0] for s in clipped], np.cumsum(raw_rewards, dtype=np.float32)
    )


def test_life_loss_is_terminated_for_the_learner_but_the_game_goes_on() -> None:
    actions = random_actions(3000, 1, seed=3)
    with opened(episodic_life=False) as pool:
        pool.reset(3)
        whole = until_done(pool, actions)
    end = len(whole) - 1
    with opened(episodic_life=True) as pool:
        pool.reset(3)
        episodic = play(pool, actions[: end + 1])
    assert whole[end].terminated[0] and not whole[end].truncated[0]  # game over
    assert episodic[end].episode_done[0] and episodic[end].terminated[0]
    for a, b in zip(episodic[: end + 1], whole[: end + 1], strict=True):
        np.testing.assert_array_equal(a.obs, b.obs)  # the very same game, never reset early
        np.testing.assert_array_equal(a.reward, b.reward)
    life_losses = [t for t in range(end) if episodic[t].terminated[0]]
    assert len(life_losses) == 4  # Breakout: 5 lives, the fifth loss is the game over
    for t in life_losses:
        s = episodic[t]
        assert not (s.episode_done[0] or s.truncated[0] or whole[t].terminated[0])
        np.testing.assert_array_equal(s.final_obs, s.obs)
    # Statistics are the whole game's, in both modes.
    assert episodic[end].episode_length[0] == whole[end].episode_length[0] == end + 1
    assert episodic[end].episode_return[0] == whole[end].episode_return[0]
    assert episodic[end].episode_return[0] == sum(s.reward[0] for s in whole[: end + 1])


def test_same_step_auto_reset_with_dense_final_obs() -> None:
    with opened(num_envs=2, episodic_life=False) as pool:
        first = pool.reset(4)
        steps = until_done(pool, random_actions(2000, 2, seed=4))
        after = pool.step(np.array([1, 1]))
    step = steps[-1]
    previous = steps[-2].obs if len(steps) > 1 else first
    k = int(np.argmax(step.episode_done))
    other = 1 - k
    assert step.terminated[k] and not step.truncated[k]
    assert step.episode_length[k] == len(steps)
    # The ended game's last observation continues its stack; obs is a fresh game's first one.
    np.testing.assert_array_equal(step.final_obs[k][:3], previous[k][1:])
    assert not step.obs[k][:3].any() and step.obs[k][3].any()
    assert (step.final_obs[k] != step.obs[k]).any()
    if not step.episode_done[other]:
        np.testing.assert_array_equal(step.final_obs[other], step.obs[other])
    assert after.episode_length[k] == 1
    np.testing.assert_array_equal(after.obs[k][:3], step.obs[k][1:])


def test_truncation_keeps_the_last_frame_the_game_shows() -> None:
    """At the cap `final_obs` is the full step's frame stack (ALE's own cap would cut the last
    frame skip short), the game is reset, and the count starts again."""
    actions = random_actions(20, 1, seed=5)
    with opened(max_episode_steps=10) as pool:
        pool.reset(5)
        capped = play(pool, actions)
    with opened() as pool:
        pool.reset(5)
        free = play(pool, actions[:10])
    for t in range(9):
        assert not (capped[t].episode_done[0] or capped[t].terminated[0])
        np.testing.assert_array_equal(capped[t].obs, free[t].obs)
    last = capped[9]
    assert last.truncated[0] and not last.terminated[0] and last.episode_done[0]
    assert last.episode_length[0] == 10
    np.testing.assert_array_equal(last.final_obs, free[9].obs)
    assert not last.obs[0][:3].any()  # a new game
    assert capped[19].truncated[0] and capped[19].episode_length[0] == 10
    assert not any(s.truncated[0] for s in capped[10:19])


def test_seeding_is_deterministic() -> None:
    actions = random_actions(60, 2, seed=6)

    def run(seed: int) -> tuple[np.ndarray, np.ndarray]:
        with opened(num_envs=2) as pool:
            first = pool.reset(seed)
            steps = play(pool, actions)
            again = pool.reset(seed)
            replay = play(pool, actions)
        np.testing.assert_array_equal(first, again)
        for a, b in zip(steps, replay, strict=True):
            np.testing.assert_array_equal(a.obs, b.obs)
        obs = np.stack([first, *(s.obs for s in steps)])
        return obs, np.stack([s.reward for s in steps])

    obs_a, reward_a = run(7)
    obs_b, reward_b = run(7)
    np.testing.assert_array_equal(obs_a, obs_b)
    np.testing.assert_array_equal(reward_a, reward_b)
    obs_c, _ = run(8)
    assert (obs_a != obs_c).any()


def test_random_play_ends_in_a_game_over() -> None:
    """Default (training) settings: random Breakout loses its 5 lives well inside the cap; the
    game over is terminated, not truncated."""
    with opened() as pool:
        pool.reset(9)
        steps = until_done(pool, random_actions(5000, 1, seed=9))
    step = steps[-1]
    assert step.episode_done[0] and step.terminated[0] and not step.truncated[0]
    assert step.episode_length[0] == len(steps) < 27_000
    assert 0 <= step.episode_return[0] < 20  # random Breakout scores a few points


def test_evaluation_config_scores_whole_games() -> None:
    cfg = AtariConfig(id="ALE/Pong-v5", frame_skip=3)
    evaluation = evaluation_config(cfg)
    assert not evaluation.episodic_life and not evaluation.clip_rewards
    assert (evaluation.id, evaluation.frame_skip) == ("ALE/Pong-v5", 3)


def test_bad_input() -> None:
    with pytest.raises(ConfigError, match="frame_skip=0"):
        AtariConfig(frame_skip=0)
    with pytest.raises(ConfigError, match=r"repeat_action_probability=1.5 must be in \[0, 1\]"):
        AtariConfig(repeat_action_probability=1.5)
    with pytest.raises(ConfigError, match="did you mean ALE/Breakout-v5"):
        atari_spec(AtariConfig(id="ALE/Breakou-v5"), 1)
    with opened(num_envs=2) as pool:
        pool.reset(0)
        # ALE's threads would hang on a bad action; the pool refuses it first.
        with pytest.raises(ValueError, match=r"2 integers in \[0, 4\)"):
            pool.step(np.array([0, 4]))
        with pytest.raises(ValueError, match="integers"):
            pool.step(np.array([0.0, 1.0]))
        with pytest.raises(ValueError, match="integers"):
            pool.step(np.array([0, 1, 2]))
        assert pool.step(np.array([0, 3])).obs.shape == (2, 4, 84, 84)
