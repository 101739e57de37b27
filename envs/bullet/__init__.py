"""Our PyBullet envs: plain Gymnasium envs, registered in Gymnasium's `bullet` namespace on import:

    import envs.bullet
    env = gymnasium.make("bullet/CartPole-v0", render_mode="rgb_array")

| id | actions | observation | episode cap |
|---|---|---|---|
| `bullet/CartPole-v0` | Discrete(2): ±50 N | 4: cart x, ẋ, pole θ, θ̇ | 500 |
| `bullet/BalancingPlate-v0` | Discrete(4): ±0.01 rad pitch / roll target steps | 8 | 1000 |
| `bullet/BalancingPlateContinuous-v0` | Box(-1, 1, (2,)): target steps × 0.01 rad | 8 | 1000 |
| `bullet/RaceCar-v0` | Box(-1, 1, (2,)): steering, throttle | 13 | 1000 |

All run at 20 Hz in headless DIRECT mode, one physics client per env; the caps are Gymnasium
TimeLimit truncations. Each class documents its dynamics, observation, reward and ends.
No JAX here: these envs run on the host, reached from compiled code through `envs.host`.
"""

from __future__ import annotations

import os
import sys

import gymnasium


def _import_pybullet_quietly() -> None:
    """pybullet's import prints its build time on stderr from C: a second line under every
    one-line refusal of a `bullet/` run, and noise in every run and worker. Imported here first,
    with that file descriptor pointed at /dev/null; the env modules' imports then find it loaded."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        import pybullet  # noqa: F401
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


_import_pybullet_quietly()

from envs.bullet.balancing_plate import BalancingPlateEnv  # noqa: E402
from envs.bullet.cartpole import CartPoleBulletEnv  # noqa: E402
from envs.bullet.racecar import RaceCarEnv  # noqa: E402

__all__ = ["IDS", "BalancingPlateEnv", "CartPoleBulletEnv", "RaceCarEnv"]

# id -> (entry point, max_episode_steps, constructor kwargs)
_REGISTRATIONS: dict[str, tuple[str, int, dict[str, object]]] = {
    "bullet/CartPole-v0": ("envs.bullet.cartpole:CartPoleBulletEnv", 500, {}),
    "bullet/BalancingPlate-v0": ("envs.bullet.balancing_plate:BalancingPlateEnv", 1000, {}),
    "bullet/BalancingPlateContinuous-v0": (
        "envs.bullet.balancing_plate:BalancingPlateEnv",
        1000,
        {"continuous": True},
    ),
    "bullet/RaceCar-v0": ("envs.bullet.racecar:RaceCarEnv", 1000, {}),
}
IDS = tuple(_REGISTRATIONS)

for _id, (_entry, _cap, _kwargs) in _REGISTRATIONS.items():
    if _id not in gymnasium.registry:  # importing twice (reloads, workers) must not warn
        gymnasium.register(_id, entry_point=_entry, max_episode_steps=_cap, kwargs=_kwargs)
