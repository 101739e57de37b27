"""`pixel/CartPole-v1`: CartPole learned from pictures, registered with Gymnasium on import.

Gymnasium's CartPole-v1 runs the physics, the termination rule and the 500-step time limit; the
agent sees only frames. As in the original PyTorch experiments (DQN from pixels), a frame is the
whole 600×400 scene in grey, area-resized to 84×84 (no crop), the action is repeated for 4
physics steps, and 4 frames are stacked: observations are uint8 [84, 84, 4] (H, W, C).

* Frames are drawn here with numpy, straight at 84×84 from the state, not by Gymnasium's
  pygame renderer: the picture is Gymnasium's own (its geometry — 125 px per metre, a 50×30 px
  cart, a 10×125 px pole, the axle and the track line — and its colours as ITU-R 601 grey), each
  output pixel the mean of 4×4 sample points, which is what an area resize of the 600×400 frame
  gives. Against pygame's frame box-resized by Pillow the mean difference is ~0.15 grey levels,
  at most ~40 on a few edge pixels (pygame's anti-aliased outlines, the 4×4 sampling). pygame's
  software renderer plus the resize was far slower than a learner consumes
  (benchmarks/results/design_notes.md); the numpy frame needs neither pygame nor OpenCV.
* Frame skip: an agent step repeats the action for `frame_skip` CartPole steps (stopping early
  where the episode ends) and its reward is their sum, so an episode's return is the number of
  CartPole steps survived, as for state CartPole-v1 (the original experiments averaged the
  reward instead). Only the last CartPole step is drawn: nothing flickers, so no max-pool.
* The time limit is CartPole-v1's own, counted in CartPole steps: 500 of them, i.e. 125 agent
  steps with `frame_skip=4` (`episode_steps()`; the id registers no `max_episode_steps`, which
  Gymnasium would count in agent steps). Termination (|x| > 2.4 or |θ| > 12°) is CartPole-v1's;
  the two flags stay apart exactly as CartPole-v1 sets them.
* At frame skip 4 the observation is not Markov: stacked frames one agent step apart show each
  step's mean velocity, while the velocity at its end differs from it by half the held push's
  change (~0.4 m/s, ~0.6 rad/s), with the sign of the last action, which the frames show only
  indirectly. A linear rule that balances from the true state never reaches 500 from such
  velocities, and always does given the last action too, or at `frame_skip=2`
  (benchmarks/results/pixel_cartpole_observability.md); DQN from exact positions four steps
  deep stops at 324 and reaches 500 given the last action
  (benchmarks/results/cartpole_last_action.md).
  `show_last_action=True` draws it: each frame's bottom row (always background in the scene)
  is black when the push that led to the frame was to the left, white when to the right, grey
  in the reset frame. The stack then holds the last four actions, and stays a stack of frames
  (each frame stored once by DQN's `frame_storage=once`, the same shapes as without it).
* The stack starts with zeros before the first frame (Gymnasium's `FrameStackObservation` with
  `padding_type="zero"`, as SB3's `VecFrameStack` and the Atari pool).

`gymnasium.make("pixel/CartPole-v1", frame_skip=2, frame_stack=3, show_last_action=True)`
changes the defaults.
"""

from __future__ import annotations

import functools
import math
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

ENV_ID = "pixel/CartPole-v1"
FRAME_SKIP = 4
FRAME_STACK = 4
SIZE = 84
# CartPole steps per episode (CartPole-v1's own limit).
MAX_CARTPOLE_STEPS = 500

# Gymnasium's CartPoleEnv.render scene, in its pixels with y pointing up (the frame is flipped);
# pixel (c, r) is the square [c, c + 1) × [r, r + 1). pygame fills a shape drawn from a to b over
# pixels floor(a)..floor(b), i.e. [floor(a), floor(b) + 1): about half a pixel more on each side.
_WIDTH, _HEIGHT = 600, 400
_SCALE = _WIDTH / (2 * 2.4)  # screen_width / (2 * x_threshold): 125 px per metre
_CART_HALF_W = 25  # cart 50 × 30 px centred on y = 100 (rows 85..115)
_CART_Y0, _CART_Y1 = 85, 116
_TRACK_ROW = _HEIGHT - 1 - 100  # the 1-px black line at y = 100, as a row from the top
_PIVOT_Y = 100 + 30 / 4  # carty + cartheight / 4
_POLE_HALF_W = 5 + 0.5  # 10 px wide
_POLE_BACK = 5 + 0.5  # reaches half its width behind the pivot ...
_POLE_FRONT = _SCALE * 2 * 0.5 - 5 + 0.5  # ... and scale × (2 × half-length) − 5 px ahead
_AXLE_R = 5 + 0.5  # a disc of radius 5 around the pixel (int(cart x), int(pivot y))
# Colours as ITU-R 601 luma (what RGB -> grey conversions use): white, black, the pole's
# (202, 152, 101) and the axle's (129, 132, 203).
_BACKGROUND, _CART, _POLE, _AXLE = 255.0, 0.0, 161.1, 139.2
_SAMPLES = 4  # sample points per output pixel along each axis
# `show_last_action`'s bottom row: grey in the reset frame, then by the action that led to it.
NO_ACTION_ROW, ACTION_ROWS = 128, (0, 255)


def episode_steps(frame_skip: int = FRAME_SKIP) -> int:
    """Agent steps in an episode that reaches CartPole-v1's 500-step limit."""
    return -(-MAX_CARTPOLE_STEPS // frame_skip)


@functools.cache
def _background(size: int) -> np.ndarray:
    """The empty scene at size × size: white, with the track line's share of its rows black."""
    band = _HEIGHT / size
    top = np.arange(size) * band
    cover = np.minimum(top + band, _TRACK_ROW + 1) - np.maximum(top, _TRACK_ROW)
    row = _BACKGROUND * (1.0 - np.clip(cover, 0.0, None) / band)
    return np.repeat(row[:, None], size, axis=1).astype(np.float32)


def render_cartpole(state: np.ndarray, size: int = SIZE) -> np.ndarray:
    """CartPole's (x, ẋ, θ, θ̇) as a uint8 [size, size] grey frame of Gymnasium's scene."""
    cart_x = float(state[0]) * _SCALE + _WIDTH / 2
    sin, cos = math.sin(float(state[2])), math.cos(float(state[2]))
    cart_x0, cart_x1 = math.floor(cart_x - _CART_HALF_W), math.floor(cart_x + _CART_HALF_W) + 1
    axle_x, axle_y = math.floor(cart_x) + 0.5, math.floor(_PIVOT_Y) + 0.5
    # The region to sample: the cart, the axle and the pole's corners (its rectangle turned
    # clockwise by θ about the pivot).
    corners = [
        (cart_x + a * cos + b * sin, _PIVOT_Y - a * sin + b * cos)
        for a in (-_POLE_HALF_W, _POLE_HALF_W)
        for b in (-_POLE_BACK, _POLE_FRONT)
    ]
    x_lo = min(min(x for x, _ in corners), cart_x0, axle_x - _AXLE_R)
    x_hi = max(max(x for x, _ in corners), cart_x1, axle_x + _AXLE_R)
    y_lo = min(min(y for _, y in corners), _CART_Y0)
    y_hi = max(max(y for _, y in corners), _CART_Y1)

    frame = _background(size).copy()
    px_w, px_h = _WIDTH / size, _HEIGHT / size
    j0, j1 = max(math.floor(x_lo / px_w), 0), min(math.floor(x_hi / px_w) + 1, size)
    i0 = max(math.floor((_HEIGHT - y_hi) / px_h), 0)
    i1 = min(math.floor((_HEIGHT - y_lo) / px_h) + 1, size)
    if j0 >= j1 or i0 >= i1:
        return np.rint(frame).astype(np.uint8)
    offsets = (np.arange(_SAMPLES, dtype=np.float32) + 0.5) / _SAMPLES
    cols = (np.arange(j0, j1, dtype=np.float32)[:, None] + offsets).ravel()
    rows = (np.arange(i0, i1, dtype=np.float32)[:, None] + offsets).ravel()
    xs, ys = cols[None, :] * px_w, _HEIGHT - rows[:, None] * px_h
    dx, dy = xs - cart_x, ys - _PIVOT_Y
    along, across = dx * sin + dy * cos, dx * cos - dy * sin  # in the pole's frame
    value = np.full((ys.size, xs.size), _BACKGROUND, np.float32)
    value[(xs >= cart_x0) & (xs < cart_x1) & (ys >= _CART_Y0) & (ys < _CART_Y1)] = _CART
    pole = (np.abs(across) <= _POLE_HALF_W) & (along >= -_POLE_BACK) & (along <= _POLE_FRONT)
    value[pole] = _POLE
    value[(xs - axle_x) ** 2 + (ys - axle_y) ** 2 <= _AXLE_R**2] = _AXLE
    block = value.reshape(i1 - i0, _SAMPLES, j1 - j0, _SAMPLES).mean(axis=(1, 3))
    # The track line is drawn over everything: it takes its share of each row.
    frame[i0:i1, j0:j1] = block * (frame[i0:i1, j0:j1] / _BACKGROUND)
    return np.rint(frame).astype(np.uint8)


class PixelCartPole(gym.Env):
    """CartPole-v1 seen as one grey frame per agent step, the action repeated `frame_skip` times."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 50}

    def __init__(
        self,
        frame_skip: int = FRAME_SKIP,
        size: int = SIZE,
        render_mode: str | None = None,
        show_last_action: bool = False,
    ) -> None:
        if frame_skip < 1 or size < 1:
            raise ValueError(f"frame_skip={frame_skip} and size={size} must be >= 1")
        self.cartpole = gym.make("CartPole-v1", max_episode_steps=MAX_CARTPOLE_STEPS)
        self.frame_skip = frame_skip
        self.size = size
        # The cap in agent steps, read by the host bridge (the id registers none: see above).
        self.max_episode_steps = episode_steps(frame_skip)
        self.render_mode = render_mode
        self.action_space = self.cartpole.action_space
        self.observation_space = gym.spaces.Box(0, 255, (size, size), np.uint8)
        self.metadata = {**self.metadata, "render_fps": 50 // frame_skip}
        self._frame = np.zeros((size, size), np.uint8)
        self.show_last_action = show_last_action
        self._last_action: int | None = None  # None until the episode's first step

    def _observe(self) -> np.ndarray:
        self._frame = render_cartpole(np.asarray(self.cartpole.unwrapped.state), self.size)
        if self.show_last_action:
            last = self._last_action
            self._frame[-1] = NO_ACTION_ROW if last is None else ACTION_ROWS[last]
        return self._frame

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        _, info = self.cartpole.reset(seed=seed, options=options)
        self._last_action = None
        return self._observe(), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        total = 0.0
        for _ in range(self.frame_skip):
            _, reward, terminated, truncated, info = self.cartpole.step(action)
            total += float(reward)
            if terminated or truncated:
                break
        self._last_action = int(action)
        return self._observe(), total, terminated, truncated, info

    def render(self) -> np.ndarray:
        """The last frame as RGB (for videos)."""
        return np.repeat(self._frame[:, :, None], 3, axis=2)

    def close(self) -> None:
        self.cartpole.close()


def make_pixel_cartpole(
    frame_skip: int = FRAME_SKIP,
    frame_stack: int = FRAME_STACK,
    size: int = SIZE,
    render_mode: str | None = None,
    show_last_action: bool = False,
) -> gym.Env:
    """`PixelCartPole` with the last `frame_stack` frames as the channel axis."""
    env: gym.Env = PixelCartPole(frame_skip, size, render_mode, show_last_action)
    env = gym.wrappers.FrameStackObservation(env, frame_stack, padding_type="zero")
    return gym.wrappers.TransformObservation(
        env,
        lambda obs: np.moveaxis(obs, 0, -1),
        gym.spaces.Box(0, 255, (size, size, frame_stack), np.uint8),
    )


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=make_pixel_cartpole)
