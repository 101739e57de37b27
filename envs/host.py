"""The host bridge: envs that run on the host (Gymnasium, ALE, PyBullet) behind the compiled `Env`.

Work in progress: the pool contract below is what every host env family implements.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

import numpy as np


class HostStep(NamedTuple):
    """One step of a pool as numpy arrays; the leading axis is the pool's envs."""

    obs: np.ndarray
    reward: np.ndarray  # float32[n]
    terminated: np.ndarray  # bool[n]
    truncated: np.ndarray  # bool[n]
    # Dense, same dtype/shape as obs: last obs of the episode that ended (= obs elsewhere).
    final_obs: np.ndarray
    # Of the episode that ended at this step (meaningful where episode_done).
    episode_return: np.ndarray
    episode_length: np.ndarray
    episode_done: np.ndarray


class HostPool(Protocol):
    """n host env instances stepped together, with same-step auto-reset."""

    num_envs: int

    def reset(self, seed: int) -> np.ndarray: ...  # first observations [n, ...]

    def step(self, actions: np.ndarray) -> HostStep: ...

    def close(self) -> None: ...


PoolFactory = Callable[[int, int], HostPool]  # (num_envs, seed) -> a new pool
