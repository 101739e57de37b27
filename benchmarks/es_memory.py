"""ES memory: a population of 10,000 on a ~1-million-parameter policy in one generation.

The population × parameters noise matrix of that generation would be 10,000 × 1,008,002 float32
= 40.3 GB, more than this machine's memory. jaxrl's ES never builds it: each antithetic pair's
noise is regenerated from (generation key, pair index) in chunks, for the evaluation and again
for the gradient (agents/es.py). This script runs one generation of `agents.es.make_es` on
CartPole-v1 (64→1000→1000→2 tanh MLP: 1,008,002 parameters, 1 episode per member) and reports
its wall time and the process's peak resident memory (`ru_maxrss`).

Each row runs in its own process, so each peak RSS is that configuration's own:

* population 64 and population 10,000, episodes capped at `--short-episode` steps: same network,
  so the difference in peak RSS is what the population costs; the cap bounds the rollout part so
  the full-size generation finishes in minutes on 2 CPU cores;
* population `--full-pop` with whole episodes (up to CartPole's 500 steps): the rollout cost
  per member at full length, to extrapolate from.

    python benchmarks/es_memory.py [--short-episode 10] [--full-pop 1000] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import (
    RESULTS,
    fmt,
    last_json,
    load_note,
    machine,
    markdown_table,
    repo_env,
    write_report,
)

DEFAULT_OUT = RESULTS / "es_memory.md"
HIDDEN = (1000, 1000)


def total_memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return None


def peak_rss_gb() -> float:
    """This process's peak resident set size (Linux reports ru_maxrss in KiB, macOS in bytes)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2**30 if sys.platform == "darwin" else rss / 2**20


def worker(
    population: int, max_episode_steps: int | None, chunk_megabytes: float | None
) -> dict[str, Any]:
    """Build ES and the env directly, compile one generation, run it once."""
    t_start = time.perf_counter()
    import jax

    import envs
    from agents.es import ESConfig, make_es
    from jaxrl.config import EnvConfig
    from jaxrl.prng import make_key

    chunking = {} if chunk_megabytes is None else {"eval_chunk_megabytes": chunk_megabytes}
    cfg = ESConfig(
        population_size=population, hidden_sizes=HIDDEN, episodes_per_member=1, **chunking
    )
    env = envs.make(EnvConfig(id="CartPole-v1", max_episode_steps=max_episode_steps))
    agent = make_es(cfg, env)
    rss_setup = peak_rss_gb()

    t0 = time.perf_counter()
    state = jax.block_until_ready(jax.jit(agent.init)(make_key(0)))
    key = make_key(1)
    generation = jax.jit(agent.train_step).lower(state, None, key).compile()
    compile_s = time.perf_counter() - t0
    rss_compiled = peak_rss_gb()

    t0 = time.perf_counter()
    state, _, metrics = generation(state, None, key)
    metrics = jax.device_get(metrics)
    run_s = time.perf_counter() - t0
    return {
        "params": int(state.theta.size),
        "compile_s": compile_s,
        "run_s": run_s,
        "env_steps": float(metrics["env_steps"]),
        "env_steps_computed": float(metrics["env_steps_computed"]),
        "fitness_mean": float(metrics["fitness_mean"]),
        "fitness_max": float(metrics["fitness_max"]),
        "finite": bool(jax.numpy.isfinite(state.theta).all()),
        "rss_setup_gb": rss_setup,
        "rss_compiled_gb": rss_compiled,
        "peak_rss_gb": peak_rss_gb(),
        "worker_s": time.perf_counter() - t_start,
        "machine": machine(),
    }


def run_row(
    population: int, max_episode_steps: int | None, chunk_megabytes: float | None, timeout_s: float
) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--worker", f"--population={population}"]
    if max_episode_steps is not None:
        cmd.append(f"--max-episode-steps={max_episode_steps}")
    if chunk_megabytes is not None:
        cmd.append(f"--chunk-megabytes={chunk_megabytes:g}")
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=repo_env(), timeout=timeout_s)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(
            f"population {population}: exit {proc.returncode} (-9: killed, likely out of "
            f"memory)\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
        )
    result = last_json(proc.stdout)
    result.update(wall_s=wall, population=population, max_episode_steps=max_episode_steps)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--population", type=int, default=10_000)
    parser.add_argument("--short-episode", type=int, default=10, help="episode cap, big rows")
    parser.add_argument("--full-pop", type=int, default=1000, help="population, whole episodes")
    parser.add_argument(
        "--big-chunk",
        type=float,
        default=256.0,
        help="agent.eval_chunk_megabytes of the last row (default 16: one pair per chunk here)",
    )
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per row")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--max-episode-steps", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--chunk-megabytes", type=float, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.population, args.max_episode_steps, args.chunk_megabytes)))
        return

    load_before = os.getloadavg()[0]
    plan = [  # (population, episode cap, chunk_megabytes; None = the default)
        (64, args.short_episode, None),
        (args.population, args.short_episode, None),
        (args.full_pop, None, None),
        (args.full_pop, None, args.big_chunk),
    ]
    results = []
    for population, cap, chunk in plan:
        what = f"pop {population:,}, episodes ≤ {cap or 500} steps"
        if chunk is not None:
            what += f", agent.eval_chunk_megabytes={chunk:g}"
        print(f"running: {what} ...", flush=True)
        results.append((what, run_row(population, cap, chunk, args.timeout)))
    load_after = os.getloadavg()[0]

    header = [
        "what",
        "params",
        "noise matrix if materialised GB",
        "env steps/s",
        "compile s",
        "run s (1 generation)",
        "process wall s",
        "peak RSS GB",
        "final return (population mean)",
        "machine",
    ]
    rows = [
        [
            what,
            f"{r['params']:,}",
            fmt(r["population"] * r["params"] * 4 / 1e9, 2),
            fmt(r["env_steps"] / r["run_s"], 0),
            f"{r['compile_s']:.1f}",
            f"{r['run_s']:.1f}",
            f"{r['wall_s']:.1f}",
            f"{r['peak_rss_gb']:.2f}",
            f"{r['fitness_mean']:.1f}",
            r["machine"],
        ]
        for what, r in results
    ]
    mem = total_memory_gb()
    detail = "\n".join(
        f"- {what}: {r['env_steps']:,.0f} env steps in episodes, {r['env_steps_computed']:,.0f} "
        f"computed (a batch steps until its longest episode ends); fitness max "
        f"{r['fitness_max']:.0f}; peak RSS after setup {r['rss_setup_gb']:.2f} GB, after "
        f"compile {r['rss_compiled_gb']:.2f} GB; parameters finite: {r['finite']}"
        for what, r in results
    )
    notes = (
        f"One ES generation (`agents.es.make_es`, default chunk sizes unless said) on "
        f"CartPole-v1 with a {'-'.join(map(str, HIDDEN))} tanh MLP and 1 episode per member. "
        f"'noise matrix if materialised' is population × params × 4 bytes; machine memory "
        f"{mem:.1f} GB. Peak RSS is the whole process's (Python, JAX, XLA compile included). "
        f"{load_note(load_before, load_after)}\n\n{detail}"
        if mem is not None
        else detail
    )
    text = (
        f"# ES memory: population × ~1M parameters\n\n{markdown_table(header, rows)}\n\n{notes}\n"
    )
    write_report(text, args.out)


if __name__ == "__main__":
    main()
