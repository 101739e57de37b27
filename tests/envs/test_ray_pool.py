"""`env.pool=ray` (envs/ray_pool.py) against a real Ray cluster on 127.0.0.1 (conftest's
`ray_cluster`): bitwise parity with the sync pool, failures as one HostEnvError, and the CLI.

The parity references are the sync pools of the same families, which test_host.py and
test_atari.py check against Gymnasium and ALE stepped from Python.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import signal
import subprocess
import sys
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cli_helpers import (
    FIXTURES,
    QUICK_PPO,
    RAY_TEST_CPUS,
    TINY_ES,
    cli,
    error_lines,
    pythonpath,
    start,
    wait_for_evals,
)

import envs
from envs import ray_pool
from envs.configs import AtariConfig, HostEnvConfig, RayConfig
from envs.host import HostEnvError, host_errors
from jaxrl.cli import compose
from jaxrl.config import ConfigError
from jaxrl.prng import make_key

POOLS = ("sync", "ray")
CAP = 15  # CartPole episode cap: random play both terminates and truncates within the rollout


def rollout(env, key: jax.Array, actions: jax.Array):
    """reset + a lax.scan of env.step over `actions` [T, n]; returns (first obs, [T] TimeSteps)."""
    state, first = env.reset(key)

    def body(state, action):
        return env.step(state, action, key)

    _, steps = jax.lax.scan(body, state, actions)
    return first.obs, steps


def ray_options(address: str, num_workers: int, **options) -> dict:
    return {"pool": "ray", "ray": RayConfig(address=address, num_workers=num_workers), **options}


def test_a_ray_pool_steps_bitwise_like_the_sync_pool_over_vmapped_seeds(ray_cluster):
    """5 envs on 3 actors (slices of 1, 2 and 2 envs), two vmapped seeds (two pools, overlapped):
    every observation, reward, flag and final observation equals the sync pool's."""
    keys = jnp.stack([make_key(s) for s in (4, 5)])
    actions = np.random.default_rng(2).integers(0, 2, (2, 40, 5)).astype(np.int32)
    results = {}
    for mode, options in (("sync", {}), ("ray", ray_options(ray_cluster, 3))):
        env = envs.make(HostEnvConfig(id="gym/CartPole-v1", max_episode_steps=CAP, **options), 5)
        with host_errors():
            results[mode] = jax.jit(jax.vmap(functools.partial(rollout, env)))(keys, actions)
        env.close()
    jax.tree.map(np.testing.assert_array_equal, results["sync"], results["ray"])
    info = results["ray"][1].info
    assert info["episode_done"].sum() >= 10 and (info["episode_length"] == CAP).any()


def test_atari_games_split_among_actors_replay_the_sync_pool(ray_cluster):
    """Each game's seed is its word of the whole pool's seed state (`env_offset`)."""
    cfg = AtariConfig(id="ALE/Breakout-v5", max_episode_steps=30)
    actions = np.random.default_rng(0).integers(0, 4, (45, 3)).astype(np.int32)
    results = {}
    for mode, options in (("sync", {}), ("ray", ray_options(ray_cluster, 2))):
        env = envs.make(dataclasses.replace(cfg, **options), 3)
        with host_errors():
            results[mode] = jax.jit(functools.partial(rollout, env))(make_key(3), actions)
        env.close()
    jax.tree.map(np.testing.assert_array_equal, results["sync"], results["ray"])
    assert results["ray"][1].truncated.any()  # the cap reset games inside the actors


def test_hybrid_actions_reach_envs_in_actors(ray_cluster, monkeypatch):
    """A (choice, parameters) batch is sliced per actor and reaches each env in its nesting."""
    monkeypatch.syspath_prepend(str(FIXTURES))
    cfg = HostEnvConfig(id="gym/hybrid_envs:EchoParameterised-v0", **ray_options(ray_cluster, 2))
    env = envs.make(cfg, 2)
    parameters = jnp.array([[1.5, 700.0, -0.5, 0.25], [29.0, 3.0, 1.0, -1.0]], jnp.float32)
    with host_errors():
        state, _ = env.reset(make_key(0))
        _, ts = jax.jit(env.step)(state, (jnp.array([2, 0], jnp.int32), parameters), make_key(1))
    np.testing.assert_array_equal(ts.obs, [[2, *parameters[0]], [0, *parameters[1]]])
    env.close()


@pytest.mark.timeout(180)
def test_a_raising_env_a_killed_actor_and_an_unplaceable_pool_fail_in_one_error(ray_cluster):
    # 60 s for Ray's answers: starting actors is slow beside trainings on 2 cores
    # (benchmarks/results/learning_tests.md).
    cfg = HostEnvConfig(id="gym/CartPole-v1", **ray_options(ray_cluster, 2), timeout=60)
    env = envs.make(cfg, 4)
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    with host_errors():
        state, _ = reset(make_key(0))
    # The env's own exception in an actor (CartPole asserts its action is valid).
    with (
        pytest.raises(
            HostEnvError, match=r"step raised AssertionError: 5 \(<class 'int'>\) invalid"
        ),
        host_errors(),
    ):
        jax.block_until_ready(step(state, jnp.full(4, 5, jnp.int32), make_key(0)))

    # An actor killed outright: reported within seconds, and the env's other actor ended.
    with host_errors():
        state, _ = reset(make_key(1))
    workers = env.make_pool.__self__
    os.kill(workers.pids[1], signal.SIGKILL)
    t0 = time.perf_counter()
    with (
        pytest.raises(HostEnvError, match=r"CartPole-v1: Ray worker 1 died during step \("),
        host_errors(),
    ):
        jax.block_until_ready(step(state, jnp.zeros(4, jnp.int32), make_key(0)))
    assert time.perf_counter() - t0 < 10 and workers.actors == []

    # Actors asking more CPUs than the cluster has: reported after env.timeout, never a hang.
    greedy = RayConfig(address=ray_cluster, num_workers=2, cpus_per_worker=RAY_TEST_CPUS + 1)
    t0 = time.perf_counter()
    with pytest.raises(
        HostEnvError,
        match=r"Ray worker 0 gave no answer to starting its workers within 3 s \(env.timeout\); "
        rf"the cluster has {RAY_TEST_CPUS} CPUs and each worker asks "
        rf"env.ray.cpus_per_worker={RAY_TEST_CPUS + 1}",
    ):
        envs.make(dataclasses.replace(cfg, ray=greedy, timeout=3), 2).make_pool(2, 0)
    assert time.perf_counter() - t0 < 15


def test_the_pools_of_one_env_share_its_actors_with_one_call_per_actor_and_step(
    ray_cluster, monkeypatch
):
    """Eight pools of 3 envs (as an ES population's per-member pools) on 2 actors: stepped
    together, each actor gets one remote call per step; closing the last pool ends the actors."""
    env = envs.make(HostEnvConfig(id="gym/CartPole-v1", **ray_options(ray_cluster, 2)), 3)
    workers = env.make_pool.__self__
    pools = [env.make_pool(3, seed) for seed in range(8)]
    assert len(workers.actors) == 2
    for seed, pool in enumerate(pools):
        pool.reset(seed)
    calls = []
    flush = workers.flush
    monkeypatch.setattr(workers, "flush", lambda: (calls.append(len(workers.queued)), flush()))
    for pool in pools:
        pool.step_async(np.zeros(3, np.int64))
    steps = [pool.step_wait() for pool in pools]
    assert calls == [2] and all(step.obs.shape == (3, 4) for step in steps)
    for pool in pools:
        pool.close()
    assert workers.actors == []


def test_closing_a_pool_after_ray_is_shut_down_does_not_join_the_cluster_again(ray_cluster):
    """A pool closed once Ray is shut down (as at exit, when Ray's hook ran first, or by the
    user) makes no Ray call: Ray's auto-init would join the cluster again, and a completed CLI
    run on Ray died of SIGSEGV that way while Python finalised."""
    script = f"""
import jax, ray
import envs
from envs.host import host_errors
from envs.configs import HostEnvConfig, RayConfig
from jaxrl.prng import make_key
env = envs.make(HostEnvConfig(id="gym/CartPole-v1", pool="ray", ray=RayConfig({ray_cluster!r})), 2)
with host_errors():
    state, first = jax.jit(env.reset)(make_key(0))
ray.shutdown()
env.close()
print(first.obs.shape, ray.is_initialized())
"""
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": pythonpath()},
    )
    assert (result.returncode, result.stdout) == (0, "(2, 4) False\n"), result.stderr


@pytest.mark.timeout(60)
def test_joining_a_cluster_waits_for_rays_answer_not_for_env_timeout(monkeypatch):
    """The joining thread lives on by design (a local cluster dies with it): waiting for the
    thread meant waiting out all of env.timeout, a minute at the start of every Ray run."""
    monkeypatch.setenv("RAY_IGNORE_UNHANDLED_ERRORS", "1")
    joined = []
    ray = types.SimpleNamespace(is_initialized=lambda: False, init=lambda **kw: joined.append(kw))
    monkeypatch.setattr(ray_pool, "_ray", lambda: ray)
    ray_pool.connect(RayConfig(address=None), timeout=3600)
    assert [kw["address"] for kw in joined] == [None]

    def refuse(**kw):
        raise RuntimeError("token rejected\nmore detail")

    ray.init = refuse
    with pytest.raises(ConfigError, match=r"^env.ray.address=null: token rejected; is the cluster"):
        ray_pool.connect(RayConfig(address=None), timeout=3600)


def test_ray_options_compose_and_bad_ones_are_refused():
    cfg = compose(["env=gym/Acrobot-v1", "env.pool=ray", "env.ray.num_workers=3"])
    assert (cfg.env.pool, cfg.env.ray.num_workers, cfg.env.ray.address) == ("ray", 3, None)
    cfg = compose(["env=ALE/Pong-v5", "env.pool=ray", "env.ray.cpus_per_worker=1"])
    assert (cfg.env.pool, cfg.env.ray.cpus_per_worker) == ("ray", 1.0)
    with pytest.raises(ConfigError, match=r"env.pool='async' is not a pool mode of env 'ALE/"):
        compose(["env=ALE/Pong-v5", "env.pool=async"])
    with pytest.raises(ConfigError, match=r"env.ray.num_workers=0 must be >= 1"):
        compose(["env=gym/Acrobot-v1", "env.pool=ray", "env.ray.num_workers=0"])


def _summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def _numbers(summary: dict) -> dict:
    """What a run learned and how far it went, per seed (not its timings)."""
    keys = ("final_eval_return", "best_eval_return", "env_steps", "iterations")
    assert all(isinstance(summary[key], float | int) for key in keys), summary
    return {
        **{key: summary[key] for key in keys},
        "runs": [{key: run[key] for key in keys} for run in summary["runs"]],
    }


def test_cli_runs_on_ray_workers_give_the_sync_pools_numbers(ray_cluster, tmp_path):
    """PPO with two seeds (two pools per evaluation and training site) and ES with its population
    on the env batch: the same summaries as with the sync pool, through `python -m jaxrl.run`.
    Each run with a sync pool goes side by side with its twin on Ray (mostly compile and waits)."""
    runs = {
        "ppo": (*QUICK_PPO, "num_seeds=2", "budget.env_steps=1024", "eval.episodes=2"),
        "es": ("agent=es", *TINY_ES, "budget.env_steps=2e3", "eval.episodes=2"),
    }

    def run(agent: str, pool: str) -> dict:
        run_dir = tmp_path / f"{agent}-{pool}"
        result = cli(
            *runs[agent],
            "env=gym/CartPole-v1",
            f"env.pool={pool}",
            f"env.ray.address={ray_cluster}",
            "env.ray.num_workers=2",
            "log.progress=false",
            "log.tensorboard=false",
            f"log.dir={run_dir}",
        )
        assert result.returncode == 0, result.stderr
        return _numbers(_summary(run_dir))

    for agent in runs:
        with ThreadPoolExecutor(2) as side_by_side:
            numbers = side_by_side.map(functools.partial(run, agent), POOLS)
            summaries = dict(zip(POOLS, numbers, strict=True))
        assert summaries["ray"] == summaries["sync"], agent
        assert len(summaries["ray"]["runs"]) == (2 if agent == "ppo" else 1)


def test_sigterm_on_ray_workers_checkpoints_and_exits_143(ray_cluster, tmp_path):
    """Joining Ray binds a native SIGTERM handler (a stack dump, then death: the chunk in flight
    and its checkpoint were lost); the run binds its own again, so SIGTERM stops a run on Ray
    workers as any other: a checkpoint, one line, exit 143."""
    run_dir = tmp_path / "run"
    proc = start(
        "agent=es",
        *TINY_ES,
        "budget.env_steps=1e8",
        "env=gym/CartPole-v1",
        "env.pool=ray",
        f"env.ray.address={ray_cluster}",
        "env.ray.num_workers=2",
        "log.progress=false",
        "log.tensorboard=false",
        f"log.dir={run_dir}",
    )
    wait_for_evals(run_dir, 1, proc)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    summary = _summary(run_dir)
    assert summary["status"] == "interrupted"
    assert error_lines(stderr) == [
        f"stopped by SIGTERM: checkpoint at iteration {summary['iterations']} in "
        f"{run_dir / 'checkpoints'}; continue with resume={run_dir}"
    ]
    assert (run_dir / "checkpoints" / str(summary["iterations"])).is_dir()


@pytest.mark.parametrize(
    ("env_id", "message"),
    [
        (
            "BreaksAtStep-v0",
            "step raised RuntimeError: the pole snapped (step 30)",
        ),
        ("DiesAtStep-v0", "Ray worker 0 died during step ("),
    ],
)
def test_cli_failures_in_actors_are_one_line_and_keep_the_checkpoint(
    ray_cluster, tmp_path, env_id, message
):
    run_dir = tmp_path / "run"
    result = cli(
        *QUICK_PPO,
        f"env=gym/faulty_envs:{env_id}",
        "env.pool=ray",
        f"env.ray.address={ray_cluster}",
        "env.num_envs=2",
        "log.progress=false",
        f"log.dir={run_dir}",
    )
    lines = error_lines(result.stderr)
    assert result.returncode == 1, result.stderr
    assert lines == [lines[0]] and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith(f"error: gym/faulty_envs:{env_id}: {message}"), lines[0]
    assert (run_dir / "checkpoints" / "0").is_dir()


def test_cli_refuses_an_address_where_no_cluster_listens(tmp_path):
    result = cli("env=gym/CartPole-v1", "env.pool=ray", "env.ray.address=127.0.0.1:1")
    assert result.returncode == 2, result.stderr
    assert error_lines(result.stderr) == [
        "error: env.ray.address=127.0.0.1:1: no Ray cluster answers there (Connection refused); "
        "valid: null, auto, local or the HOST:PORT of a running Ray cluster's head"
    ]
