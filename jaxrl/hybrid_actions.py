"""Pieces the hybrid-action agents (P-DQN, PA-DDPG, HyAR) share: the refusal of other action
spaces, which parameters belong to which choice, and the scaling of parameters to [−1, 1].

An action of a `Hybrid` space is the pair (choice int32[...], parameters float32[..., P]) with
every choice's parameters side by side (`jaxrl.datatypes.Hybrid`); the agents keep parameters in
normalised units, [−1, 1] each, and rescale them to the env's bounds only at the boundary, as the
continuous-action learners do (`jaxrl.continuous`).
"""

from __future__ import annotations

import numpy as np

from jaxrl.config import ConfigError
from jaxrl.continuous import ActionScale
from jaxrl.datatypes import EnvSpec, Hybrid
from jaxrl.env import describe_actions


def hybrid_actions(spec: EnvSpec, agent: str) -> Hybrid:
    """The env's Hybrid action space with bounded parameters; anything else is refused here, in
    one line, before anything compiles."""
    space = spec.action_space
    if not isinstance(space, Hybrid):
        raise ConfigError(
            f"agent '{agent}' needs hybrid (parameterised) actions: a discrete choice with "
            f"continuous parameters (Platform-v0, Goal-v0, HardMove-v0, CatchPoint-v0); env "
            f"'{spec.name}' has {describe_actions(space)} (for discrete actions use dqn, for "
            f"continuous ones td3, ddpg or sac)"
        )
    low, high = space.parameters.low, space.parameters.high
    if not space.parameters.bounded or np.any(high <= low):
        raise ConfigError(
            f"agent '{agent}' needs bounded parameters (finite low < high) to normalise them "
            f"to [-1, 1]; env '{spec.name}' has low={low.tolist()} high={high.tolist()}"
        )
    return space


def parameter_owners(space: Hybrid) -> np.ndarray:
    """float32[K, P]: 1 where parameter p belongs to choice k (`space.slices`)."""
    owners = np.zeros((space.choices.n, space.parameters.shape[0]), np.float32)
    for choice, (start, stop) in enumerate(space.slices):
        owners[choice, start:stop] = 1.0
    return owners


def parameter_scale(space: Hybrid) -> ActionScale:
    """The affine map between normalised parameters in [−1, 1] and the parameter Box."""
    low = np.asarray(space.parameters.low, np.float32)
    high = np.asarray(space.parameters.high, np.float32)
    return ActionScale((high + low) / 2.0, (high - low) / 2.0)
