"""What our PyBullet envs share: one headless physics client per env, a saved initial world that
every reset restores, fixed-rate control over several physics substeps, and offscreen frames.

Restoring a saved world (positions, velocities and Bullet's contact cache) rather than moving
bodies back by hand is what makes a seed reproduce a trajectory exactly: a contact solver that
warm-starts from the previous episode's contacts would otherwise make episode 2 of a seed differ
from episode 1. Bullet's overlapping pairs are also sorted (`deterministicOverlappingPairs`), so
the solver's order does not depend on where bodies went in earlier episodes.
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path
from typing import Any, ClassVar

import gymnasium
import numpy as np
import pybullet
from pybullet_utils.bullet_client import BulletClient

ASSETS = Path(__file__).parent / "assets"
GRAVITY = 9.81


class BulletEnv(gymnasium.Env[np.ndarray, Any]):
    """Base class: subclasses build their world in `_build` and name their camera in `_camera`.

    `render_mode="rgb_array"` makes `render()` return a uint8 [height, width, 3] frame drawn by
    Bullet's software TinyRenderer (no display, no GPU needed).
    """

    # render_fps = control rate: a video plays at the speed the env runs.
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 20}
    physics_hz: ClassVar[int] = 240
    control_hz: ClassVar[int] = 20

    def __init__(self, render_mode: str | None = None, width: int = 320, height: int = 240):
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(
                f"render_mode={render_mode!r} is not supported; valid: None, 'rgb_array'"
            )
        if self.physics_hz % self.control_hz:
            raise ValueError("physics_hz must be a multiple of control_hz")
        self.render_mode = render_mode
        self.width, self.height = int(width), int(height)
        self.substeps = self.physics_hz // self.control_hz
        self._p = QuietBulletClient()
        # Disconnect at garbage collection or interpreter exit, while pybullet is still loaded
        # (BulletClient's own __del__ fails if it runs during module teardown).
        self._finalizer = weakref.finalize(self, _disconnect, self._p)
        self._p.setTimeStep(1.0 / self.physics_hz)
        self._p.setGravity(0.0, 0.0, -GRAVITY)
        self._p.setPhysicsEngineParameter(deterministicOverlappingPairs=1)
        self._build()
        self._initial_world = self._p.saveState()

    def _build(self) -> None:
        """Load the bodies and set their fixed properties (once per env)."""
        raise NotImplementedError

    def _camera(self) -> tuple[list[float], list[float]]:
        """(view matrix, projection matrix) of the frame `render` draws."""
        raise NotImplementedError

    def _restore_world(self) -> None:
        self._p.restoreState(stateId=self._initial_world)

    def _projection(self, fov: float, near: float, far: float) -> list[float]:
        return self._p.computeProjectionMatrixFOV(fov, self.width / self.height, near, far)

    def render(self) -> np.ndarray | None:
        if self.render_mode is None:
            gymnasium.logger.warn("render() called without render_mode='rgb_array'")
            return None
        view, projection = self._camera()
        _, _, rgba, _, _ = self._p.getCameraImage(
            self.width,
            self.height,
            viewMatrix=view,
            projectionMatrix=projection,
            renderer=pybullet.ER_TINY_RENDERER,
        )
        frame = np.asarray(rgba, np.uint8).reshape(self.height, self.width, 4)
        return np.ascontiguousarray(frame[:, :, :3])

    def close(self) -> None:
        if getattr(self, "_finalizer", None) is not None:
            self._finalizer()


class QuietBulletClient(BulletClient):
    """A headless `BulletClient` that connects without printing.

    `BulletClient` always passes `options=''` to `pybullet.connect`, and pybullet prints the parsed
    option list (`argv[0]=`) whenever that argument is given at all, even empty: one line per env,
    64 for a pool of 64. Connecting with no `options` argument prints nothing; the rest (binding
    every pybullet function to this client, disconnecting) is `BulletClient`'s own.
    """

    def __init__(self) -> None:  # replaces BulletClient.__init__, setting the same attributes
        self._shapes: dict[Any, Any] = {}
        self._pid = os.getpid()
        self._client = pybullet.connect(pybullet.DIRECT)


def _disconnect(client: BulletClient) -> None:
    if client._client >= 0:
        client.disconnect()
