"""Data types shared by every agent and env family. Data only: no behaviour beyond validation and
the JSON form a run directory keeps of its env's spec."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import numpy as np

Array = jax.Array
Key = jax.Array
PyTree = Any
Metrics = dict[str, Array]


@dataclass(frozen=True)
class Discrete:
    """A choice among `n` actions, encoded as int32 in [0, n)."""

    n: int
    shape: tuple[int, ...] = ()
    dtype: Any = np.int32


@dataclass(frozen=True)
class Box:
    """A real-valued array with element-wise bounds (inf where unbounded)."""

    low: np.ndarray
    high: np.ndarray
    shape: tuple[int, ...]
    dtype: Any = np.float32

    @property
    def bounded(self) -> bool:
        return bool(np.all(np.isfinite(self.low)) and np.all(np.isfinite(self.high)))


@dataclass(frozen=True)
class Hybrid:
    """A parameterised action (Masson, Ranchod & Konidaris 2016): a discrete choice k plus the
    continuous parameters of choice k. Every choice's parameters sit flattened in one Box, choice
    k's at `parameters[slices[k][0]:slices[k][1]]`: gym-platform's `Tuple(Discrete(K),
    Tuple(Box_1, ..., Box_K))` flattened, so that an action is the pair (choice int32[],
    parameters float32[P]) and a policy can give every choice's parameters at once (P-DQN, HyAR).
    Slices may be empty (a choice without parameters) or shared (`Tuple(Discrete(K), Box)`)."""

    choices: Discrete
    parameters: Box
    slices: tuple[tuple[int, int], ...]

    def __post_init__(self) -> None:
        if len(self.parameters.shape) != 1:
            raise ValueError(f"hybrid parameters must be flat (1-D); got {self.parameters.shape}")
        if len(self.slices) != self.choices.n:
            raise ValueError(f"{len(self.slices)} parameter slices for {self.choices.n} choices")
        size = self.parameters.shape[0]
        for start, stop in self.slices:
            if not 0 <= start <= stop <= size:
                raise ValueError(f"parameter slice ({start}, {stop}) is not within [0, {size}]")


Space = Discrete | Box | Hybrid
# An env action batch: one array, or (choice int32[B], parameters float32[B, P]) for Hybrid.
Action = Array | tuple[Array, Array]


@dataclass(frozen=True)
class EnvSpec:
    """What an agent needs to know about an env before anything is traced."""

    name: str
    family: str  # "jax", "brax" or "host": where the env runs
    observation_space: Box
    action_space: Space
    num_envs: int
    max_episode_steps: int
    vmappable: bool = True  # False: host envs that cannot be batched beyond their pool
    # True: episode statistics carry `episode_success` (the env defines success: a goal reached),
    # so evaluations report a success rate.
    reports_success: bool = False

    def to_json(self) -> dict[str, Any]:
        """The spec as JSON data: a run directory keeps it (`env_spec.json`) so that its policy
        can be rebuilt without building the env (`jaxrl.load`)."""
        return {
            "name": self.name,
            "family": self.family,
            "observation_space": _space_to_json(self.observation_space),
            "action_space": _space_to_json(self.action_space),
            "num_envs": self.num_envs,
            "max_episode_steps": self.max_episode_steps,
            "vmappable": self.vmappable,
            "reports_success": self.reports_success,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EnvSpec:
        return cls(
            **{
                **data,
                "observation_space": _space_from_json(data["observation_space"]),
                "action_space": _space_from_json(data["action_space"]),
            }
        )


def _space_to_json(space: Space) -> dict[str, Any]:
    if isinstance(space, Hybrid):
        return {
            "type": "Hybrid",
            "choices": _space_to_json(space.choices),
            "parameters": _space_to_json(space.parameters),
            "slices": [list(s) for s in space.slices],
        }
    dtype = np.dtype(space.dtype).name
    if isinstance(space, Discrete):
        return {"type": "Discrete", "n": space.n, "dtype": dtype}

    def bound(values: np.ndarray) -> float | list[Any]:
        """One number where every element shares it (pixel envs: 28k elements of 0 or 255)."""
        flat = np.asarray(values, np.float64).ravel()
        return float(flat[0]) if flat.size and np.all(flat == flat[0]) else flat.tolist()

    return {
        "type": "Box",
        "shape": list(space.shape),
        "dtype": dtype,
        "low": bound(space.low),
        "high": bound(space.high),
    }


def _space_from_json(data: dict[str, Any]) -> Space:
    if data["type"] == "Hybrid":
        choices = _space_from_json(data["choices"])
        parameters = _space_from_json(data["parameters"])
        assert isinstance(choices, Discrete) and isinstance(parameters, Box)
        return Hybrid(choices, parameters, tuple((start, stop) for start, stop in data["slices"]))
    if data["type"] == "Discrete":
        return Discrete(data["n"], dtype=np.dtype(data["dtype"]).type)
    shape, dtype = tuple(data["shape"]), np.dtype(data["dtype"])

    def bound(values: float | list[Any]) -> np.ndarray:
        flat = np.asarray(values, np.float64).reshape(-1)
        return np.broadcast_to(flat, (math.prod(shape),)).reshape(shape).astype(dtype)

    return Box(bound(data["low"]), bound(data["high"]), shape, dtype.type)


class TimeStep(NamedTuple):
    """One batched env step; the leading axis is the env batch.

    Auto-reset happens inside `step`: `obs` already belongs to the next episode where
    `terminated | truncated`, and `final_obs` is the last observation of the episode that ended
    (equal to `obs` elsewhere). Learners bootstrap from `final_obs` on truncation only.
    """

    obs: Array
    reward: Array
    terminated: Array
    truncated: Array
    final_obs: Array
    info: dict[str, Array]


class Transition(NamedTuple):
    """What off- and on-policy learners store: (s, a, r, s') with the two end flags apart."""

    obs: Array
    action: Array
    reward: Array
    terminated: Array
    truncated: Array
    next_obs: Array  # the true successor: `final_obs` of the step, not the reset observation
    # What the bootstrap from next_obs is discounted by, where it is not the agent's γ: γ^m of
    # an m-step return (`jaxrl.offpolicy.n_step_transitions`); None (not stored) otherwise.
    discount: Array | None = None


class Agent(NamedTuple):
    """An algorithm as pure functions over its state pytree (optax-style).

    `train_step` is one iteration (an ES generation, a PPO rollout + update...). It receives and
    returns the env state so on-policy agents can keep episodes running across iterations; agents
    that reset their own envs (ES) pass it through.
    """

    init: Callable[[Key], PyTree]
    act: Callable[[PyTree, Array, Key, bool], Array]  # bool: deterministic (evaluation)
    train_step: Callable[[PyTree, PyTree, Key], tuple[PyTree, PyTree, Metrics]]
    params: Callable[[PyTree], PyTree]  # the policy parameters, for NaN checks and export
    # Env steps every `train_step` counts, when that is fixed (a rollout of num_steps × envs);
    # None where it varies (whole episodes: ES, ERL, REINFORCE).
    steps_per_iteration: int | None = None
    # Env steps after which iterations cost more (an off-policy agent's random warm-up ends and
    # updates begin), or None: the training loop times its calls afresh from there, since a call
    # is sized by the last one's seconds per iteration (`checkpoint.call_seconds`).
    slower_from: int | None = None
    # The agent's critic in the env's units, for imitation learners that take it as the expert's
    # cost-to-go (jaxrl/imitation.py); None where the agent has none of that kind.
    # (state, batched obs, batched env actions) -> Q(s, a), the minimum over twin critics:
    action_value: Callable[[PyTree, Array, Array], Array] | None = None
    # (state, batched obs) -> V(s) in the env's reward units:
    state_value: Callable[[PyTree, Array], Array] | None = None
    # An agent whose acting carries memory from step to step (an options agent's running option)
    # is evaluated with it: (state, batched obs, memory, key) -> (deterministic actions, memory),
    # n envs' memory at the start of their episodes being `initial_memory(n)`. None: evaluations
    # call `act` at every step; `act` (what `jaxrl.load` and videos run) is memoryless always.
    act_with_memory: Callable[[PyTree, Array, PyTree, Key], tuple[Array, PyTree]] | None = None
    initial_memory: Callable[[int], PyTree] | None = None
