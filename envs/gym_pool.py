"""Gymnasium envs as host pools: `gym/<id>`, `bullet/<id>` and `pixel/<id>`.

`GymnasiumPool` steps Gymnasium envs in same-step auto-reset mode, in this process (`SameStepEnvs`,
the stepping of Gymnasium's `SyncVectorEnv` without its per-step info merging and copies) or in
`AsyncVectorEnv`'s worker processes, one per env (whose object-array `final_obs` info becomes a
dense array), and keeps the episode statistics. Observations are
float32 (uint8 images stay uint8; a Discrete observation becomes a one-hot vector), Discrete actions
int, Box actions the env's dtype; parameterised actions (gym-platform's `Tuple(Discrete(K),
Tuple(Box_1, ..., Box_K))`, or `Tuple(Discrete(K), Box)`) are our `Hybrid` (choice, flat
parameters), put back into the env's nesting on every step. The episode cap is the Gymnasium
spec's `max_episode_steps` (its TimeLimit wrapper truncates), or `env.max_episode_steps`, or for an
env that truncates by itself (`pixel/CartPole-v1` counts CartPole steps, not agent steps) its
`max_episode_steps` attribute. A step that terminates at the cap is terminated only, as everywhere
in jaxrl.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import signal
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces as gym_spaces
from gymnasium.vector import AsyncVectorEnv, AutoresetMode
from gymnasium.vector.utils import batch_space, iterate

from envs.configs import HostEnvConfig
from envs.host import HostEnv, HostEnvError, HostStep
from envs.host_ids import check_gymnasium_id, extra_of, gymnasium_id
from envs.ray_pool import pool_factory
from jaxrl.config import ConfigError, install_hint
from jaxrl.datatypes import Box, Discrete, EnvSpec, Hybrid, Space

LOCAL_POOL_MODES = ("sync", "async")  # what GymnasiumPool runs; `ray` pools wrap sync ones
START_METHOD = "spawn"  # forking a process that runs JAX's threads can deadlock
WORKER_EXIT_SECONDS = 2.0  # how long a worker whose pipe closed may take to be reported dead
# What the parent sees when a worker is lost: its pipe closed, or no answer within env.timeout.
WORKER_LOSS_ERRORS = (EOFError, ConnectionError, multiprocessing.TimeoutError)
# An async worker's failure is printed by Gymnasium as a warning per worker (the traceback, then
# "shutting it down" for each) before it raises; the HostEnvError we raise carries the env's own
# message in one line instead.
warnings.filterwarnings(
    "ignore",
    message=r".*ERROR: (Traceback|Received the following error|Raising the last exception)",
    category=UserWarning,
)


def _observation(space: gym_spaces.Space, name: str) -> tuple[Box, Callable[[Any], np.ndarray]]:
    """Our observation space and the conversion of a batch of the env's observations to it."""
    if isinstance(space, gym_spaces.Box):
        dtype = np.uint8 if space.dtype == np.uint8 else np.float32
        box = Box(space.low.astype(dtype), space.high.astype(dtype), tuple(space.shape), dtype)
        return box, lambda x: np.asarray(x, dtype)
    if isinstance(space, gym_spaces.Discrete):
        n, start = int(space.n), int(space.start)
        one_hot = np.eye(n, dtype=np.float32)
        box = Box(np.zeros(n, np.float32), np.ones(n, np.float32), (n,))
        return box, lambda x: one_hot[np.asarray(x, np.int64) - start]
    raise ConfigError(
        f"env '{name}': observation space {space} is not supported; valid: Box, Discrete"
    )


def _action(space: gym_spaces.Space, name: str) -> tuple[Space, Callable[[Any], Any]]:
    """Our action space and the conversion of a batch of our actions to the env's."""
    if isinstance(space, gym_spaces.Discrete):
        start = int(space.start)
        return Discrete(int(space.n)), lambda a: np.asarray(a, np.int64) + start
    if isinstance(space, gym_spaces.Box):
        box = Box(space.low.astype(np.float32), space.high.astype(np.float32), tuple(space.shape))
        return box, lambda a: np.asarray(a, space.dtype)
    if _is_hybrid(space):
        return _hybrid_action(space)
    raise ConfigError(
        f"env '{name}': action space {space} is not supported; valid: Box, Discrete, "
        f"Tuple(Discrete(K), Tuple(Box_1, ..., Box_K)) or Tuple(Discrete(K), Box)"
    )


def _is_hybrid(space: gym_spaces.Space) -> bool:
    """gym-platform's parameterised actions, `Tuple(Discrete(K), Tuple(Box_1, ..., Box_K))` (choice
    k's parameters in Box k), or `Tuple(Discrete(K), Box)` (every choice reads the one Box)."""
    if not (isinstance(space, gym_spaces.Tuple) and len(space.spaces) == 2):
        return False
    choices, parameters = space.spaces
    if not isinstance(choices, gym_spaces.Discrete):
        return False
    if isinstance(parameters, gym_spaces.Box):
        return True
    return (
        isinstance(parameters, gym_spaces.Tuple)
        and len(parameters.spaces) == int(choices.n)
        and all(isinstance(box, gym_spaces.Box) for box in parameters.spaces)
    )


def _hybrid_action(space: gym_spaces.Tuple) -> tuple[Hybrid, Callable[[Any], Any]]:
    """Our Hybrid space of a parameterised action space (`_is_hybrid`): the Boxes flattened side by
    side; a batch of our (choices, parameters) goes back to the env's nesting."""
    choices, parameters = space.spaces
    per_choice = isinstance(parameters, gym_spaces.Tuple)
    boxes = parameters.spaces if per_choice else (parameters,)
    ends = np.cumsum([int(np.prod(box.shape)) for box in boxes]).tolist()
    box_slices = tuple(zip([0, *ends[:-1]], ends, strict=True))
    low = np.concatenate([np.ravel(box.low) for box in boxes]).astype(np.float32)
    high = np.concatenate([np.ravel(box.high) for box in boxes]).astype(np.float32)
    n, start = int(choices.n), int(choices.start)
    hybrid = Hybrid(
        Discrete(n), Box(low, high, low.shape), box_slices if per_choice else box_slices * n
    )

    def to_env(actions: tuple[np.ndarray, np.ndarray]) -> tuple[Any, Any]:
        choice, flat = actions
        flat = np.asarray(flat)
        parts = tuple(
            np.asarray(flat[:, a:b], box.dtype).reshape(len(flat), *box.shape)
            for box, (a, b) in zip(boxes, box_slices, strict=True)
        )
        return np.asarray(choice, np.int64) + start, parts if per_choice else parts[0]

    return hybrid, to_env


class SameStepEnvs:
    """Gymnasium envs stepped in this process as `SyncVectorEnv` steps them in same-step auto-reset
    mode (env i seeded with seed + i; an env whose episode ended is reset at once, unseeded, and
    the ended episode's last observation kept), written into preallocated batch arrays. The
    vector env's per-step info merging, space-generic batching and copies are a large share of a
    cheap env's step (benchmarks/results/host_bridge.md); the episodes are the same, step for
    step (tests/envs/test_host.py)."""

    def __init__(self, env_fns: Sequence[Callable[[], gymnasium.Env]]) -> None:
        self.envs = [make() for make in env_fns]
        self.closed = False
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        n = len(self.envs)
        self._batched_actions = batch_space(self.single_action_space, n)
        self._discrete_actions = isinstance(self.single_action_space, gym_spaces.Discrete)
        space = self.single_observation_space
        self._obs = np.zeros((n, *space.shape), space.dtype)  # a Discrete one: int64[n]
        self._reward = np.zeros(n, np.float64)
        self._terminated = np.zeros(n, bool)
        self._truncated = np.zeros(n, bool)

    def reset(self, seed: int) -> np.ndarray:
        for i, env in enumerate(self.envs):
            self._obs[i], _ = env.reset(seed=seed + i)
        return self._obs.copy()

    def step(self, actions: Any) -> tuple[np.ndarray, ...]:
        """(obs, reward, terminated, truncated, final obs): fresh arrays, obs where no episode
        ended in final obs."""
        # Discrete choices go as Python ints, which `Discrete.contains` (asserted by many envs'
        # step) checks several times faster than numpy integers; a Box batch is iterated row by
        # row, as `iterate` does; a hybrid action's (choices, parameters) pair needs Gymnasium's
        # Tuple iteration.
        if self._discrete_actions:
            per_env = actions.tolist()
        elif isinstance(actions, np.ndarray):
            per_env = actions
        else:
            per_env = iterate(self._batched_actions, actions)
        ended = []
        for i, (env, action) in enumerate(zip(self.envs, per_env, strict=True)):
            obs, reward, terminated, truncated, _ = env.step(action)
            self._reward[i], self._terminated[i], self._truncated[i] = reward, terminated, truncated
            if terminated or truncated:
                ended.append((i, obs))
                obs, _ = env.reset()
            self._obs[i] = obs
        obs = self._obs.copy()
        final_obs = obs.copy()
        for i, last in ended:
            final_obs[i] = last
        return obs, self._reward.copy(), self._terminated.copy(), self._truncated.copy(), final_obs

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.closed = True


class GymnasiumPool:
    """A `HostPool` over Gymnasium envs (mode `sync`: `SameStepEnvs`, or `async`: Gymnasium's
    `AsyncVectorEnv`), same-step auto-reset.

    Failures are raised as `HostEnvError` with the env's own message; a dead async worker is
    reported with its exit code, and an async pool that does not answer within `timeout` seconds
    raises instead of hanging. A failed pool is closed.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gymnasium.Env]],
        mode: str = "sync",
        *,
        name: str = "host env",
        timeout: float | None = None,
    ) -> None:
        if mode not in LOCAL_POOL_MODES:
            raise ConfigError(f"pool mode '{mode}' is not one of: {', '.join(LOCAL_POOL_MODES)}")
        self.num_envs = len(env_fns)
        self.name = name
        self.mode = mode
        self.timeout = timeout
        if mode == "sync":
            self.env = self._guard("creating its envs", SameStepEnvs, env_fns)
        else:
            from envs.host_worker import worker

            with _quiet_resource_tracker():
                self.env = self._guard(
                    "starting its workers",
                    AsyncVectorEnv,
                    env_fns,
                    context=START_METHOD,
                    worker=worker,
                    autoreset_mode=AutoresetMode.SAME_STEP,
                )
        _, self._obs = _observation(self.env.single_observation_space, name)
        _, self._act = _action(self.env.single_action_space, name)
        self._return = np.zeros(self.num_envs, np.float64)
        self._actions: Any = None  # of the step begun by step_async
        self._length = np.zeros(self.num_envs, np.int64)

    def reset(self, seed: int, env_offset: int = 0) -> np.ndarray:
        seed += env_offset  # Gymnasium seeds env i with seed + i
        if self.mode == "sync":
            obs = self._guard("reset", self.env.reset, seed)
        else:
            self._guard("reset", self.env.reset_async, seed=seed)
            obs, _ = self._guard("reset", self.env.reset_wait, timeout=self.timeout)
        self._return[:] = 0.0
        self._length[:] = 0
        return self._obs(obs)

    def step(self, actions: Any) -> HostStep:
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: Any) -> None:
        """Start a step: async workers begin at once, so the bridge overlaps several pools (one
        per vmapped seed); a sync pool only takes the actions."""
        self._actions = self._act(actions)
        if self.mode == "async":
            self._guard("step", self.env.step_async, self._actions)

    def step_wait(self) -> HostStep:
        """Finish the step `step_async` started."""
        if self.mode == "sync":
            result = self._guard("step", self.env.step, self._actions)
            obs, reward, terminated, truncated, final_obs = result
        else:
            result = self._guard("step", self.env.step_wait, timeout=self.timeout)
            obs, reward, terminated, truncated, info = result
            final_obs = obs.copy()
            ended = info.get("_final_obs")
            if ended is not None and ended.any():
                final_obs[ended] = np.stack(info["final_obs"][ended])
        obs, final_obs = self._obs(obs), self._obs(final_obs)
        terminated = np.asarray(terminated, bool)
        # Gymnasium's TimeLimit also flags a step that terminated at the cap as truncated; here a
        # step is truncated only if it did not terminate (as `jaxrl.env.VectorEnv`).
        truncated = np.asarray(truncated, bool) & ~terminated
        done = terminated | truncated
        self._return += reward
        self._length += 1
        step = HostStep(
            obs=obs,
            reward=np.asarray(reward, np.float32),
            terminated=terminated,
            truncated=truncated,
            final_obs=final_obs,
            episode_return=self._return.astype(np.float32),
            episode_length=self._length.astype(np.int32),
            episode_done=done,
        )
        self._return[done] = 0.0
        self._length[done] = 0
        return step

    def close(self) -> None:
        env = getattr(self, "env", None)
        if env is None or env.closed:
            return
        if self.mode == "async":
            # Gymnasium's own close first waits for a call still pending, which after a failure
            # raises again (and once more from __del__): the workers are ended here instead, so
            # a stuck or dead one can neither hang nor clutter the exit.
            for process in env.processes:
                if process.is_alive():
                    process.terminate()
            for pipe in env.parent_pipes:
                if pipe is not None:
                    pipe.close()
            for process in env.processes:
                process.join()
            env.closed = True
        else:
            env.close()

    def _guard(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`fn(...)`, with every failure raised as a HostEnvError naming the env."""
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            message = self._failure(what, e)
            self.close()
            raise HostEnvError(message) from e

    def _failure(self, what: str, e: Exception) -> str:
        # Only a broken pipe or a missing answer can mean a worker died: an exception relayed
        # from a worker is the env's own, though that worker exits (code 0) right after sending
        # it and may be gone by the time it is read.
        if self.mode == "async" and isinstance(e, WORKER_LOSS_ERRORS):
            processes = getattr(getattr(self, "env", None), "processes", [])
            if isinstance(e, EOFError | ConnectionError):  # a pipe closed: its worker is ending
                for process in processes:
                    process.join(WORKER_EXIT_SECONDS)
                    if process.exitcode is not None:
                        break
            dead = [(i, p.exitcode) for i, p in enumerate(processes) if p.exitcode is not None]
            if dead:
                index, code = dead[0]
                how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
                return f"{self.name}: async worker {index} died during {what} ({how})"
            if isinstance(e, multiprocessing.TimeoutError):
                return (
                    f"{self.name}: async workers gave no answer to {what} within {self.timeout} s "
                    f"(env.timeout)"
                )
        return f"{self.name}: {what} raised {type(e).__name__}: {e}"


_QUIET_TRACKER = "ignore:resource_tracker:UserWarning"


@contextlib.contextmanager
def _quiet_resource_tracker() -> Iterator[None]:
    """multiprocessing's resource tracker (a process of its own, started with the first async
    pool) warns of the pools' semaphores when the run ends without closing them: a second Ctrl-C
    exits at once, on purpose, and the run's one line is the report. The tracker takes its
    warning filters from the environment it starts with, so they are set while the pool starts
    and given back after: the caller's environment is left as it was."""
    before = os.environ.get("PYTHONWARNINGS")
    os.environ["PYTHONWARNINGS"] = ",".join(f for f in (before, _QUIET_TRACKER) if f)
    try:
        yield
    finally:
        if before is None:
            del os.environ["PYTHONWARNINGS"]
        else:
            os.environ["PYTHONWARNINGS"] = before


def gymnasium_spec(cfg: HostEnvConfig, num_envs: int) -> tuple[EnvSpec, Callable[[], Any]]:
    """The EnvSpec of a Gymnasium env (read off one instance) and the function making one."""
    check_gymnasium_id(cfg.id)
    make_one = functools.partial(
        gymnasium.make, gymnasium_id(cfg.id), max_episode_steps=cfg.max_episode_steps, **cfg.kwargs
    )
    try:
        env = make_one()
    except gymnasium.error.DependencyNotInstalled as e:
        raise ConfigError(f"env '{cfg.id}': {e} ({install_hint(extra_of(cfg.id))})") from None
    except TypeError as e:  # unknown keyword argument
        raise ConfigError(f"env '{cfg.id}': env.kwargs {dict(cfg.kwargs)}: {e}") from None
    try:
        observation_space, _ = _observation(env.observation_space, cfg.id)
        action_space, _ = _action(env.action_space, cfg.id)
        max_steps = env.spec.max_episode_steps if env.spec is not None else None
        if max_steps is None:  # an env that enforces its own cap says so in an attribute
            with contextlib.suppress(AttributeError):
                max_steps = env.get_wrapper_attr("max_episode_steps")
    finally:
        env.close()
    if max_steps is None:
        raise ConfigError(
            f"env '{cfg.id}' has no episode cap (neither a registered max_episode_steps nor a "
            f"`max_episode_steps` attribute); set env.max_episode_steps (evaluation and episodic "
            f"agents need every episode to end)"
        )
    spec = EnvSpec(
        name=cfg.id,
        family="host",
        observation_space=observation_space,
        action_space=action_space,
        num_envs=num_envs,
        max_episode_steps=int(max_steps),
        vmappable=False,
    )
    return spec, make_one


class GymnasiumEnv(HostEnv):
    """A HostEnv over GymnasiumPools, drawn for videos by one more instance of its Gymnasium env
    that renders: the policy then sees the observations it was trained on."""

    def make_render_env(self) -> gymnasium.Env:
        return gymnasium.make(
            gymnasium_id(self.spec.name),
            render_mode="rgb_array",
            max_episode_steps=self.spec.max_episode_steps,
        )


def make_gymnasium(cfg: HostEnvConfig, num_envs: int) -> GymnasiumEnv:
    """`gym/<id>`, `bullet/<id>`, `pixel/<id>` as a HostEnv over GymnasiumPools (for `env.pool=ray`,
    sync ones inside Ray actors)."""
    spec, make_one = gymnasium_spec(cfg, num_envs)
    mode = "sync" if cfg.pool == "ray" else cfg.pool
    local = functools.partial(_local_pool, make_one, mode, cfg.id, cfg.timeout)
    return GymnasiumEnv(spec, pool_factory(cfg, local), cfg.callback)


def _local_pool(
    make_one: Callable[[], gymnasium.Env],
    mode: str,
    name: str,
    timeout: float | None,
    num_envs: int,
    seed: int,
) -> GymnasiumPool:
    """An `envs.host.PoolFactory` once the env is bound (module level: Ray actors import it)."""
    del seed  # the pool is seeded by its reset
    return GymnasiumPool([make_one] * num_envs, mode, name=name, timeout=timeout)
