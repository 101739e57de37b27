"""Cart-pole in PyBullet (`bullet/CartPole-v0`): pybullet_data's `cartpole.urdf`, force control.

Differences from Gymnasium's CartPole-v1, all deliberate: the dynamics are Bullet's rigid-body
simulation of the URDF (cart 1 kg, pole 0.1 kg and 1 m, its inertia computed by Bullet from the
collision box as pybullet's own cart-pole does), the push is ±50 N at 20 Hz, and the cart may
travel ±10 m on its 30 m slide bar.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pybullet_data
from gymnasium import spaces

from envs.bullet.base import BulletEnv

FORCE = 50.0  # N on the slider: action 0 pushes to -x, action 1 to +x
X_LIMIT = 10.0  # m
THETA_LIMIT = 0.2095  # rad (12 degrees, as Gymnasium's cart-pole)
INIT_RANGE = 0.05  # initial (x, x_dot, theta, theta_dot) ~ U(-0.05, 0.05) each


class CartPoleBulletEnv(BulletEnv):
    """Keep the pole upright by pushing the cart left or right.

    * Observation (float32[4]): cart position x (m), cart velocity (m/s), pole angle θ (rad,
      0 = upright, positive leaning towards +x), pole angular velocity (rad/s).
    * Actions: Discrete(2), 0 = -50 N, 1 = +50 N on the slider joint (its default velocity motor
      is disabled, so the force is all there is).
    * Control at 20 Hz: each step holds the force for 12 physics substeps of 1/240 s.
    * Reward 1 on every step, the terminating one included (as Gymnasium's cart-pole).
    * Terminated when |x| > 10 or |θ| > 0.2095 after a step; truncated at 500 steps by the
      registered TimeLimit (`max_episode_steps=500`).
    * Initial state: each of the four uniform in ±0.05; `reset(options={"state": (x, ẋ, θ, θ̇)})`
      starts from the given one instead.
    * Links have no velocity damping (Bullet's default is 0.04), so the system is frictionless
      like the textbook cart-pole.
    """

    def __init__(self, render_mode: str | None = None, width: int = 320, height: int = 240):
        super().__init__(render_mode, width, height)
        self.action_space = spaces.Discrete(2)
        self.observation_space = spaces.Box(-np.inf, np.inf, (4,), np.float32)

    def _build(self) -> None:
        p = self._p
        self.cartpole = p.loadURDF(f"{pybullet_data.getDataPath()}/cartpole.urdf")
        for link in (-1, 0, 1):
            p.changeDynamics(self.cartpole, link, linearDamping=0.0, angularDamping=0.0)
        for joint in (0, 1):  # Bullet gives every joint a velocity motor; we drive by force
            p.setJointMotorControl2(self.cartpole, joint, p.VELOCITY_CONTROL, force=0.0)
        # A checkered floor a metre below, only so that frames show the cart moving.
        floor = p.loadURDF(f"{pybullet_data.getDataPath()}/plane.urdf", [0, 0, -1.0])
        p.setCollisionFilterGroupMask(floor, -1, 0, 0)

    def _state(self) -> np.ndarray:
        x, x_dot = self._p.getJointState(self.cartpole, 0)[:2]
        theta, theta_dot = self._p.getJointState(self.cartpole, 1)[:2]
        return np.array([x, x_dot, theta, theta_dot], np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._restore_world()
        x, x_dot, theta, theta_dot = self.np_random.uniform(-INIT_RANGE, INIT_RANGE, 4)
        if options and "state" in options:  # a chosen start, for tests and demonstrations
            x, x_dot, theta, theta_dot = np.asarray(options["state"], np.float64).reshape(4)
        self._p.resetJointState(self.cartpole, 0, x, x_dot)
        self._p.resetJointState(self.cartpole, 1, theta, theta_dot)
        return self._state(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is not in {self.action_space}")
        force = FORCE if int(action) == 1 else -FORCE
        p = self._p
        for _ in range(self.substeps):  # Bullet clears applied torques after every step
            p.setJointMotorControl2(self.cartpole, 0, p.TORQUE_CONTROL, force=force)
            p.stepSimulation()
        obs = self._state()
        terminated = bool(abs(obs[0]) > X_LIMIT or abs(obs[2]) > THETA_LIMIT)
        return obs, 1.0, terminated, False, {}

    def _camera(self) -> tuple[list[float], list[float]]:
        x = self._p.getJointState(self.cartpole, 0)[0]
        view = self._p.computeViewMatrixFromYawPitchRoll(
            cameraTargetPosition=[x, 0.0, 0.4],
            distance=3.2,
            yaw=0.0,
            pitch=-10.0,
            roll=0.0,
            upAxisIndex=2,
        )
        return view, self._projection(fov=50.0, near=0.1, far=30.0)
