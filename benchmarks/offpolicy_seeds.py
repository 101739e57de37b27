"""Several seeds of an off-policy agent in one vmapped program: seconds per 1,000 env steps in
the random warm-up and in learning, this checkout against a baseline git revision.

Under vmap a `lax.cond` on a batched predicate is a select that computes both branches, so a
multi-seed run used to compute (and discard) an update on every warm-up step and TD3's actor
step on every update. `jaxrl.parallel.every_run`/`cond_over_runs` keep those branches.

Each side runs in its own process (the baseline from a `git worktree` of `--baseline`), the
sides alternating `--repeats` times; a process builds `jaxrl.loop.Trainer`, compiles its chunk
of one iteration (`ITERATION_STEPS` env steps), runs one untimed and times `--chunks` chunks,
once with `learning_starts` beyond them (warm-up) and once with learning after the first. The
table gives the median of the per-chunk medians, per 1,000 env steps, and the median compile
seconds.

    python benchmarks/offpolicy_seeds.py [--baseline b6dffc3] [--repeats 2] [--chunks 2]
        [--cases "TD3, Pendulum-v1, 5 seeds" "HyAR, Hard Move n=8, 5 seeds"]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import (
    REPO,
    RESULTS,
    last_json,
    load_note,
    machine,
    markdown_table,
    run_process,
    write_report,
)

CASES = {
    "TD3, Pendulum-v1, 5 seeds": ["agent=td3", "env=Pendulum-v1", "num_seeds=5"],
    "HyAR, Hard Move n=8, 5 seeds": [
        "agent=hyar",
        "env=HardMove-v0",
        "+env.kwargs.num_actuators=8",
        "num_seeds=5",
        # its VAE pre-training when the warm-up ends: a few steps keep the first learning chunk
        # comparable (the warm-up phase never reaches it)
        "agent.vae_pretrain_steps=10",
    ],
}
ITERATION_STEPS = 250  # env steps per chunk: short chunks keep the baseline's warm-up affordable
PHASES = {
    "warm-up": ["agent.learning_starts=100000", "agent.buffer_size=100000"],
    "learning": [f"agent.learning_starts={ITERATION_STEPS}"],
}

WORKER = """
import inspect, json, statistics, sys, time
import jax, jax.numpy as jnp
from jaxrl.cli import compose
from jaxrl.loop import Trainer

trainer = Trainer(compose(sys.argv[2:]))
carry = trainer.init(trainer.run_keys(), trainer.hyper)
# (iterations, evaluate); a baseline from before the chunk took `evaluate` always evaluates
one = (jnp.asarray(1, jnp.int32),)
if "evaluate" in inspect.signature(Trainer._chunk).parameters:
    one += (jnp.asarray(True),)
start = time.perf_counter()
# Compiled once for the carry's shapes, as the training loop does (a jit call would compile
# again for the weak types a chunk's output carries).
chunk = trainer.chunk.lower(carry, trainer.hyper, *one).compile()
compile_s = time.perf_counter() - start
carry, _ = chunk(carry, trainer.hyper, *one)  # untimed: the learning phase's warm-up
times = []
for _ in range(int(sys.argv[1])):
    start = time.perf_counter()
    carry, _ = chunk(carry, trainer.hyper, *one)
    jax.block_until_ready(carry)
    times.append(time.perf_counter() - start)
print(json.dumps({"compile": compile_s, "median": statistics.median(times)}))
"""


def measure(checkout: Path, overrides: list[str], chunks: int) -> dict[str, float]:
    """One worker process importing jaxrl from `checkout`."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    out, _ = run_process(
        " ".join(overrides),
        [
            sys.executable,
            "-c",
            WORKER,
            str(chunks),
            *overrides,
            f"agent.iteration_steps={ITERATION_STEPS}",
            "eval.episodes=10",
        ],
        cwd=tempfile.gettempdir(),
        env=env,
    )
    return last_json(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="b6dffc3", help="git revision to compare against")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--chunks", type=int, default=2)
    parser.add_argument("--cases", nargs="*", default=list(CASES), help="case names to run")
    parser.add_argument("--out", type=Path, default=RESULTS / "offpolicy_seeds.md")
    args = parser.parse_args()
    unknown = sorted(set(args.cases) - set(CASES))
    if unknown:
        parser.error(f"unknown cases {unknown}; valid: {sorted(CASES)}")
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        baseline = Path(tmp) / "baseline"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-q", str(baseline), args.baseline],
            cwd=REPO,
            check=True,
        )
        try:
            rows = []
            for case in args.cases:
                overrides = CASES[case]
                for phase, settings in PHASES.items():
                    cmd = [*overrides, *settings]
                    seen: dict[str, list[dict[str, float]]] = {"baseline": [], "this": []}
                    for _ in range(args.repeats):
                        for side, checkout in (("baseline", baseline), ("this", REPO)):
                            seen[side].append(measure(checkout, cmd, args.chunks))
                            print(case, phase, side, seen[side][-1], flush=True)
                    median = {
                        side: statistics.median(r["median"] for r in runs) * 1000 / ITERATION_STEPS
                        for side, runs in seen.items()
                    }
                    compile_s = {
                        side: statistics.median(r["compile"] for r in runs)
                        for side, runs in seen.items()
                    }
                    rows.append(
                        [
                            case,
                            phase,
                            f"{median['baseline']:.2f}",
                            f"{median['this']:.2f}",
                            f"{median['baseline'] / median['this']:.1f}×",
                            f"{compile_s['baseline']:.1f} / {compile_s['this']:.1f}",
                        ]
                    )
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(baseline)], cwd=REPO, check=False
            )
    header = [
        "case",
        "phase",
        f"s per 1,000 env steps, {args.baseline}",
        "s per 1,000 env steps, this",
        "speed-up",
        "compile s, baseline / this",
    ]
    text = "\n\n".join(
        [
            "# Off-policy seeds in one vmapped program: warm-up and learning",
            f"`python benchmarks/offpolicy_seeds.py --baseline {args.baseline} --repeats "
            f"{args.repeats} --chunks {args.chunks}` (module docstring). Machine: {machine()}; "
            f"{load_note(load_before, os.getloadavg()[0])} Measured "
            f"{time.strftime('%Y-%m-%d')}.",
            markdown_table(header, rows),
        ]
    )
    write_report(text + "\n", args.out)
    print(json.dumps({"rows": rows}))


if __name__ == "__main__":
    main()
