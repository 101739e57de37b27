"""The batched functional Env every family implements, and the vectoriser JAX-native envs share.

A JAX-native env only has to provide single-env `reset`/`step` functions (`EnvCore`); `VectorEnv`
turns them into the batched, auto-resetting, episode-counting `Env` (docs/architecture.md,
Environments), with time limits handled here so that `terminated` and `truncated` stay apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp

from jaxrl.config import ConfigError
from jaxrl.datatypes import Action, Array, Box, Discrete, EnvSpec, Hybrid, Key, Space, TimeStep


class Env(Protocol):
    """Batched, functional, auto-resetting environment."""

    spec: EnvSpec

    def reset(self, key: Key) -> tuple[Any, TimeStep]: ...

    def step(self, state: Any, action: Action, key: Key) -> tuple[Any, TimeStep]: ...

    def with_num_envs(self, num_envs: int) -> Env: ...


class EnvCore(NamedTuple):
    """One unbatched JAX env: `reset(key) -> (state, obs)`, `step(key, state, action) -> (state,
    obs, reward, terminated)`. Time limits are not its business."""

    reset: Callable[[Key], tuple[Any, Array]]
    step: Callable[[Key, Any, Action], tuple[Any, Array, Array, Array]]


class VectorState(NamedTuple):
    core: Any  # batched core state
    time: Array  # int32[B], steps since the episode began
    episode_return: Array  # float32[B], running return of the current episode
    episode_length: Array  # int32[B]


def episode_info(
    episode_return: Array, episode_length: Array, done: Array, success: Array | None = None
) -> dict[str, Array]:
    """Episode statistics as every family reports them: values are those of the episode that ended
    at this step and are meaningful only where `episode_done`. `success` (envs whose spec
    `reports_success`): whether that episode ended in success."""
    info = {
        "episode_return": episode_return,
        "episode_length": episode_length,
        "episode_done": done,
    }
    if success is not None:
        info["episode_success"] = success
    return info


@dataclasses.dataclass(frozen=True)
class VectorEnv:
    """Batches an `EnvCore` with vmap and adds time limits, auto-reset and episode statistics."""

    core: EnvCore
    spec: EnvSpec
    # Whether a core state is a success (a goal reached), for envs that define one (their spec
    # `reports_success`): the state an episode ended in is judged, and the verdict reported in
    # its statistics, so that evaluations can give a success rate.
    success: Callable[[Any], Array] | None = None

    def __post_init__(self) -> None:
        if (self.success is not None) != self.spec.reports_success:
            raise ValueError(
                f"{self.spec.name}: spec.reports_success={self.spec.reports_success} needs a "
                f"success function exactly when True"
            )

    def with_num_envs(self, num_envs: int) -> VectorEnv:
        return dataclasses.replace(self, spec=dataclasses.replace(self.spec, num_envs=num_envs))

    def reset(self, key: Key) -> tuple[VectorState, TimeStep]:
        n = self.spec.num_envs
        core_state, obs = jax.vmap(self.core.reset)(jax.random.split(key, n))
        zeros_f = jnp.zeros((n,), jnp.float32)
        zeros_b = jnp.zeros((n,), bool)
        state = VectorState(
            core_state, jnp.zeros((n,), jnp.int32), zeros_f, jnp.zeros((n,), jnp.int32)
        )
        success = zeros_b if self.spec.reports_success else None
        info = episode_info(zeros_f, jnp.zeros((n,), jnp.int32), zeros_b, success)
        return state, TimeStep(obs, zeros_f, zeros_b, zeros_b, obs, info)

    def step(self, state: VectorState, action: Action, key: Key) -> tuple[VectorState, TimeStep]:
        # One split for both uses: each split is an RNG call in every step of a rollout.
        step_keys, reset_keys = jax.random.split(key, (2, self.spec.num_envs))
        return self._advance(state, action, step_keys, jax.vmap(self.core.reset)(reset_keys))

    def step_restarting(
        self, state: VectorState, action: Action, key: Key, first: tuple[Any, Array]
    ) -> tuple[VectorState, TimeStep]:
        """`step`, but an env whose episode ends starts again from `first` (its batched core state
        and observation after `reset`), as Brax's AutoResetWrapper does. For rollouts that use
        each env's first episode only (`rollout.run_episodes`): a fresh reset's key split and
        draw in every step would be work, and compile time, spent on steps nobody counts. The
        step keys are `step`'s, so the counted steps are the same."""
        step_keys = jax.random.split(key, (2, self.spec.num_envs))[0]
        return self._advance(state, action, step_keys, first)

    def _advance(
        self, state: VectorState, action: Action, step_keys: Key, restart: tuple[Any, Array]
    ) -> tuple[VectorState, TimeStep]:
        """One step of every env; those whose episode ends take `restart` (core state, obs)."""
        core_state, obs, reward, terminated = jax.vmap(self.core.step)(
            step_keys, state.core, action
        )
        reward = reward.astype(jnp.float32)
        terminated = terminated.astype(bool)
        time = state.time + 1
        truncated = (time >= self.spec.max_episode_steps) & ~terminated
        done = terminated | truncated
        episode_return = state.episode_return + reward
        episode_length = state.episode_length + 1

        success = None if self.success is None else jax.vmap(self.success)(core_state)
        reset_state, reset_obs = restart

        def where_done(fresh: Array, old: Array) -> Array:
            mask = done.reshape(done.shape + (1,) * (old.ndim - 1))
            return jnp.where(mask, fresh, old)

        next_state = VectorState(
            core=jax.tree.map(where_done, reset_state, core_state),
            time=jnp.where(done, 0, time),
            episode_return=jnp.where(done, 0.0, episode_return),
            episode_length=jnp.where(done, 0, episode_length),
        )
        timestep = TimeStep(
            obs=where_done(reset_obs, obs),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            final_obs=obs,
            info=episode_info(episode_return, episode_length, done, success),
        )
        return next_state, timestep


def random_actions(spec: EnvSpec, key: Key) -> Action:
    """Uniformly random actions for the whole batch (Box bounds must be finite); for a Hybrid
    space a uniform choice and every choice's parameters uniform within their bounds."""
    return _random_batch(spec.action_space, spec.num_envs, key)


def _random_batch(space: Space, n: int, key: Key) -> Action:
    if isinstance(space, Hybrid):
        choice_key, parameter_key = jax.random.split(key)
        choices = _random_batch(space.choices, n, choice_key)
        return choices, _random_batch(space.parameters, n, parameter_key)
    if isinstance(space, Box):
        return jax.random.uniform(key, (n, *space.shape), minval=space.low, maxval=space.high)
    return jax.random.randint(key, (n,), 0, space.n, jnp.int32)


def describe_actions(space: Space) -> str:
    """The action space in the words of a refusal: "2 discrete actions", "Box actions of shape
    (1,)", or the hybrid space with its choices and parameters."""
    if isinstance(space, Hybrid):
        return (
            f"hybrid actions (a choice among {space.choices.n}, each with its continuous "
            f"parameters: {space.parameters.shape[0]} in all)"
        )
    if isinstance(space, Discrete):
        return f"{space.n} discrete actions"
    return f"Box actions of shape {space.shape}"


def discrete_actions(spec: EnvSpec, agent: str, instead: str) -> Discrete:
    """The env's Discrete action space; any other is refused before anything is traced, with
    `instead` naming what to use for Box actions (e.g. "for continuous actions use ddpg, td3 or
    sac")."""
    space = spec.action_space
    if not isinstance(space, Discrete):
        hint = "" if isinstance(space, Hybrid) else f" ({instead})"
        raise ConfigError(
            f"agent '{agent}' needs a Discrete action space; env '{spec.name}' has "
            f"{describe_actions(space)}{hint}"
        )
    return space


@dataclasses.dataclass(frozen=True)
class SpecOnlyEnv:
    """An env known by its spec alone, for building an agent only to act (`jaxrl.load`): its
    `init` can be traced on it for the state's structure. `reset` and `step` give zeros of the
    spec's shapes: it runs no episode worth learning from, and needs no simulator."""

    spec: EnvSpec

    def with_num_envs(self, num_envs: int) -> SpecOnlyEnv:
        return dataclasses.replace(self, spec=dataclasses.replace(self.spec, num_envs=num_envs))

    def reset(self, key: Key) -> tuple[Any, TimeStep]:
        del key
        return (), self._zeros()

    def step(self, state: Any, action: Action, key: Key) -> tuple[Any, TimeStep]:
        del action, key
        return state, self._zeros()

    def _zeros(self) -> TimeStep:
        n, space = self.spec.num_envs, self.spec.observation_space
        obs = jnp.zeros((n, *space.shape), space.dtype)
        zeros_f, zeros_b = jnp.zeros((n,), jnp.float32), jnp.zeros((n,), bool)
        success = zeros_b if self.spec.reports_success else None
        info = episode_info(zeros_f, jnp.zeros((n,), jnp.int32), zeros_b, success)
        return TimeStep(obs, zeros_f, zeros_b, zeros_b, obs, info)
