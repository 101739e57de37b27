"""ES on CartPole-v1 through the CLI: speed, compile time and time to solve.

Rows (each a separate `python -m jaxrl.run` process, defaults: population 64, 64-64 tanh MLP,
5 episodes per member):

* 1 seed, cold compile: a fresh, empty XLA persistent cache (`JAXRL_CACHE_DIR`);
* 8 seeds (`num_seeds=8`, one compiled program vmapped over seeds), cold compile;
* 1 seed again, warm compile: the cache the first row filled.

Per row: env steps/s, compile s and run s (summary.json), the time until the evaluation return
(mean over seeds) first reaches the target (compile + run seconds, evals.csv `elapsed_seconds`),
the env steps it took, the whole process's wall time, the final return and the machine.

    python benchmarks/es_cartpole.py [--budget 2e6] [--eval-every 1] [--out PATH]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from common import (
    RESULTS,
    fmt,
    load_note,
    machine,
    markdown_table,
    repo_env,
    run_process,
    time_to_target_header,
    write_report,
)

DEFAULT_OUT = RESULTS / "es_cartpole.md"
TARGET = 475.0


@dataclass
class Row:
    what: str
    steps_per_s: float
    computed_steps_per_s: float  # steps the batched loop ran, thrown-away ones included
    compile_s: float
    run_s: float
    time_to_target_s: float | None
    steps_to_target: float | None
    wall_s: float
    final_return: float
    seeds_solved: str


def time_to_target(evals_csv: Path, target: float) -> tuple[float | None, float | None]:
    """(elapsed seconds, mean env steps) at the first evaluation whose return, averaged over
    seeds, reaches `target`; (None, None) if none did."""
    by_iteration: dict[int, list[dict[str, str]]] = {}
    with evals_csv.open() as f:
        for r in csv.DictReader(f):
            by_iteration.setdefault(int(r["iteration"]), []).append(r)
    for iteration in sorted(by_iteration):
        rows = by_iteration[iteration]
        if sum(float(r["eval_return"]) for r in rows) / len(rows) >= target:
            steps = sum(float(r["env_steps"]) for r in rows) / len(rows)
            return float(rows[0]["elapsed_seconds"]), steps
    return None, None


def run_cli(
    what: str,
    num_seeds: int,
    cache_dir: Path,
    workdir: Path,
    budget: float,
    eval_every: int,
    extra: Sequence[str] = (),
) -> Row:
    """One training process (`extra`: more overrides); its wall time includes Python start-up,
    imports and Hydra."""
    run_dir = workdir / "".join(c if c.isalnum() else "_" for c in what)  # Hydra-safe
    cmd = [
        sys.executable,
        "-m",
        "jaxrl.run",
        "agent=es",
        "env=CartPole-v1",
        f"num_seeds={num_seeds}",
        f"budget.env_steps={budget:g}",
        f"eval.every={eval_every}",
        "log.progress=false",
        f"log.dir={run_dir}",
        *extra,
    ]
    env = repo_env(JAXRL_CACHE_DIR=str(cache_dir))
    _, wall = run_process(what, cmd, cwd=workdir, env=env)
    summary = json.loads((run_dir / "summary.json").read_text())
    t_target, steps_target = time_to_target(run_dir / "evals.csv", TARGET)
    solved = sum(1 for s in summary["runs"] if (s["best_eval_return"] or 0) >= TARGET)
    return Row(
        what=what,
        steps_per_s=summary["env_steps_per_second"],
        computed_steps_per_s=summary["env_steps_computed"] / summary["run_seconds"],
        compile_s=summary["compile_seconds"],
        run_s=summary["run_seconds"],
        time_to_target_s=t_target,
        steps_to_target=steps_target,
        wall_s=wall,
        final_return=summary["final_eval_return"],
        seeds_solved=f"{solved}/{num_seeds}",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=float, default=2e6, help="env steps per seed")
    parser.add_argument("--eval-every", type=int, default=1, help="generations per evaluation")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="jaxrl-bench-es-") as tmp:
        tmp_path = Path(tmp)
        plan = [  # (what, seeds, cache dir)
            ("1 seed, cold compile", 1, tmp_path / "cache_1seed"),
            ("8 seeds (vmap), cold compile", 8, tmp_path / "cache_8seeds"),
            ("1 seed, warm compile (cache reused)", 1, tmp_path / "cache_1seed"),
        ]
        for what, seeds, cache in plan:
            print(f"running: {what} ...", flush=True)
            rows.append(run_cli(what, seeds, cache, tmp_path, args.budget, args.eval_every))
    load_after = os.getloadavg()[0]

    where = machine()
    table = markdown_table(
        time_to_target_header(TARGET),
        [
            [
                r.what,
                fmt(r.steps_per_s, 0),
                fmt(r.compile_s),
                fmt(r.run_s),
                fmt(r.time_to_target_s),
                fmt(r.steps_to_target, 0),
                fmt(r.wall_s),
                fmt(r.final_return),
                r.seeds_solved,
                where,
            ]
            for r in rows
        ],
    )
    notes = (
        f"ES (population 64, sigma 0.02, Adam lr 0.02, 5 episodes per member, 64-64 tanh MLP) on "
        f"CartPole-v1, budget {args.budget:g} env steps per seed, evaluation (10 episodes) every "
        f"{args.eval_every} generation(s). Env steps count steps inside episodes, summed over "
        f"seeds. 'time to {TARGET:g}' is compile + run seconds at the first evaluation whose "
        f"return, averaged over seeds, reached {TARGET:g}; 'process wall' adds Python start-up, "
        f"imports, Hydra, checkpoints and logging. {load_note(load_before, load_after)}"
    )
    write_report(f"# ES on CartPole-v1\n\n{table}\n\n{notes}\n", args.out)


if __name__ == "__main__":
    main()
