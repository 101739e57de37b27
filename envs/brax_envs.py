"""The Brax family: MuJoCo-style locomotion simulated in JAX, inside the compiled program.

Brax's envs are used raw (none of Brax's wrappers); `BraxEnv` adds the batch, the time limit,
same-step auto-reset and episode statistics with the semantics of `jaxrl.env.VectorEnv`. The time
limit follows Brax's `EpisodeWrapper` (`info["truncation"]`): the step that reaches
`max_episode_steps` is truncated unless the env terminated on it, and then it is only terminated.

Brax stays optional: this module imports it only when a Brax env is built.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import io
import logging
import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from envs import BRAX
from envs.configs import DEFAULT_BACKEND, DEFAULT_EPISODE_STEPS, check_backend
from jaxrl.config import ConfigError, install_hint
from jaxrl.datatypes import Array, Box, EnvSpec, Key, TimeStep
from jaxrl.env import episode_info

logger = logging.getLogger(__name__)

PREFIX = "brax/"
# Our name -> Brax's registry name.
BRAX_NAMES = {name: name.removeprefix(PREFIX) for name in BRAX}
# Each env's cached initial state is redrawn at least this often (in steps); see `BraxEnv`.
REFRESH_PERIOD = 16


def brax_available() -> bool:
    return importlib.util.find_spec("brax") is not None


@functools.cache
def _brax_env(name: str, backend: str) -> Any:
    """Brax's env object (parsing its MJCF takes seconds, so built once per process)."""
    # mujoco's MJX prints two lines about its optional GPU backend (warp) on import, and Brax warns
    # on every build that its own pipelines are in maintenance mode: noise to a user of the env.
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        import mujoco
        from brax import envs as brax_envs

        # MuJoCo's own warnings on Brax's assets (halfcheetah's deprecated `settotalmass`) would
        # otherwise go to stderr and a MUJOCO_LOG.TXT in the working directory.
        previous = mujoco.get_mju_user_warning()
        mujoco.set_mju_user_warning(lambda message: logger.info("mujoco: %s", message))
        try:
            return brax_envs.get_environment(name, backend=backend)
        finally:
            mujoco.set_mju_user_warning(previous)


class BraxState(NamedTuple):
    core: Any  # Brax `State`, batched
    first: Any  # Brax `State` each env restarts from after its episode ends
    time: Array  # int32[B], steps since the episode began
    episode_return: Array  # float32[B]
    episode_length: Array  # int32[B]
    # int32[B], every entry the same: the first env whose `first` the next step redraws. Kept per
    # env (not a scalar) so that every leaf of the state has the batch axis: learners may shard the
    # batch over devices or step its envs one by one.
    next_refresh: Array


@dataclasses.dataclass(frozen=True)
class BraxEnv:
    """A Brax env batched, time-limited, auto-resetting and counting episodes like `VectorEnv`.

    Not `VectorEnv` because a Brax reset costs about half a step, and `VectorEnv` resets every env
    on every step (benchmarks/results/design_notes.md). Instead, as
    Brax's `AutoResetWrapper` does, each env restarts from a cached initial state; unlike Brax,
    which replays one initial state per env forever, the caches are redrawn round-robin, every env's
    at least every `REFRESH_PERIOD` steps, at 1/`REFRESH_PERIOD` of the cost of a full reset.
    """

    env: Any  # Brax's PipelineEnv
    spec: EnvSpec

    def with_num_envs(self, num_envs: int) -> BraxEnv:
        return dataclasses.replace(self, spec=dataclasses.replace(self.spec, num_envs=num_envs))

    @property
    def refresh_count(self) -> int:
        """Envs redrawn per step: the smallest divisor of the batch that keeps the period, so the
        redrawn envs are one contiguous block (a slice update, not a scatter)."""
        n = self.spec.num_envs
        return next(k for k in range(1, n + 1) if n % k == 0 and k * REFRESH_PERIOD >= n)

    def reset(self, key: Key) -> tuple[BraxState, TimeStep]:
        n = self.spec.num_envs
        core = jax.vmap(self.env.reset)(jax.random.split(key, n))
        zeros_f = jnp.zeros((n,), jnp.float32)
        zeros_i = jnp.zeros((n,), jnp.int32)
        zeros_b = jnp.zeros((n,), bool)
        state = BraxState(core, core, zeros_i, zeros_f, zeros_i, zeros_i)
        info = episode_info(zeros_f, zeros_i, zeros_b)
        return state, TimeStep(core.obs, zeros_f, zeros_b, zeros_b, core.obs, info)

    def step(self, state: BraxState, action: Array, key: Key) -> tuple[BraxState, TimeStep]:
        n = self.spec.num_envs
        core = jax.vmap(self.env.step)(state.core, action)
        reward = core.reward.astype(jnp.float32)
        # Brax's `done` is termination only (a fall, a pole past its limit): the time limit is ours,
        # with the rule of Brax's EpisodeWrapper (info["truncation"]).
        terminated = core.done > 0
        time = state.time + 1
        truncated = (time >= self.spec.max_episode_steps) & ~terminated
        done = terminated | truncated
        episode_return = state.episode_return + reward
        episode_length = state.episode_length + 1

        def where_done(fresh: Array, old: Array) -> Array:
            return jnp.where(done.reshape(done.shape + (1,) * (old.ndim - 1)), fresh, old)

        k = self.refresh_count
        fresh = jax.vmap(self.env.reset)(jax.random.split(key, k))

        def refresh(cached: Array, new: Array) -> Array:
            return jax.lax.dynamic_update_slice_in_dim(cached, new, state.next_refresh[0], axis=0)

        next_state = BraxState(
            core=jax.tree.map(where_done, state.first, core),
            first=jax.tree.map(refresh, state.first, fresh),
            time=jnp.where(done, 0, time),
            episode_return=jnp.where(done, 0.0, episode_return),
            episode_length=jnp.where(done, 0, episode_length),
            next_refresh=(state.next_refresh + k) % n,
        )
        timestep = TimeStep(
            obs=where_done(state.first.obs, core.obs),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            final_obs=core.obs,
            info=episode_info(episode_return, episode_length, done),
        )
        return next_state, timestep


def make_brax(
    env_id: str, num_envs: int, max_episode_steps: int | None, backend: str = DEFAULT_BACKEND
) -> BraxEnv:
    """Brax's env `env_id` (a `brax/` name) behind our batched functional `Env`."""
    check_backend(backend)
    if not brax_available():
        raise ConfigError(
            f"env '{env_id}' needs Brax, which is not installed: {install_hint('brax')}"
        )
    env = _brax_env(BRAX_NAMES[env_id], backend)
    obs_shape = jax.eval_shape(env.reset, jax.random.PRNGKey(0)).obs.shape
    # Brax envs take actions in [-1, 1]: humanoid and inverted_pendulum rescale them to their
    # actuators' ranges, the others clip to actuator ranges of [-1, 1].
    action_shape = (env.action_size,)
    unbounded = np.full(obs_shape, np.inf, np.float32)
    unit = np.ones(action_shape, np.float32)
    spec = EnvSpec(
        name=env_id,
        family="brax",
        observation_space=Box(-unbounded, unbounded, obs_shape),
        action_space=Box(-unit, unit, action_shape),
        num_envs=num_envs,
        max_episode_steps=max_episode_steps or DEFAULT_EPISODE_STEPS,
    )
    return BraxEnv(env, spec)
