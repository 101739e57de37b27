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
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "benchmarks" / "results" / "es_cartpole.md"
TARGET = 475.0


def machine() -> str:
    """CPU model, usable cores and JAX backend, e.g. 'AMD EPYC, 2 cores, jax 0.10.2 cpu'."""
    import jax

    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model}, {cores} cores, jax {jax.__version__} {jax.default_backend()}"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def fmt(x: float | None, digits: int = 1) -> str:
    return "—" if x is None else f"{x:,.{digits}f}"


@dataclass
class Row:
    what: str
    steps_per_s: float
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
    what: str, num_seeds: int, cache_dir: Path, workdir: Path, budget: float, eval_every: int
) -> Row:
    """One training process; its wall time includes Python start-up, imports and Hydra."""
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
        f"hydra.run.dir={workdir / 'hydra'}",
    ]
    env = dict(os.environ, JAXRL_CACHE_DIR=str(cache_dir))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{what}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    summary = json.loads((run_dir / "summary.json").read_text())
    t_target, steps_target = time_to_target(run_dir / "evals.csv", TARGET)
    solved = sum(1 for s in summary["seeds"] if (s["best_eval_return"] or 0) >= TARGET)
    return Row(
        what=what,
        steps_per_s=summary["env_steps_per_second"],
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
    header = [
        "what",
        "env steps/s",
        "compile s",
        "run s",
        f"time to {TARGET:g} s (compile+run)",
        f"env steps to {TARGET:g}",
        "process wall s",
        "final return",
        f"seeds ≥ {TARGET:g}",
        "machine",
    ]
    table = markdown_table(
        header,
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
        f"imports, Hydra, checkpoints and logging. 1-minute load average: "
        f"{load_before:.2f} before, {load_after:.2f} after (other processes share the CPU when "
        f"it is well above 0)."
    )
    text = f"# ES on CartPole-v1\n\n{table}\n\n{notes}\n"
    print()
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
