"""Several runs of one program on a CPU: spread over the cores, one device each, against all
runs on XLA's one CPU device (what every jaxrl run did before `parallel.use_cores_as_devices`).

Each row is one CLI run of several seeds, run both ways in separate processes, alternating:
the default (one XLA:CPU device per core, the runs spread over them in equal shares) and
`XLA_FLAGS=--xla_force_host_platform_device_count=1` (one device for every run: XLA spreads
each operation over the cores instead). Printed per row: compile s, median run s (min-max),
the ratio of medians, and the mean final eval return over the seeds.

    python benchmarks/runs_over_cores.py [--repeats 2] [--rows dqn ppo] [--out PATH]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from common import (
    PUREJAXRL_DQN_CARTPOLE,
    PUREJAXRL_PPO_CARTPOLE,
    PUREJAXRL_SETTINGS,
    RESULTS,
    finished_cli_run,
    machine,
    markdown_table,
    median_range,
    repo_env,
    write_report,
)

ONE_DEVICE = "--xla_force_host_platform_device_count=1"
QUIET = ["log.progress=false", "log.tensorboard=false"]
ROWS = {
    "dqn": (
        "DQN CartPole-v1, PureJaxRL's dqn.py config, 4 seeds x 500k",
        [*PUREJAXRL_DQN_CARTPOLE, "num_seeds=4"],
    ),
    "dqn3": (
        "DQN CartPole-v1, PureJaxRL's dqn.py config, 3 seeds x 500k (padded to 4 over 2 cores)",
        [*PUREJAXRL_DQN_CARTPOLE, "num_seeds=3"],
    ),
    "ppo": (
        "PPO CartPole-v1, PureJaxRL's ppo.py config, 4 seeds x 500k",
        [*PUREJAXRL_PPO_CARTPOLE, *PUREJAXRL_SETTINGS, "budget.env_steps=500000", "num_seeds=4"],
    ),
    "sac": (
        "SAC Pendulum-v1, defaults (256-256, one update per step), 2 seeds x 20k",
        ["agent=sac", "env=Pendulum-v1", "budget.env_steps=20000", "num_seeds=2"],
    ),
    "es": (
        "ES CartPole-v1, defaults, 4 seeds",
        ["agent=es", "env=CartPole-v1", "num_seeds=4"],
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--rows", nargs="*", default=list(ROWS), choices=list(ROWS))
    parser.add_argument("--out", type=Path, default=RESULTS / "runs_over_cores.md")
    args = parser.parse_args()

    sides = {"spread over the cores (default)": repo_env(), "one device": repo_env()}
    sides["one device"]["XLA_FLAGS"] = f"{sides['one device'].get('XLA_FLAGS', '')} {ONE_DEVICE}"
    table = []
    with tempfile.TemporaryDirectory(prefix="jaxrl-bench-cores-") as tmp:
        for row in args.rows:
            what, overrides = ROWS[row]
            runs: dict[str, list[dict]] = {side: [] for side in sides}
            for _ in range(args.repeats):
                for side, env in sides.items():
                    run_dir = Path(tmp) / f"{row}-{len(runs[side])}-{side.split()[0]}"
                    cmd = [*overrides, *QUIET, f"log.dir={run_dir}"]
                    runs[side].append(finished_cli_run(f"{what}, {side}", cmd, run_dir, env))
                    s = runs[side][-1]
                    print(f"  {side}: run {s['run_seconds']:.2f} s", flush=True)
            medians = {s: statistics.median(r["run_seconds"] for r in runs[s]) for s in sides}
            for side in sides:
                summaries = runs[side]
                table.append(
                    [
                        what,
                        side,
                        ", ".join(summaries[0]["devices"]),
                        f"{statistics.median(s['compile_seconds'] for s in summaries):.1f}",
                        median_range([s["run_seconds"] for s in summaries], 2),
                        f"{medians['one device'] / medians[side]:.2f}x",
                        f"{summaries[0]['final_eval_return']:.1f}",
                    ]
                )
    header = [
        "program",
        "runs",
        "devices",
        "compile s",
        "run s, median (min-max)",
        "speed-up over one device",
        "final eval return, mean of seeds (first repeat)",
    ]
    text = (
        "# Several runs of one program: spread over the cores, or on one CPU device\n\n"
        f"Machine: {machine()}. Command: `python benchmarks/runs_over_cores.py "
        f"--repeats {args.repeats} --rows {' '.join(args.rows)}`. Each row is the CLI with "
        f"the overrides in `benchmarks/runs_over_cores.py`, {args.repeats} runs per side in "
        "separate processes, alternating; the one-device side is "
        f"`XLA_FLAGS={ONE_DEVICE}`.\n\n{markdown_table(header, table)}\n"
    )
    write_report(text, args.out)


if __name__ == "__main__":
    main()
