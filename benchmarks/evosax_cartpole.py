"""Reference point for benchmarks/es_cartpole.py: evosax's OpenAI-ES on gymnax CartPole-v1.

evosax is NOT a jaxrl dependency; this script needs `pip install evosax` (written against the
evosax >= 0.2 API, measured with 0.3.2) and skips, exit status 0, when it is missing.

The same problem as the jaxrl benchmark: population 64 (antithetic), sigma 0.02, Adam lr 0.02,
centered-rank fitness shaping, a 64-64 tanh MLP with argmax actions, 5 episodes per member,
observation normalisation (evosax's own), and after every generation an evaluation of the mean
parameters over 10 episodes. One generation plus its evaluation is one jitted function (the
fastest way to drive evosax from Python, and what jaxrl's chunk does); its compile is measured
apart with `.lower().compile()`. Each row is a separate process, as in the jaxrl benchmark, so
the process wall time includes Python start-up and imports.

    python benchmarks/evosax_cartpole.py [--budget 2e6] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
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
    run_process,
    time_to_target_header,
    write_report,
)

DEFAULT_OUT = RESULTS / "evosax_cartpole.md"
TARGET = 475.0
POPULATION = 64
EPISODES_PER_MEMBER = 5
EVAL_EPISODES = 10
SIGMA = 0.02
LEARNING_RATE = 0.02
HIDDEN = (64, 64)
MAX_STEPS = 500


def evosax_version() -> str | None:
    """The installed evosax version, or None when it is not installed."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("evosax")
    except PackageNotFoundError:
        return None


def evosax_or_skip(what: str) -> str | None:
    """The installed evosax version; when it is missing, None after saying that `what` is
    skipped."""
    version = evosax_version()
    if version is None:
        print("evosax is not installed (it is not a jaxrl dependency): `pip install evosax` to run")
        print(f"{what}. Skipped.")
    return version


def worker(
    num_seeds: int, budget: float, seed: int, cache_dir: str | None, until_solved: bool
) -> dict[str, Any]:
    """Train `num_seeds` seeds (vmapped, one compiled program) until `budget` env steps per seed
    (or, `until_solved`, until the evaluation's mean over seeds reaches TARGET, as jaxrl's
    `budget.target_return` stops); returns timings and the evaluation curve. `cache_dir`: XLA's
    persistent cache with jaxrl's settings (`jaxrl.cli.enable_compilation_cache`), so both sides
    start from the same kind of cache."""
    import jax

    if cache_dir is not None:
        jax.config.update("jax_compilation_cache_dir", cache_dir)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    import jax.numpy as jnp
    import optax
    from evosax.algorithms import Open_ES
    from evosax.core.fitness_shaping import centered_rank_fitness_shaping_fn
    from evosax.problems import MLP, GymnaxProblem

    def argmax_output(x: jax.Array, key: jax.Array | None = None) -> jax.Array:
        return jnp.argmax(x, axis=-1)

    net = MLP(layer_sizes=(*HIDDEN, 2), activation=jax.nn.tanh, output_fn=argmax_output)
    train_problem = GymnaxProblem(
        "CartPole-v1", net, episode_length=MAX_STEPS, num_rollouts=EPISODES_PER_MEMBER
    )
    eval_problem = GymnaxProblem(
        "CartPole-v1", net, episode_length=MAX_STEPS, num_rollouts=EVAL_EPISODES
    )
    template = train_problem.sample(jax.random.key(0))
    es = Open_ES(
        population_size=POPULATION,
        solution=template,
        use_antithetic_sampling=True,
        optimizer=optax.adam(LEARNING_RATE),
        std_schedule=optax.constant_schedule(SIGMA),
        fitness_shaping_fn=centered_rank_fitness_shaping_fn,
    )
    params = es.default_params

    def init(key: jax.Array):
        k_sol, k_es, k_prob, k_loop = jax.random.split(key, 4)
        solution = train_problem.sample(k_sol)
        return es.init(k_es, solution, params), train_problem.init(k_prob), k_loop

    def chunk(carry):
        """One generation and one evaluation of the mean parameters."""
        es_state, prob_state, key = carry
        key, k_ask, k_eval, k_tell, k_test = jax.random.split(key, 5)
        population, es_state = es.ask(k_ask, es_state, params)
        returns, prob_state, _ = train_problem.eval(k_eval, population, prob_state)
        # evosax minimises; CartPole's reward is 1 per step, so summed returns are env steps.
        es_state, _ = es.tell(k_tell, population, -returns, es_state, params)
        mean = jax.tree.map(lambda x: x[None], es.get_mean(es_state))
        test_returns, _, _ = eval_problem.eval(k_test, mean, prob_state)
        env_steps = returns.sum() * EPISODES_PER_MEMBER
        return (es_state, prob_state, key), (env_steps, test_returns[0])

    keys = jnp.stack([jax.random.key_data(jax.random.key(seed + i)) for i in range(num_seeds)])
    t0 = time.perf_counter()
    init_fn = jax.jit(jax.vmap(lambda k: init(jax.random.wrap_key_data(k))))
    carry = jax.block_until_ready(init_fn(keys))
    compiled = jax.jit(jax.vmap(chunk)).lower(carry).compile()
    compile_s = time.perf_counter() - t0

    run_s, steps, curve = 0.0, 0.0, []
    while steps < budget:
        t = time.perf_counter()
        carry, (env_steps, eval_return) = compiled(carry)
        env_steps, eval_return = jax.device_get((env_steps, eval_return))
        run_s += time.perf_counter() - t
        steps += float(env_steps.mean())
        curve.append(
            {
                "env_steps": steps,
                "eval_return": float(eval_return.mean()),
                "elapsed_seconds": compile_s + run_s,
                "per_seed": [float(x) for x in eval_return],
            }
        )
        if until_solved and curve[-1]["eval_return"] >= TARGET:
            break
    return {
        "compile_s": compile_s,
        "run_s": run_s,
        "env_steps_per_s": steps * num_seeds / run_s,
        "curve": curve,
        "machine": machine(),
    }


def run_worker(
    what: str,
    num_seeds: int,
    budget: float,
    seed: int,
    cache_dir: Path | None = None,
    until_solved: bool = False,
) -> tuple[dict[str, Any], float]:
    """One worker process (this script, `--worker`): its result and its wall seconds."""
    cmd = [sys.executable, __file__, "--worker", f"--num-seeds={num_seeds}"]
    cmd += [f"--budget={budget:g}", f"--seed={seed}"]
    if cache_dir is not None:
        cmd.append(f"--cache-dir={cache_dir}")
    if until_solved:
        cmd.append("--until-solved")
    stdout, wall = run_process(what, cmd)
    return last_json(stdout), wall


def run_row(what: str, num_seeds: int, budget: float, seed: int) -> list[str]:
    """One worker process; the row of the table."""
    result, wall = run_worker(what, num_seeds, budget, seed)
    curve = result["curve"]
    hit = next((c for c in curve if c["eval_return"] >= TARGET), None)
    best = [max(c["per_seed"][i] for c in curve) for i in range(num_seeds)]
    return [
        what,
        fmt(result["env_steps_per_s"], 0),
        fmt(result["compile_s"]),
        fmt(result["run_s"]),
        fmt(hit and hit["elapsed_seconds"]),
        fmt(hit and hit["env_steps"], 0),
        fmt(wall),
        fmt(curve[-1]["eval_return"]),
        f"{sum(b >= TARGET for b in best)}/{num_seeds}",
        result["machine"],
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=float, default=2e6, help="env steps per seed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--num-seeds", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--until-solved", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    version = evosax_or_skip("this reference benchmark")
    if version is None:
        return
    if args.worker:
        result = worker(args.num_seeds, args.budget, args.seed, args.cache_dir, args.until_solved)
        print(json.dumps(result))
        return
    if int(version.split(".")[0]) == 0 and int(version.split(".")[1]) < 2:
        print(f"evosax {version} predates the 0.2 API this script uses; pip install -U evosax")
        return

    load_before = os.getloadavg()[0]
    rows = []
    for what, seeds in [("evosax OpenES, 1 seed", 1), ("evosax OpenES, 8 seeds (vmap)", 8)]:
        print(f"running: {what} ...", flush=True)
        rows.append(run_row(what, seeds, args.budget, args.seed))
    load_after = os.getloadavg()[0]

    header = time_to_target_header(TARGET)
    notes = (
        f"evosax {version} `Open_ES` on gymnax CartPole-v1: population {POPULATION} "
        f"(antithetic), sigma {SIGMA}, Adam lr {LEARNING_RATE}, centered ranks, "
        f"{'-'.join(map(str, HIDDEN))} tanh MLP with argmax actions, {EPISODES_PER_MEMBER} "
        f"episodes per member, evaluation of the mean over {EVAL_EPISODES} episodes after every "
        f"generation; budget {args.budget:g} env steps per seed. Env steps count steps inside "
        f"episodes (evosax's rollouts always compute all {MAX_STEPS} steps, jaxrl's stop when "
        f"every episode of a batch has ended). 'time to {TARGET:g}' is compile + run seconds at "
        f"the first evaluation whose return, averaged over seeds, reached {TARGET:g}; 'process "
        f"wall' adds Python start-up and imports. {load_note(load_before, load_after)}"
    )
    text = (
        f"# evosax OpenES on CartPole-v1 (reference)\n\n{markdown_table(header, rows)}\n\n{notes}\n"
    )
    write_report(text, args.out)


if __name__ == "__main__":
    main()
