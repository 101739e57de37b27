"""Evaluation videos: frame counts (episode length + 1), that frames change, each env family's path,
and `video=true` end to end through `jaxrl.train`."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import jax.numpy as jnp
import numpy as np
import pytest

imageio = pytest.importorskip("imageio.v2")
pytest.importorskip("imageio_ffmpeg")
pytest.importorskip("pygame")

import envs  # noqa: E402
from jaxrl.config import EnvConfig  # noqa: E402
from jaxrl.datatypes import Box, EnvSpec  # noqa: E402
from jaxrl.video import record_videos  # noqa: E402

# Reading an mp4 starts ffmpeg: a fork straight into exec, which JAX's fork warning does not know.
pytestmark = pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")
NO_STATE = jnp.zeros((1,))
TINY_ES = (
    "agent.population_size=8",
    "agent.episodes_per_member=1",
    "agent.hidden_sizes=[8]",
)  # the hand-written policies below have no agent state; one "seed"


def _frames(path: Path) -> np.ndarray:
    with imageio.get_reader(path) as reader:
        return np.stack(list(reader.iter_data()))


def _balance(state, obs, key):
    """Push towards where the pole leans: keeps CartPole up for dozens of steps."""
    del state, key
    return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(jnp.int32)


def _push_left(state, obs, key):
    del state, key
    return jnp.zeros(obs.shape[:1], jnp.int32)


@pytest.mark.parametrize(("act", "ends"), [(_balance, "truncated"), (_push_left, "terminated")])
def test_jax_cartpole_video_has_a_frame_per_step_plus_the_first(tmp_path, act, ends) -> None:
    env = envs.make(EnvConfig("CartPole-v1", max_episode_steps=40))
    videos = record_videos(env, act, NO_STATE, [("seed_3", 3)], tmp_path)
    assert videos.warning is None
    assert videos.paths == [tmp_path / "videos" / "seed_3.mp4"]
    (length,) = videos.lengths
    assert videos.returns == [float(length)]  # CartPole: 1 per step
    if ends == "truncated":
        assert length == 40
    else:  # always pushing left tips the pole over within about 10 steps
        assert 5 <= length < 20
    frames = _frames(videos.paths[0])
    assert frames.shape == (length + 1, 400, 600, 3)  # Gymnasium's CartPole frame
    assert imageio.get_reader(videos.paths[0]).get_meta_data()["fps"] == 50
    changes = np.abs(np.diff(frames.astype(np.int16), axis=0)).mean(axis=(1, 2, 3))
    assert (changes > 0).mean() > 0.8  # a balanced cart-pole may hold still for a step or two
    assert np.abs(frames[-1].astype(int) - frames[0]).max() > 100


def test_jax_pendulum_video_takes_box_actions(tmp_path) -> None:
    env = envs.make(EnvConfig("Pendulum-v1", max_episode_steps=20))
    act = lambda state, obs, key: jnp.full((obs.shape[0], 1), 2.0)
    videos = record_videos(env, act, NO_STATE, [("seed_0", 0)], tmp_path)
    assert videos.lengths == [20]  # Pendulum never terminates: the cap ends it
    assert videos.returns[0] < 0.0  # costs only
    frames = _frames(videos.paths[0])
    assert frames.shape == (21, 500, 500, 3)
    assert np.abs(frames[-1].astype(int) - frames[0]).max() > 100


def _spec(name: str, family: str, obs_dim: int, action_space, cap: int) -> EnvSpec:
    box = Box(
        np.full(obs_dim, -np.inf, np.float32), np.full(obs_dim, np.inf, np.float32), (obs_dim,)
    )
    return EnvSpec(name, family, box, action_space, num_envs=1, max_episode_steps=cap)


def test_host_bullet_video_runs_the_policy_in_a_rendering_gymnasium_env(tmp_path) -> None:
    pytest.importorskip("pybullet")
    env = envs.make(EnvConfig("bullet/CartPole-v0", max_episode_steps=30))
    videos = record_videos(env, _balance, NO_STATE, [("seed_1", 1)], tmp_path)
    assert videos.lengths == [30] and videos.returns == [30.0]  # held up until the cap
    frames = _frames(videos.paths[0])
    assert frames.shape == (31, 240, 320, 3)  # the bullet envs' 320 x 240 frames
    assert imageio.get_reader(videos.paths[0]).get_meta_data()["fps"] == 20
    assert np.abs(frames[-1].astype(int) - frames[0]).max() > 50


def test_env_that_cannot_render_warns_in_one_line_and_records_nothing(tmp_path, caplog) -> None:
    env = SimpleNamespace(
        spec=_spec("brax/hopper", "brax", 11, Box(-np.ones(3), np.ones(3), (3,)), 9)
    )
    with caplog.at_level(logging.WARNING, logger="jaxrl.video"):
        videos = record_videos(env, _balance, NO_STATE, [("seed_0", 0)], tmp_path)
    assert videos.paths == [] and not (tmp_path / "videos").exists()
    assert videos.warning == "video=true, but brax/hopper (brax env) cannot render here: no video"
    assert [r.getMessage() for r in caplog.records] == [videos.warning]


@pytest.mark.parametrize("env_id", ["gym/Pendulum-v1", "pixel/CartPole-v1"])
def test_a_gymnasium_host_env_makes_its_render_env(env_id: str) -> None:
    """The env the pool steps, made to render, with the cap of the run (`with_num_envs` too)."""
    env = envs.make(EnvConfig(env_id, max_episode_steps=7)).with_num_envs(3)
    render_env = env.make_render_env()
    try:
        assert render_env.render_mode == "rgb_array" and render_env.spec.max_episode_steps == 7
        render_env.reset(seed=0)
        assert render_env.observation_space.shape == env.spec.observation_space.shape
    finally:
        render_env.close()


def test_video_true_records_each_seed_and_says_where(tmp_path) -> None:
    """From the CLI: summary.json lists the videos and the final console line names their folder."""
    run_dir = tmp_path / "run"
    args = [*TINY_ES, "budget.env_steps=2e3", "num_seeds=2", "video=true", f"log.dir={run_dir}"]
    result = subprocess.run(
        [sys.executable, "-m", "jaxrl.run", *args], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1].endswith(f" | videos in {run_dir / 'videos'}")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["videos"] == [str(run_dir / "videos" / f"seed_{s}.mp4") for s in (0, 1)]
    for path in summary["videos"]:
        frames = _frames(Path(path))
        assert len(frames) >= 2 and frames.shape[1:] == (400, 600, 3)


def test_video_of_a_mujoco_host_env_renders_headless(tmp_path) -> None:
    """gym/Hopper-v5 renders through MuJoCo's OpenGL: with no display, jaxrl points it at EGL
    (or OSMesa) itself; with neither, one warning line and no video, the run still completed."""
    import ctypes.util

    pytest.importorskip("mujoco")
    run_dir = tmp_path / "run"
    args = ["agent=ppo", "env=gym/Hopper-v5", "env.max_episode_steps=20", "budget.env_steps=512"]
    environ = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "DISPLAY")}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "jaxrl.run",
            *args,
            "video=true",
            "log.progress=false",
            f"log.dir={run_dir}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=environ,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    if not (ctypes.util.find_library("EGL") or ctypes.util.find_library("OSMesa")):
        assert "could not be drawn" in result.stderr and "apt-get install" in result.stderr
        return
    frames = _frames(run_dir / "videos" / "seed_0.mp4")
    assert 2 <= len(frames) <= 21 and frames.shape[1:] == (480, 480, 3)
    assert frames.std() > 10  # a rendered scene, not a blank frame
