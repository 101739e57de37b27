"""Race car on an oval track (`bullet/RaceCar-v0`): pybullet_data's 1:10 MIT `racecar.urdf`
driving laps; the return of an episode is the distance it got along the track (the ES fitness).

The world is pybullet_data's `plane.urdf` (flat, cheap contacts; `stadium.sdf` is heavy scenery
that the tiny renderer draws slowly and the car never touches) with the track painted on it as
visual-only strips. The track is a stadium oval: two 10 m straights joined by half circles of
4 m radius (centreline length 20 + 8π ≈ 45.1 m), 1.6 m wide, driven counter-clockwise.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pybullet_data
from gymnasium import spaces

from envs.bullet.base import BulletEnv

HALF_STRAIGHT = 5.0  # m: straights run from x = -5 to x = 5
RADIUS = 4.0  # m: of the centreline's half circles, centred at (±5, 0)
HALF_WIDTH = 0.8  # m
LOOKAHEAD = (1.0, 3.0, 6.0)  # m along the centreline: points given to the policy
MAX_WHEEL_SPEED = 60.0  # rad/s at throttle 1: 3 m/s with the 5 cm wheels
WHEEL_FORCE = 10.0  # N m per wheel
MAX_STEER = 0.5  # rad at steering ±1
STEER_FORCE = 10.0  # N m
INIT_OFFSET = 0.1  # m: initial lateral offset ~ U(-0.1, 0.1)
INIT_HEADING = 0.05  # rad: initial heading error ~ U(-0.05, 0.05)
MIN_UPRIGHT = 0.5  # the car has flipped when its up axis' z component falls below this
WHEELS = (2, 3, 5, 7)  # joints of racecar.urdf: rear left/right, front left/right wheels
STEERING = (4, 6)  # left and right steering hinges


class OvalTrack:
    """The centreline: arc length s from the start (0, -R), heading +x, counter-clockwise."""

    def __init__(self, half_straight: float = HALF_STRAIGHT, radius: float = RADIUS):
        self.a, self.r = half_straight, radius
        self.length = 4 * half_straight + 2 * math.pi * radius

    def project(self, x: float, y: float) -> tuple[float, float, float]:
        """(s of the nearest centreline point, signed offset from it (left of the driving
        direction positive, i.e. towards the inside), direction of travel there (rad))."""
        a, r = self.a, self.r
        if x > a:  # right half circle
            phi = math.atan2(y, x - a)
            s = a + r * (phi + math.pi / 2)
            offset = r - math.hypot(x - a, y)
            direction = phi + math.pi / 2
        elif x < -a:  # left half circle
            phi = math.atan2(y, x + a) % (2 * math.pi)  # in (pi/2, 3pi/2)
            s = 3 * a + math.pi * r + r * (phi - math.pi / 2)
            offset = r - math.hypot(x + a, y)
            direction = phi + math.pi / 2
        elif y < 0:  # bottom straight, driven towards +x
            s, offset, direction = x, y + r, 0.0
        else:  # top straight, driven towards -x
            s, offset, direction = a + math.pi * r + (a - x), r - y, math.pi
        return s % self.length, offset, direction

    def point(self, s: float) -> tuple[float, float]:
        """The centreline point at arc length s."""
        a, r = self.a, self.r
        s %= self.length
        if s < a:
            return s, -r
        if s < a + math.pi * r:
            phi = (s - a) / r - math.pi / 2
            return a + r * math.cos(phi), r * math.sin(phi)
        if s < 3 * a + math.pi * r:
            return a - (s - a - math.pi * r), r
        if s < 3 * a + 2 * math.pi * r:
            phi = (s - 3 * a - math.pi * r) / r + math.pi / 2
            return -a + r * math.cos(phi), r * math.sin(phi)
        return s - self.length, -r


def wrap_angle(angle: float) -> float:
    return (angle + math.pi) % (2 * math.pi) - math.pi


class RaceCarEnv(BulletEnv):
    """Drive as far along the track as possible without leaving it.

    * Actions: Box(-1, 1, (2,)) = (steering, throttle), clipped to the box. Steering ±1 sets
      both steering hinges' target to ±0.5 rad (positive turns left); throttle sets the target
      speed of all four wheels to throttle × 60 rad/s (3 m/s forward at 1, reverse below 0).
    * Observation (float32[13]): 0-1 forward and leftward speed of the car (m/s, car frame),
      2 yaw rate (rad/s), 3 lateral offset from the centreline / half width (±1 at the edges,
      positive towards the inside), 4-5 sin and cos of the heading error (car heading minus the
      track direction), 6-11 the centreline points 1, 3 and 6 m ahead of the car's nearest
      centreline point as (forward, left) in the car frame (m), 12 the steering hinge angle (rad).
    * Control at 20 Hz: 12 physics substeps of 1/240 s.
    * Reward: the progress of the car's nearest centreline point during the step (m, negative
      when driving backwards), so an episode's return is the distance reached along the track,
      laps included.
    * Terminated when the car is more than 0.8 m from the centreline (off the track) or its up
      axis tilts past 60° (flipped); truncated at 1000 steps (50 s) by the registered TimeLimit.
    * Reset: at the start line (0, -4), heading +x, lateral offset ~ U(±0.1) m, heading error
      ~ U(±0.05) rad, at rest.
    """

    def __init__(self, render_mode: str | None = None, width: int = 320, height: int = 240):
        self.track = OvalTrack()
        super().__init__(render_mode, width, height)
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = spaces.Box(-np.inf, np.inf, (13,), np.float32)
        self._progress = 0.0

    def _build(self) -> None:
        p = self._p
        data = pybullet_data.getDataPath()
        p.loadURDF(f"{data}/plane.urdf")
        self._paint_track()
        x, y = self.track.point(0.0)
        self.car = p.loadURDF(f"{data}/racecar/racecar.urdf", [x, y, 0.05])
        for joint in range(p.getNumJoints(self.car)):  # no motor but ours
            p.setJointMotorControl2(self.car, joint, p.VELOCITY_CONTROL, force=0.0)
        for _ in range(self.physics_hz // 2):  # let it settle on its wheels: the saved world
            p.stepSimulation()
        self._rest_height = p.getBasePositionAndOrientation(self.car)[0][2]

    def _paint_track(self) -> None:
        """Dark tarmac with white edge lines: three visual-only meshes (one body each, since
        every extra body costs time in each physics step)."""
        p = self._p
        n = int(self.track.length / 0.25)
        centre = [self.track.point(i * self.track.length / n) for i in range(n)]
        left = [self._left(x, y) for x, y in centre]
        strips = (
            ((-HALF_WIDTH, HALF_WIDTH), 0.0005, [0.25, 0.25, 0.27, 1]),
            ((-HALF_WIDTH - 0.04, -HALF_WIDTH + 0.04), 0.001, [1, 1, 1, 1]),
            ((HALF_WIDTH - 0.04, HALF_WIDTH + 0.04), 0.001, [1, 1, 1, 1]),
        )
        for (inner, outer), z, colour in strips:
            vertices = []
            for (x, y), (lx, ly) in zip(centre, left, strict=True):
                vertices.append([x + inner * lx, y + inner * ly, z])
                vertices.append([x + outer * lx, y + outer * ly, z])
            indices = []
            for i in range(n):
                a, b, c, d = 2 * i, 2 * i + 1, (2 * i + 2) % (2 * n), (2 * i + 3) % (2 * n)
                indices.extend([a, c, b, b, c, d])
            shape = p.createVisualShape(
                p.GEOM_MESH,
                vertices=vertices,
                indices=indices,
                normals=[[0, 0, 1]] * len(vertices),
                rgbaColor=colour,
            )
            p.createMultiBody(0, -1, shape)

    def _left(self, x: float, y: float) -> tuple[float, float]:
        """Unit vector pointing left of the driving direction at a centreline point."""
        direction = self.track.project(x, y)[2]
        return -math.sin(direction), math.cos(direction)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._restore_world()
        offset, heading = self.np_random.uniform(-1.0, 1.0, 2) * (INIT_OFFSET, INIT_HEADING)
        x, y = self.track.point(0.0)
        orientation = self._p.getQuaternionFromEuler([0, 0, heading])
        self._p.resetBasePositionAndOrientation(
            self.car, [x, y + offset, self._rest_height], orientation
        )
        self._p.resetBaseVelocity(self.car, [0, 0, 0], [0, 0, 0])
        self._drive(0.0, 0.0)
        obs, self._progress, _, _ = self._observe()
        return obs, {}

    def _drive(self, steering: float, throttle: float) -> None:
        p = self._p
        p.setJointMotorControlArray(
            self.car,
            list(WHEELS),
            p.VELOCITY_CONTROL,
            targetVelocities=[throttle * MAX_WHEEL_SPEED] * len(WHEELS),
            forces=[WHEEL_FORCE] * len(WHEELS),
        )
        p.setJointMotorControlArray(
            self.car,
            list(STEERING),
            p.POSITION_CONTROL,
            targetPositions=[steering * MAX_STEER] * len(STEERING),
            forces=[STEER_FORCE] * len(STEERING),
        )

    def _observe(self) -> tuple[np.ndarray, float, float, float]:
        """(observation, track position s, lateral offset (m), z of the car's up axis)."""
        p = self._p
        position, orientation = p.getBasePositionAndOrientation(self.car)
        velocity, angular = p.getBaseVelocity(self.car)
        rotation = np.array(p.getMatrixFromQuaternion(orientation)).reshape(3, 3)
        heading = math.atan2(rotation[1, 0], rotation[0, 0])
        cos_h, sin_h = math.cos(heading), math.sin(heading)

        def car_frame(dx: float, dy: float) -> tuple[float, float]:
            return cos_h * dx + sin_h * dy, -sin_h * dx + cos_h * dy

        x, y = position[0], position[1]
        s, offset, direction = self.track.project(x, y)
        ahead = []
        for distance in LOOKAHEAD:
            px, py = self.track.point(s + distance)
            ahead.extend(car_frame(px - x, py - y))
        error = wrap_angle(heading - direction)
        steer = p.getJointState(self.car, STEERING[0])[0]
        obs = np.array(
            [
                *car_frame(velocity[0], velocity[1]),
                angular[2],
                offset / HALF_WIDTH,
                math.sin(error),
                math.cos(error),
                *ahead,
                steer,
            ],
            np.float32,
        )
        return obs, s, offset, rotation[2, 2]

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        steering, throttle = np.clip(np.asarray(action, np.float64).reshape(2), -1.0, 1.0)
        self._drive(float(steering), float(throttle))
        for _ in range(self.substeps):
            self._p.stepSimulation()
        obs, s, offset, upright = self._observe()
        length = self.track.length
        progress = (s - self._progress + length / 2) % length - length / 2
        self._progress = s
        terminated = abs(offset) > HALF_WIDTH or upright < MIN_UPRIGHT
        return obs, float(progress), bool(terminated), False, {"track_position": s}

    def _camera(self) -> tuple[list[float], list[float]]:
        position, orientation = self._p.getBasePositionAndOrientation(self.car)
        yaw = self._p.getEulerFromQuaternion(orientation)[2]
        view = self._p.computeViewMatrixFromYawPitchRoll(
            cameraTargetPosition=[position[0], position[1], 0.2],
            distance=2.0,
            yaw=math.degrees(yaw) - 90.0,
            pitch=-20.0,
            roll=0.0,
            upAxisIndex=2,
        )
        return view, self._projection(fov=60.0, near=0.05, far=40.0)
