"""Ball on a plate (`bullet/BalancingPlate-v0`, `bullet/BalancingPlateContinuous-v0`): keep a
ping-pong ball on a tilting 30 x 30 cm plate.

The plate (`assets/balancing_plate.urdf`) hangs in a two-axis gimbal: `pitch` turns about the
world's y axis (tilting the +x edge down when positive), `roll` about the gimbal's x axis (lifting
the +y edge when positive), each within ±90°. The ball (`assets/ping_pong_ball.urdf`) is a 2 cm,
0.7 g thin shell: rolling without slipping down a tilt θ it accelerates at g sin θ / (1 + 2/3) =
0.6 g sin θ (checked in the tests).

Control is by angle steps: each joint is a position servo (5 N m) and an action moves its target.
We chose that over torque control because it learns: the plate's angle then follows the action
history within a step, so the ball's motion is a short, direct function of the actions, whereas
with torques the policy would also have to stabilise the plate's own inertia through a 4th-order
chain. Steps (not absolute angles) also keep the task from being trivial: a flat plate would hold
a ball dropped at rest forever, but the plate starts with a random tilt and keeps it until the
policy corrects it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pybullet
import pybullet_data
from gymnasium import spaces

from envs.bullet.base import ASSETS, BulletEnv

PLATE_HALF = 0.15  # m: the plate is 30 x 30 cm
BALL_RADIUS = 0.01  # m
ANGLE_STEP = 0.01  # rad: one discrete action, or the most a continuous action moves a target
MAX_TILT = 0.35  # rad (20°): commanded targets are clipped here, inside the joints' ±90°
SERVO_TORQUE = 5.0  # N m
SERVO_GAIN = 0.3  # Bullet's position gain of the servo at 480 Hz
INIT_TILT = 0.03  # rad: initial pitch and roll ~ U(-0.03, 0.03)
INIT_BALL = 0.05  # m: the ball is dropped at (u, v) ~ U(-0.05, 0.05) on the plate
DROP_HEIGHT = 0.005  # m: gap between the ball and the plate when dropped
PITCH, ROLL, PLATE_LINK = 0, 1, 1  # joint indices; the plate is the roll joint's child link
# Discrete actions: (joint, direction) of the target step.
DISCRETE_STEPS = ((PITCH, 1.0), (PITCH, -1.0), (ROLL, 1.0), (ROLL, -1.0))


class BalancingPlateEnv(BulletEnv):
    """Tilt the plate so the ball stays on it.

    * Observation (float32[8]), positions and velocities in the plate's own frame (origin at the
      centre of its top surface, x and y along its edges, so they tilt with it):
      0, 1: ball centre position u, v relative to the plate centre (m, within ±0.15 on the plate);
      2, 3: ball velocity along the plate's x and y axes (m/s: world velocity in plate axes);
      4, 5: plate pitch and roll joint angles (rad);
      6, 7: pitch and roll joint velocities (rad/s).
    * Actions, `continuous=False`: Discrete(4) = pitch target +0.01 rad, pitch -0.01, roll +0.01,
      roll -0.01. `continuous=True`: Box(-1, 1, (2,)), each joint's target moves by
      action × 0.01 rad (actions are clipped to the box). Targets stay within ±0.35 rad.
    * Control at 20 Hz: 24 physics substeps of 1/480 s (at 1/240 s Bullet's contact of this
      light, bouncy ball jitters instead of settling).
    * Reward 1 for every step after which the ball is still on the plate, 0 for the step it
      leaves it; terminated when the ball's centre is beyond an edge (|u| or |v| > 0.15) or below
      the top surface. Truncated at 1000 steps (50 s) by the registered TimeLimit.
    * Reset: plate pitch and roll ~ U(±0.03) rad at rest (the servo targets too), ball dropped at
      rest 5 mm above the plate at (u, v) ~ U(±0.05) m. `reset(options=...)` may fix either:
      `{"plate_angles": (pitch, roll), "ball_position": (u, v)}` (tests, demonstrations).
    """

    physics_hz = 480

    def __init__(
        self,
        render_mode: str | None = None,
        continuous: bool = False,
        width: int = 320,
        height: int = 240,
    ):
        super().__init__(render_mode, width, height)
        self.continuous = continuous
        if continuous:
            self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        else:
            self.action_space = spaces.Discrete(4)
        self.observation_space = spaces.Box(-np.inf, np.inf, (8,), np.float32)
        self._targets = np.zeros(2)

    def _build(self) -> None:
        p = self._p
        flags = pybullet.URDF_USE_INERTIA_FROM_FILE  # the ball is a shell, not a solid sphere
        self.floor = p.loadURDF(f"{pybullet_data.getDataPath()}/plane.urdf")
        self.plate = p.loadURDF(
            str(ASSETS / "balancing_plate.urdf"), useFixedBase=True, flags=flags
        )
        self.ball = p.loadURDF(str(ASSETS / "ping_pong_ball.urdf"), [0, 0, 1.0], flags=flags)
        # Bullet damps every body's velocities by default (0.04), which for this light ball is a
        # drag that cuts its acceleration down a slope by a quarter; air drag on it is far smaller.
        p.changeDynamics(self.ball, -1, linearDamping=0.0, angularDamping=0.0)
        for link in (PITCH, ROLL):
            p.changeDynamics(self.plate, link, linearDamping=0.0, angularDamping=0.0)

    def _plate_frame(self) -> tuple[np.ndarray, np.ndarray]:
        """World position of the plate frame's origin and its rotation matrix (columns = axes)."""
        state = self._p.getLinkState(self.plate, PLATE_LINK, computeForwardKinematics=True)
        position, orientation = state[4], state[5]
        rotation = np.array(self._p.getMatrixFromQuaternion(orientation)).reshape(3, 3)
        return np.array(position), rotation

    def _ball_on_plate(self) -> tuple[np.ndarray, np.ndarray]:
        """Ball centre (u, v, w) and velocity in the plate frame."""
        origin, rotation = self._plate_frame()
        position, _ = self._p.getBasePositionAndOrientation(self.ball)
        velocity, _ = self._p.getBaseVelocity(self.ball)
        local = rotation.T @ (np.array(position) - origin)
        return local, rotation.T @ np.array(velocity)

    def _observation(self) -> tuple[np.ndarray, np.ndarray]:
        local, velocity = self._ball_on_plate()
        joints = self._p.getJointStates(self.plate, [PITCH, ROLL])
        obs = np.array(
            [
                local[0],
                local[1],
                velocity[0],
                velocity[1],
                joints[0][0],
                joints[1][0],
                joints[0][1],
                joints[1][1],
            ],
            np.float32,
        )
        return obs, local

    def _drive(self) -> None:
        self._p.setJointMotorControlArray(
            self.plate,
            [PITCH, ROLL],
            pybullet.POSITION_CONTROL,
            targetPositions=self._targets.tolist(),
            forces=[SERVO_TORQUE, SERVO_TORQUE],
            positionGains=[SERVO_GAIN, SERVO_GAIN],
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._restore_world()
        rng = self.np_random
        self._targets = rng.uniform(-INIT_TILT, INIT_TILT, 2)
        u, v = rng.uniform(-INIT_BALL, INIT_BALL, 2)
        options = options or {}
        if "plate_angles" in options:
            self._targets = np.asarray(options["plate_angles"], np.float64).reshape(2)
        if "ball_position" in options:
            u, v = np.asarray(options["ball_position"], np.float64).reshape(2)
        for joint, angle in zip((PITCH, ROLL), self._targets, strict=True):
            self._p.resetJointState(self.plate, joint, float(angle), 0.0)
        self._drive()
        origin, rotation = self._plate_frame()
        drop = origin + rotation @ np.array([u, v, BALL_RADIUS + DROP_HEIGHT])
        self._p.resetBasePositionAndOrientation(self.ball, drop.tolist(), [0, 0, 0, 1])
        self._p.resetBaseVelocity(self.ball, [0, 0, 0], [0, 0, 0])
        return self._observation()[0], {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.continuous:
            steps = np.clip(np.asarray(action, np.float64).reshape(2), -1.0, 1.0)
            self._targets = self._targets + steps * ANGLE_STEP
        else:
            if not self.action_space.contains(action):
                raise ValueError(f"action {action!r} is not in {self.action_space}")
            joint, direction = DISCRETE_STEPS[int(action)]
            self._targets[joint] += direction * ANGLE_STEP
        self._targets = np.clip(self._targets, -MAX_TILT, MAX_TILT)
        self._drive()
        for _ in range(self.substeps):
            self._p.stepSimulation()
        obs, local = self._observation()
        off = abs(local[0]) > PLATE_HALF or abs(local[1]) > PLATE_HALF or local[2] < 0.0
        return obs, 0.0 if off else 1.0, bool(off), False, {}

    def _camera(self) -> tuple[list[float], list[float]]:
        view = self._p.computeViewMatrixFromYawPitchRoll(
            cameraTargetPosition=[0.0, 0.0, 0.28],
            distance=0.5,
            yaw=30.0,
            pitch=-40.0,
            roll=0.0,
            upAxisIndex=2,
        )
        return view, self._projection(fov=60.0, near=0.01, far=5.0)
