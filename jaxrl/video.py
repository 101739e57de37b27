"""Evaluation videos (`video=true`): one deterministic episode of each seed's final policy, written
as `<run dir>/videos/seed_<n>.mp4` (imageio's ffmpeg, H.264).

How to draw an env is the env's own business (its family in envs/ knows), so the env object
offers one of two methods:

* `make_render_env() -> gymnasium.Env`, made with `render_mode="rgb_array"`: the episode runs in
  it on the host and every step is rendered.
* `make_state_renderer() -> StateRenderer`, on a `VectorEnv`: the episode runs in JAX through
  `env.core` (so the last state is not auto-reset away) and every core state is drawn.

An env with neither gets a one-line warning and no video.

A video has episode length + 1 frames: the first observation's, then one after every step, the
last one showing the state the episode ended in (the state before any auto-reset).
"""

from __future__ import annotations

import ctypes.util
import logging
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.datatypes import Box, Discrete, EnvSpec
from jaxrl.env import VectorEnv
from jaxrl.prng import make_key

logger = logging.getLogger(__name__)

VIDEO_DIR = "videos"
DEFAULT_FPS = 30


class StateRenderer(Protocol):
    """Draws single (unbatched) core states of a JAX-native env, `fps` frames a second."""

    fps: int

    def draw(self, state: Any) -> np.ndarray: ...  # uint8 [height, width, 3]

    def close(self) -> None: ...


# (agent state, obs batch of one, key) -> action batch of one
Act = Callable[[Any, jax.Array, jax.Array], jax.Array]


class Videos(NamedTuple):
    paths: list[Path]  # one per seed, in seed order; empty when the env cannot render
    lengths: list[int]  # the recorded episodes' lengths (frames = length + 1)
    returns: list[float]
    warning: str | None  # why there are no videos


def use_headless_gl() -> str | None:
    """Gymnasium's MuJoCo envs (Hopper-v5...) render through OpenGL, by default through a window
    system; with no display, point them at EGL or OSMesa (Gymnasium reads `MUJOCO_GL` when it
    creates the renderer). Returns the reason no backend could be chosen, if none could."""
    if os.environ.get("MUJOCO_GL") or os.environ.get("DISPLAY"):
        return None
    for backend, library in (("egl", "EGL"), ("osmesa", "OSMesa")):
        if ctypes.util.find_library(library):
            os.environ["MUJOCO_GL"] = backend
            os.environ.setdefault("PYOPENGL_PLATFORM", backend)
            return None
    return (
        "no display and neither EGL nor OSMesa found for MuJoCo's offscreen rendering "
        "(Debian/Ubuntu: apt-get install libegl1 libgl1-mesa-dri; then MUJOCO_GL=egl)"
    )


def record_videos(
    env: Any, act: Act, agent_states: Any, runs: list[tuple[str, int]], run_dir: Path
) -> Videos:
    """One episode per run of `act` under each run's agent state (leading axis = runs); `runs`
    gives each its video name (`seed_3` -> videos/seed_3.mp4) and the seed of its episode."""
    no_gl = use_headless_gl()
    make_frames = _frame_source(env)
    if isinstance(make_frames, str):
        logger.warning(make_frames)
        return Videos([], [], [], make_frames)
    act = jax.jit(act)
    out = Videos([], [], [], None)
    try:
        _record_each(make_frames, act, agent_states, runs, run_dir, out)
    except Exception as e:
        reason = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        hint = f" ({no_gl})" if no_gl else ""
        warning = f"video=true, but {env.spec.name} could not be drawn: {reason}{hint}; no video"
        logger.warning(warning)
        return out._replace(warning=warning)
    return out


def _record_each(
    make_frames: FrameSource,
    act: Act,
    agent_states: Any,
    runs: list[tuple[str, int]],
    run_dir: Path,
    out: Videos,
) -> None:
    for index, (name, seed) in enumerate(runs):
        state = jax.tree.map(lambda x, i=index: x[i], agent_states)
        policy = lambda obs, key, state=state: act(state, obs, key)
        path = Path(run_dir) / VIDEO_DIR / f"{name}.mp4"
        frames, fps, totals = make_frames(policy, seed)
        write_mp4(frames, path, fps)
        out.paths.append(path)
        out.lengths.append(totals["length"])
        out.returns.append(totals["return"])


FrameSource = Callable[[Callable, int], tuple[Iterator[np.ndarray], int, dict[str, Any]]]


def _frame_source(env: Any) -> FrameSource | str:
    """How to draw this env's episodes, or the one-line reason it cannot be drawn."""
    spec: EnvSpec = env.spec
    make_render_env = getattr(env, "make_render_env", None)
    if make_render_env is not None:
        return lambda policy, seed: gymnasium_frames(make_render_env(), spec, policy, seed)
    make_state_renderer = getattr(env, "make_state_renderer", None)
    if make_state_renderer is not None:
        return lambda policy, seed: state_frames(env, make_state_renderer(), policy, seed)
    return f"video=true, but {spec.name} ({spec.family} env) cannot render here: no video"


def _totals() -> dict[str, Any]:
    return {"length": 0, "return": 0.0}


def state_frames(
    env: VectorEnv, renderer: StateRenderer, policy: Callable, seed: int
) -> tuple[Iterator[np.ndarray], int, dict[str, Any]]:
    """Run one episode of the JAX env (its core, so the last state is not auto-reset away) and
    draw each state with `renderer`."""
    spec = env.spec
    box_action = isinstance(spec.action_space, Box)

    @jax.jit
    def step(core_state: Any, obs: jax.Array, key: jax.Array) -> tuple[Any, jax.Array, Any, Any]:
        act_key, step_key = jax.random.split(key)
        action = policy(obs[None], act_key)[0]
        if box_action:
            action = jnp.clip(action, spec.action_space.low, spec.action_space.high)
        core_state, obs, reward, terminated = env.core.step(step_key, core_state, action)
        return core_state, obs, reward, terminated

    totals = _totals()

    def frames() -> Iterator[np.ndarray]:
        key = make_key(seed)
        core_state, obs = jax.jit(env.core.reset)(jax.random.fold_in(key, 0))
        yield renderer.draw(core_state)
        for t in range(spec.max_episode_steps):
            core_state, obs, reward, terminated = step(
                core_state, obs, jax.random.fold_in(key, t + 1)
            )
            totals["length"] += 1
            totals["return"] += float(reward)
            yield renderer.draw(core_state)
            if bool(terminated):
                break
        renderer.close()

    return frames(), renderer.fps, totals


def gymnasium_frames(
    gym_env: Any, spec: EnvSpec, policy: Callable, seed: int
) -> tuple[Iterator[np.ndarray], int, dict[str, Any]]:
    """One episode of a Gymnasium env made with render_mode='rgb_array'."""
    obs_dtype = spec.observation_space.dtype
    totals = _totals()

    def to_env(action: np.ndarray) -> Any:
        if isinstance(spec.action_space, Discrete):
            return int(action)
        space = spec.action_space
        return np.clip(np.asarray(action, np.float32), space.low, space.high).reshape(space.shape)

    def frames() -> Iterator[np.ndarray]:
        key = make_key(seed)
        obs, _ = gym_env.reset(seed=seed)
        yield gym_env.render()
        while True:
            batch = jnp.asarray(np.asarray(obs, obs_dtype)[None])
            action = np.asarray(policy(batch, jax.random.fold_in(key, totals["length"]))[0])
            obs, reward, terminated, truncated, _ = gym_env.step(to_env(action))
            totals["length"] += 1
            totals["return"] += float(reward)
            yield gym_env.render()
            if terminated or truncated:
                break
        gym_env.close()

    return frames(), int(gym_env.metadata.get("render_fps") or DEFAULT_FPS), totals


def write_mp4(frames: Iterator[np.ndarray], path: Path, fps: int) -> int:
    """Encode frames as H.264 mp4 as they come (no episode held in memory); returns the count."""
    import imageio.v2 as imageio

    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    # macro_block_size=2: only odd sizes are padded (H.264's 4:2:0 needs even ones); imageio's
    # default of 16 would rescale Gymnasium's 600 x 400 frames.
    writer = imageio.get_writer(
        path, format="FFMPEG", mode="I", fps=fps, codec="libx264", macro_block_size=2
    )
    try:
        with warnings.catch_warnings(), writer:
            # JAX warns on every fork; ffmpeg's subprocess is a fork straight into exec: safe.
            warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
            for frame in frames:
                writer.append_data(np.asarray(frame, np.uint8))
                count += 1
    except BaseException:
        path.unlink(missing_ok=True)  # no half-written video left behind
        raise
    return count
