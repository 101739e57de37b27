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

import gymnasium

from envs.bullet.balancing_plate import BalancingPlateEnv
from envs.bullet.cartpole import CartPoleBulletEnv
from envs.bullet.racecar import RaceCarEnv

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
