"""DQN's Rainbow-style options, one at a time and together, on CartPole-v1 at a short budget:
n-step returns (`agent.n_step=3`), dueling heads (`agent.dueling=true`) and prioritised replay
(`agent.prioritized=true`), against the defaults, N seeds in one program per row, the same
seeds in every row; and optionally pixel/CartPole-v1 with all three (`benchmarks/dqn_cartpole.py`'s
`PIXEL` configuration otherwise, each frame stored once).

    python benchmarks/dqn_options.py [--seeds 4] [--steps 30000] [--pixel-steps 0]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from common import RESULTS, load_note, machine, write_report
from dqn_cartpole import PIXEL, Row, markdown, run

OPTIONS = {
    "defaults": [],
    "dueling": ["agent.dueling=true"],
    "3-step": ["agent.n_step=3"],
    "3-step, dueling": ["agent.n_step=3", "agent.dueling=true"],
    "3-step, dueling, prioritised": [
        "agent.n_step=3",
        "agent.dueling=true",
        "agent.prioritized=true",
    ],
}
ALL_THREE = OPTIONS["3-step, dueling, prioritised"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30_000)
    parser.add_argument("--pixel-steps", type=int, default=0, help="0: no pixel CartPole row")
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    rows: list[Row] = []
    base = ["agent=dqn", "env=CartPole-v1", f"budget.env_steps={args.steps}", "eval.every=3"]
    with tempfile.TemporaryDirectory(prefix="jaxrl-bench-dqn-options-") as tmp:
        work = Path(tmp)
        for what, overrides in OPTIONS.items():
            row = run(
                f"DQN CartPole-v1, {what}, {args.steps // 1000}k steps, {args.seeds} seeds",
                [*base, *overrides, f"num_seeds={args.seeds}"],
                work,
            )
            rows.append(row)
            print(markdown([row], ""), flush=True)
        if args.pixel_steps > 0:
            pixel = [o for o in PIXEL if not o.startswith("agent.frame_storage=")]
            what = (
                f"DQN pixel/CartPole-v1, 3-step, dueling, prioritised, {args.pixel_steps:,} steps"
            )
            overrides = [*pixel, *ALL_THREE, "agent.frame_storage=once"]
            rows.append(run(what, [*overrides, f"budget.env_steps={args.pixel_steps}"], work))
    load_after = os.getloadavg()[0]
    text = "\n\n".join(
        [
            "# DQN's options on CartPole-v1",
            f"`python benchmarks/dqn_options.py --seeds {args.seeds} --steps {args.steps} "
            f"--pixel-steps {args.pixel_steps}`",
            markdown(rows, machine()),
            "Returns are means over seeds of 10 deterministic episodes (evaluated every 3 "
            "iterations of 1,024 env steps); the best return is the mean over seeds of each "
            "seed's best evaluation; env steps/s counts all seeds' steps per second of run time, "
            "updates included. " + load_note(load_before, load_after),
        ]
    )
    write_report(text + "\n", RESULTS / "dqn_options.md")


if __name__ == "__main__":
    main()
