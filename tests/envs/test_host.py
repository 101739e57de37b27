"""The host bridge (`envs/host.py`, `envs/gym_pool.py`): Gymnasium envs stepped from compiled code.

Parity is against the same Gymnasium vector env stepped from Python with the same seed and
actions (the bridge's RNG is Gymnasium's, so JAX-native CartPole is not a reference).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import signal
import time

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cli_helpers import FIXTURES
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from learning import assert_mean_at_least

import envs
import jaxrl
from envs import host
from envs.configs import HostEnvConfig
from envs.gym_pool import GymnasiumPool, make_gymnasium
from envs.host import HostEnv, HostEnvError, host_errors, seed_from_key
from jaxrl.cli import compose
from jaxrl.config import ConfigError, EnvConfig
from jaxrl.datatypes import Box, Hybrid
from jaxrl.prng import make_key

QUIET = ("log.progress=false", "log.tensorboard=false")
CAP = 15  # CartPole episode cap for the parity tests: random play both terminates and truncates


def cartpole(num_envs: int, **options) -> HostEnv:
    return envs.make(
        HostEnvConfig(id="gym/CartPole-v1", max_episode_steps=CAP, **options), num_envs
    )


def rollout(env: HostEnv, key: jax.Array, actions: jax.Array):
    """reset + a lax.scan of env.step over `actions` [T, n]; returns (first obs, [T] TimeSteps)."""
    state, first = env.reset(key)

    def body(state, action):
        state, ts = env.step(state, action, key)
        return state, ts

    _, steps = jax.lax.scan(body, state, actions)
    return first.obs, steps


def gymnasium_reference(num_envs: int, seed: int, actions: np.ndarray):
    """The same episodes stepped by Gymnasium from Python: obs, reward, flags, dense final obs and
    the episode return / length counted by hand."""
    vec = SyncVectorEnv(
        [functools.partial(gymnasium.make, "CartPole-v1", max_episode_steps=CAP)] * num_envs,
        autoreset_mode=AutoresetMode.SAME_STEP,
    )
    first, _ = vec.reset(seed=seed)
    out = {k: [] for k in ("obs", "reward", "terminated", "truncated", "final_obs", "ret", "len")}
    running, length = np.zeros(num_envs), np.zeros(num_envs, int)
    for action in actions:
        obs, reward, terminated, truncated, info = vec.step(action)
        final = obs.copy()
        for i in np.flatnonzero(info.get("_final_obs", np.zeros(num_envs, bool))):
            final[i] = info["final_obs"][i]
        running, length = running + reward, length + 1
        for key, value in zip(
            out,
            (obs, reward, terminated, truncated, final, running.copy(), length.copy()),
            strict=True,
        ):
            out[key].append(value)
        done = terminated | truncated
        running[done], length[done] = 0, 0
    vec.close()
    return first, {k: np.stack(v) for k, v in out.items()}


def test_scan_of_80_steps_equals_gymnasium_stepped_from_python():
    n, steps = 4, 80
    env = cartpole(n)
    key = make_key(7)
    actions = np.random.default_rng(0).integers(0, 2, (steps, n)).astype(np.int32)
    first, ts = jax.jit(rollout, static_argnums=0)(env, key, actions)
    ref_first, ref = gymnasium_reference(n, seed_from_key(key), actions)

    np.testing.assert_array_equal(first, ref_first)
    np.testing.assert_array_equal(ts.obs, ref["obs"])
    np.testing.assert_array_equal(ts.reward, ref["reward"])
    np.testing.assert_array_equal(ts.terminated, ref["terminated"])
    # Gymnasium flags a termination at the cap as truncated too; jaxrl: terminated only.
    np.testing.assert_array_equal(ts.truncated, ref["truncated"] & ~ref["terminated"])
    np.testing.assert_array_equal(ts.final_obs, ref["final_obs"])
    done = ref["terminated"] | ref["truncated"]
    np.testing.assert_array_equal(ts.info["episode_done"], done)
    np.testing.assert_array_equal(ts.info["episode_return"][done], ref["ret"][done])
    np.testing.assert_array_equal(ts.info["episode_length"][done], ref["len"][done])
    # Both end flags happened, never together; truncation exactly at the cap.
    assert ts.terminated.sum() >= 3 and ts.truncated.sum() >= 3
    assert not (ts.terminated & ts.truncated).any()
    assert set(ts.info["episode_length"][ts.truncated].tolist()) == {CAP}
    # Where an episode ended, obs is the new episode's start and final_obs the old one's end.
    assert not np.array_equal(ts.obs[done], ts.final_obs[done])
    np.testing.assert_array_equal(ts.obs[~done], ts.final_obs[~done])
    assert env.spec.family == "host" and not env.spec.vmappable
    env.close()


def test_the_sync_pool_steps_box_actions_as_gymnasiums_vector_env():
    """The sync pool steps its envs itself (`SameStepEnvs`); on Pendulum (Box actions) with a
    7-step cap it gives `SyncVectorEnv`'s observations, rewards and truncations, and the ended
    episodes' last observations, bit for bit."""
    n, cap, steps = 3, 7, 20
    make = functools.partial(gymnasium.make, "Pendulum-v1", max_episode_steps=cap)
    pool = GymnasiumPool([make] * n, "sync")
    vec = SyncVectorEnv([make] * n, autoreset_mode=AutoresetMode.SAME_STEP)
    np.testing.assert_array_equal(pool.reset(5), vec.reset(seed=5)[0])
    truncations = 0
    for action in np.random.default_rng(1).uniform(-2, 2, (steps, n, 1)).astype(np.float32):
        step = pool.step(action)
        obs, reward, terminated, truncated, info = vec.step(action)
        final = obs.copy()
        for i in np.flatnonzero(info.get("_final_obs", np.zeros(n, bool))):
            final[i] = info["final_obs"][i]
        np.testing.assert_array_equal(step.obs, obs)
        np.testing.assert_array_equal(step.reward, reward.astype(np.float32))
        np.testing.assert_array_equal(step.truncated, truncated)
        np.testing.assert_array_equal(step.final_obs, final)
        assert not step.terminated.any() and not terminated.any()
        np.testing.assert_array_equal(step.episode_length[step.truncated], cap)
        truncations += int(step.truncated.sum())
    assert truncations == steps // cap * n
    pool.close()
    vec.close()


def test_io_callback_path_gives_the_same_steps():
    n, actions = 2, np.ones((30, 2), np.int32)
    key = make_key(3)
    buffers = jax.jit(rollout, static_argnums=0)(cartpole(n), key, actions)
    io = HostEnv(cartpole(n).spec, cartpole(n).make_pool, callback="io")
    through_io = jax.jit(rollout, static_argnums=0)(io, key, actions)
    jax.tree.map(np.testing.assert_array_equal, buffers, through_io)


class TransposedBlocks:
    """CartPole's pool with each observation kept as a transposed 2×2 block: a pool whose
    layout differs from its spec's, as Atari's [stack, H, W] frames do."""

    def __init__(self, pool: GymnasiumPool) -> None:
        self.pool, self.num_envs = pool, pool.num_envs

    @staticmethod
    def layout(obs: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(obs.reshape(-1, 2, 2).transpose(0, 2, 1))

    def reset(self, seed: int, env_offset: int = 0) -> np.ndarray:
        return self.layout(self.pool.reset(seed, env_offset))

    def step(self, actions: np.ndarray) -> host.HostStep:
        step = self.pool.step(actions)
        return step._replace(obs=self.layout(step.obs), final_obs=self.layout(step.final_obs))

    def close(self) -> None:
        self.pool.close()


def test_xla_puts_a_pools_observations_into_the_specs_layout_vmapped_too():
    n, steps = 2, 30
    plain = cartpole(n)
    space = plain.spec.observation_space
    blocks = Box(space.low.reshape(2, 2), space.high.reshape(2, 2), (2, 2))
    spec = dataclasses.replace(plain.spec, observation_space=blocks)
    make_pool = lambda num_envs, seed: TransposedBlocks(plain.make_pool(num_envs, seed))
    permuted = HostEnv(spec, make_pool, obs_axes=(1, 0))
    assert permuted._obs_struct().shape == (n, 2, 2)
    keys = jnp.stack([make_key(s) for s in (4, 5)])
    actions = np.random.default_rng(2).integers(0, 2, (2, steps, n)).astype(np.int32)
    reference = jax.jit(jax.vmap(functools.partial(rollout, plain)))(keys, actions)
    first, ts = jax.jit(jax.vmap(functools.partial(rollout, permuted)))(keys, actions)
    # The pool's transposed blocks, transposed back: the spec's layout is the plain reshape.
    np.testing.assert_array_equal(first, reference[0].reshape(2, n, 2, 2))
    np.testing.assert_array_equal(ts.obs, reference[1].obs.reshape(2, steps, n, 2, 2))
    np.testing.assert_array_equal(ts.final_obs, reference[1].final_obs.reshape(2, steps, n, 2, 2))
    assert ts.info["episode_done"].any()  # final_obs differs from obs somewhere: not vacuous
    with pytest.raises(ConfigError, match=r"obs_axes=\(0, 0\) must be a permutation of the "):
        HostEnv(spec, make_pool, obs_axes=(0, 0))


def test_vmapped_seeds_are_one_host_call_and_equal_seeds_run_one_by_one(monkeypatch):
    n, steps = 3, 40
    env = cartpole(n)
    keys = jnp.stack([make_key(s) for s in (0, 1, 2)])
    actions = np.random.default_rng(1).integers(0, 2, (3, steps, n)).astype(np.int32)
    one = jax.jit(functools.partial(rollout, env))
    alone = [one(keys[i], actions[i]) for i in range(3)]

    calls = []
    step = host._REGISTRY.step
    monkeypatch.setattr(
        host._REGISTRY, "step", lambda o, name, h, a: calls.append(len(h)) or step(o, name, h, a)
    )
    together = jax.jit(jax.vmap(functools.partial(rollout, env)))(keys, actions)
    assert calls == [3] * steps  # one host call per step for the three seeds
    for i in range(3):
        jax.tree.map(lambda a, b, i=i: np.testing.assert_array_equal(a[i], b), together, alone[i])

    calls.clear()
    nested = jax.jit(jax.vmap(jax.vmap(functools.partial(rollout, env))))(
        keys[:2].reshape(2, 1), actions[:2].reshape(2, 1, steps, n)
    )
    assert calls == [2] * steps
    np.testing.assert_array_equal(nested[1].obs[1, 0], alone[1][1].obs)


def test_a_site_reuses_its_pools_and_stale_handles_fail_clearly():
    env = cartpole(2)
    run = jax.jit(functools.partial(rollout, env))
    actions = np.zeros((5, 2), np.int32)
    first_a, _ = run(make_key(0), actions)
    pools = {id(s.pool) for s in host._REGISTRY.slots.values() if s.owner == env._owner}
    first_b, _ = run(make_key(0), actions)  # same site, stepped since: the same pool, reseeded
    assert {id(s.pool) for s in host._REGISTRY.slots.values() if s.owner == env._owner} == pools
    np.testing.assert_array_equal(first_a, first_b)
    for _ in range(2):  # retraced (a new jit of the same code): the same site, the same pools
        jax.jit(functools.partial(rollout, env))(make_key(0), actions)
        assert {id(s.pool) for s in host._REGISTRY.slots.values() if s.owner == env._owner} == pools

    reset, step = jax.jit(env.reset), jax.jit(env.step)  # one reset site
    state, _ = reset(make_key(1))
    unstepped, _ = reset(make_key(1))  # `state` was not stepped: a new pool, both stay valid
    assert int(unstepped) != int(state)
    step(unstepped, jnp.zeros(2, jnp.int32), make_key(0))
    reset(make_key(2))  # restarts the pool `unstepped` named
    step(state, jnp.zeros(2, jnp.int32), make_key(0))
    with pytest.raises(HostEnvError, match="names no live pool"), host_errors():
        jax.block_until_ready(step(unstepped, jnp.zeros(2, jnp.int32), make_key(0)))
    env.close()
    assert not any(s.owner == env._owner for s in host._REGISTRY.slots.values())


@pytest.mark.timeout(120)
def test_async_pools_equal_sync_pools_and_overlap_vmapped_seeds():
    keys = jnp.stack([make_key(s) for s in (4, 5)])
    actions = np.random.default_rng(2).integers(0, 2, (2, 40, 2)).astype(np.int32)
    results = {}
    for mode in ("sync", "async"):
        env = cartpole(2, pool=mode)
        results[mode] = jax.jit(jax.vmap(functools.partial(rollout, env)))(keys, actions)
        env.close()
    jax.tree.map(np.testing.assert_array_equal, results["sync"], results["async"])
    assert results["async"][1].info["episode_done"].sum() >= 4


class Exploding(gymnasium.Env):
    """CartPole that raises on its third step."""

    def __init__(self) -> None:
        self.inner = gymnasium.make("CartPole-v1")
        self.observation_space, self.action_space = (
            self.inner.observation_space,
            self.inner.action_space,
        )
        self.steps = 0

    def reset(self, *, seed=None, options=None):
        return self.inner.reset(seed=seed)

    def step(self, action):
        self.steps += 1
        if self.steps == 3:
            raise ValueError("the reactor melted down")
        return self.inner.step(action)


@pytest.mark.timeout(60)
def test_an_env_exception_surfaces_as_host_env_error_with_its_message():
    spec = cartpole(2).spec
    env = HostEnv(spec, lambda n, seed: GymnasiumPool([Exploding] * n, "sync", name="exploding"))
    actions = np.zeros((10, 2), np.int32)
    t0 = time.perf_counter()
    with (
        pytest.raises(
            HostEnvError, match="exploding: step raised ValueError: the reactor melted down"
        ) as info,
        host_errors(),
    ):
        jax.block_until_ready(jax.jit(functools.partial(rollout, env))(make_key(0), actions))
    assert isinstance(info.value.__cause__, ValueError)
    assert time.perf_counter() - t0 < 30


class Interrupted(Exploding):
    """As if Ctrl-C arrived while the env was stepping."""

    def step(self, action):
        raise KeyboardInterrupt


@pytest.mark.timeout(60)
def test_ctrl_c_during_a_host_call_leaves_as_keyboard_interrupt():
    env = HostEnv(cartpole(1).spec, lambda n, seed: GymnasiumPool([Interrupted] * n, "sync"))
    with pytest.raises(KeyboardInterrupt), host_errors():
        jax.block_until_ready(
            jax.jit(functools.partial(rollout, env))(make_key(0), np.zeros((2, 1), np.int32))
        )


@pytest.mark.timeout(120)
@pytest.mark.filterwarnings("ignore::UserWarning")  # gymnasium logs the worker error
def test_async_pool_worker_errors_and_deaths_surface_quickly():
    pools = []

    def make_pool(n, seed):
        pools.append(
            GymnasiumPool(
                [functools.partial(gymnasium.make, "CartPole-v1")] * n,
                "async",
                name="gym/CartPole-v1",
                timeout=30,
            )
        )
        return pools[-1]

    env = HostEnv(cartpole(2).spec, make_pool)
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    with host_errors():
        state, ts = jax.block_until_ready(reset(make_key(0)))
    workers = pools[0].env.processes
    os.kill(workers[0].pid, signal.SIGINT)  # Ctrl-C reaches workers too: they ignore it
    with host_errors():
        state, ts = jax.block_until_ready(step(state, jnp.zeros(2, jnp.int32), make_key(0)))
    assert ts.obs.shape == (2, 4) and all(w.is_alive() for w in workers)

    # The env's own exception in a worker (CartPole asserts its action is valid).
    with (
        pytest.raises(HostEnvError, match=r"step raised AssertionError: np.int64\(5\).*invalid"),
        host_errors(),
    ):
        jax.block_until_ready(step(state, jnp.full(2, 5, jnp.int32), make_key(0)))

    # A worker killed outright: reported with its signal, within seconds, never a hang.
    with host_errors():
        state, _ = jax.block_until_ready(reset(make_key(1)))
    os.kill(pools[-1].env.processes[1].pid, signal.SIGKILL)
    pools[-1].env.processes[1].join(10)
    t0 = time.perf_counter()
    with (
        pytest.raises(HostEnvError, match=r"async worker 1 died during step \(killed by SIGKILL\)"),
        host_errors(),
    ):
        jax.block_until_ready(step(state, jnp.zeros(2, jnp.int32), make_key(0)))
    assert time.perf_counter() - t0 < 10
    env.close()
    assert all(not p.is_alive() for pool in pools for p in pool.env.processes)


@pytest.mark.timeout(60)
def test_an_env_error_is_named_even_when_its_worker_has_already_exited():
    """A worker exits right after relaying its env's exception; read after it has gone, the
    failure is still the env's, not a death (a race the test above once lost)."""
    warning_filters = os.environ.get("PYTHONWARNINGS")
    pool = GymnasiumPool(
        [functools.partial(gymnasium.make, "CartPole-v1")] * 2, "async", name="gym/CartPole-v1"
    )
    assert os.environ.get("PYTHONWARNINGS") == warning_filters  # given back once started
    try:
        for pipe in pool.env.parent_pipes:
            pipe.close()  # each worker's next read fails, and it exits
        for process in pool.env.processes:
            process.join(10)
        codes = [p.exitcode for p in pool.env.processes]
        assert None not in codes
        relayed = AssertionError("np.int64(5) (<class 'numpy.int64'>) invalid")
        assert pool._failure("step", relayed) == (
            "gym/CartPole-v1: step raised AssertionError: np.int64(5) (<class 'numpy.int64'>) "
            "invalid"
        )
        assert pool._failure("step", EOFError()) == (
            f"gym/CartPole-v1: async worker 0 died during step (exit code {codes[0]})"
        )
    finally:
        pool.close()


def test_spaces_and_caps_come_from_gymnasium():
    pendulum = envs.make(EnvConfig(id="gym/Pendulum-v1"), 2)
    assert pendulum.spec.max_episode_steps == 200
    assert pendulum.spec.action_space.shape == (1,) and pendulum.spec.action_space.high[0] == 2.0
    frozen = make_gymnasium(HostEnvConfig(id="gym/FrozenLake-v1"), 1)  # Discrete obs: one-hot
    assert frozen.spec.observation_space.shape == (16,)
    _, ts = jax.jit(frozen.reset)(make_key(0))
    np.testing.assert_array_equal(ts.obs, np.eye(16, dtype=np.float32)[[0]])
    with pytest.raises(ConfigError, match="Blackjack-v1': observation space Tuple"):
        envs.make(EnvConfig(id="gym/Blackjack-v1"))
    with pytest.raises(ConfigError, match="Did you mean: `CartPole`"):
        envs.make(EnvConfig(id="gym/CartPol-v1"))


def test_cli_names_gym_ids_on_the_fly_and_validates_them():
    cfg = compose(["agent=ppo", "env=gym/Acrobot-v1", "env.pool=async", "env.num_envs=3"])
    assert isinstance(cfg.env, HostEnvConfig) and (cfg.env.pool, cfg.env.num_envs) == ("async", 3)
    with pytest.raises(ConfigError, match=r"unknown env 'gym/Acrobat-v1'.*Did you mean: `Acrobot`"):
        compose(["agent=ppo", "env=gym/Acrobat-v1"])
    with pytest.raises(
        ConfigError,
        match=r"env\.pool='threads' is not a pool mode of env 'gym/CartPole-v1'; valid: sync, "
        r"async, ray",
    ):
        compose(["agent=ppo", "env=gym/CartPole-v1", "env.pool=threads"])
    with pytest.raises(ConfigError, match=r"did you mean gym/LunarLander-v3\?"):
        compose(["agent=ppo", "env=LunarLander-v3"])
    with pytest.raises(ConfigError, match=r"env\.callback='cuda' is not one of: auto, buffer, io$"):
        compose(["agent=ppo", "env=ALE/Pong-v5", "env.callback=cuda"])


@pytest.mark.timeout(300)
def test_ppo_learns_gym_cartpole_through_the_loop_and_resumes(tmp_path):
    """PPO on gym/CartPole-v1, 4 seeds of 4 envs, 20,480 env steps; a random policy averages ~22.
    Threshold: mean 150, also after resuming for 5,120 more steps, well below the mean measured
    (benchmarks/results/learning_tests.md)."""
    common = (
        "agent=ppo", "env=gym/CartPole-v1", "env.num_envs=4", "num_seeds=4", "eval.every=10",
        *QUIET,
    )  # fmt: skip
    result = jaxrl.train(*common, "budget.env_steps=20480", run_dir=tmp_path)
    assert result.status == "completed"
    assert_mean_at_least(result.summary, 150)
    # Every evaluation reset its pools again: one training pool and one evaluation pool per seed.
    owners = {result.trainer.env._owner, result.trainer.eval_env._owner}
    assert sum(s.owner in owners for s in host._REGISTRY.slots.values()) == 2 * 4
    # Resume with a larger budget: the checkpoint's env state names pools of the first run, so
    # the resumed run must start fresh episodes on pools of its own.
    config = json.loads((tmp_path / "config.json").read_text())
    config["budget"]["env_steps"] = 25600
    (tmp_path / "config.json").write_text(json.dumps(config))
    resumed = jaxrl.train(f"resume={tmp_path}", run_dir=tmp_path)
    assert resumed.status == "completed" and resumed.summary["env_steps"] == 25600
    assert_mean_at_least(resumed.summary, 150)


@pytest.mark.parametrize("pool", ["sync", "async"])
def test_parameterised_gymnasium_actions_are_hybrid_and_reach_the_env(monkeypatch, pool):
    """gym-platform's `Tuple(Discrete(K), Tuple(Box_1..Box_K))` is our Hybrid space, its Boxes
    flattened side by side; a (choice, parameters) batch reaches each env as the nested tuple, in
    workers too. `Tuple(Discrete(K), Box)`: every choice reads the one Box (slices shared)."""
    monkeypatch.syspath_prepend(str(FIXTURES))
    cfg = HostEnvConfig(id="gym/hybrid_envs:EchoParameterised-v0", pool=pool)
    env = envs.make(cfg, 2)
    space = env.spec.action_space
    assert isinstance(space, Hybrid) and space.choices.n == 3
    assert space.slices == ((0, 1), (1, 2), (2, 4)) and env.spec.max_episode_steps == 3
    np.testing.assert_array_equal(space.parameters.low, [0, 0, -1, -1])
    np.testing.assert_array_equal(space.parameters.high, [30, 720, 1, 1])
    parameters = jnp.array([[1.5, 700.0, -0.5, 0.25], [29.0, 3.0, 1.0, -1.0]], jnp.float32)
    state, _ = env.reset(make_key(0))
    state, ts = jax.jit(env.step)(state, (jnp.array([2, 0], jnp.int32), parameters), make_key(1))
    np.testing.assert_array_equal(ts.obs, [[2, *parameters[0]], [0, *parameters[1]]])
    env.close()

    shared = envs.make(dataclasses.replace(cfg, kwargs={"per_choice": False}), 1)
    space = shared.spec.action_space
    assert isinstance(space, Hybrid) and space.slices == ((0, 2),) * 3
    np.testing.assert_array_equal(space.parameters.high, [1, 5])
    state, _ = shared.reset(make_key(0))
    action = (jnp.array([0], jnp.int32), jnp.array([[-0.5, 4.0]], jnp.float32))
    _, ts = jax.jit(shared.step)(state, action, make_key(1))
    np.testing.assert_array_equal(ts.obs, [[1, -0.5, 4.0]])  # Discrete(3, start=1): choice 0 is 1
    shared.close()
