"""JAX-native training programs with JAX's threefry hash in each of its two CPU lowerings: the
rolled loop (XLA:CPU's default, what `jaxrl.loop` keeps for JAX-native envs) and the unrolled
form (`speedups.unrolled_threefry`, what the loop takes for host envs, where it made the bridge
1.8× faster: results/host_bridge_xeon.md). Whether a JAX-native program gains from the unrolled
hash too: PPO and DQN on CartPole-v1 in PureJaxRL's configurations (`common.py`), 1 seed.

Each run is its own process (`--worker`), the two forms alternating, all with the same
persistent compile cache (a first, untimed round fills it): run s leaves the compile out,
compile s is the loop's `compile_seconds` with that cache warm.

    python benchmarks/threefry_forms.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from common import (
    PUREJAXRL_DQN_CARTPOLE,
    PUREJAXRL_PPO_CARTPOLE,
    PUREJAXRL_SETTINGS,
    RESULTS,
    last_json,
    load_note,
    machine,
    markdown_table,
    median_range,
    repo_env,
    run_process,
    write_report,
)

PROGRAMS = {
    "PPO CartPole-v1 500k": [*PUREJAXRL_PPO_CARTPOLE, *PUREJAXRL_SETTINGS],
    "DQN CartPole-v1 500k": PUREJAXRL_DQN_CARTPOLE,
}
FORMS = {"rolled (default)": False, "unrolled": True}


def worker(program: str, unrolled: bool) -> None:
    """Train `program` with the hash in the given form; print its summary's figures as JSON."""
    from jaxrl import parallel, speedups

    parallel.use_cores_as_devices()
    chosen = speedups.unrolled_threefry
    # the loop asks for the unrolled form only for host envs: the form is forced either way
    speedups.unrolled_threefry = lambda wanted=True: chosen(unrolled)
    from jaxrl.cli import compose
    from jaxrl.loop import train

    overrides = [*PROGRAMS[program], "log.progress=false", "log.tensorboard=false"]
    with tempfile.TemporaryDirectory() as run_dir:
        summary = train(compose(overrides), Path(run_dir)).summary
    keys = ("compile_seconds", "run_seconds", "final_eval_return")
    print(json.dumps({key: summary[key] for key in keys}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "threefry_forms.md")
    parser.add_argument(
        "--worker", nargs=2, metavar=("PROGRAM", "UNROLLED"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], args.worker[1] == "1")
        return

    def run(program: str, unrolled: bool) -> dict[str, float]:
        cmd = [sys.executable, __file__, "--worker", program, str(int(unrolled))]
        stdout, _ = run_process(program, cmd, env=repo_env())
        return last_json(stdout)

    before = os.getloadavg()[0]
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    for program in PROGRAMS:
        for unrolled in FORMS.values():
            run(program, unrolled)  # fills the compile cache
        for _ in range(args.repeats):
            for form, unrolled in FORMS.items():
                results.setdefault((program, form), []).append(run(program, unrolled))
                print(program, form, results[program, form][-1], flush=True)
    after = os.getloadavg()[0]

    def median_run(runs: list[dict[str, float]]) -> float:
        return statistics.median(r["run_seconds"] for r in runs)

    rows = []
    for (program, form), runs in results.items():
        default = results[program, next(iter(FORMS))]
        rows.append(
            [
                program,
                form,
                median_range([r["compile_seconds"] for r in runs]),
                median_range([r["run_seconds"] for r in runs]),
                f"{median_run(runs) / median_run(default):.2f}",
                ", ".join(f"{r['final_eval_return']:.1f}" for r in runs),
            ]
        )
    header = ["program", "threefry form", "compile s (warm cache)", "run s", "run × rolled",
              "final eval return per run"]  # fmt: skip
    text = (
        "# JAX-native programs with the threefry hash rolled and unrolled\n\n"
        f"`python benchmarks/threefry_forms.py --repeats {args.repeats}` on {machine()}: one "
        "process per run, the forms alternating, medians with min-max.\n\n"
        + markdown_table(header, rows)
        + "\n\n"
        + load_note(before, after)
        + "\n"
    )
    write_report(text, args.out)


if __name__ == "__main__":
    main()
