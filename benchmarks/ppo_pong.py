"""PPO on ALE/Pong-v5 at CleanRL's budget, through the CLI with the `atari` preset: a long run
that is trained in pieces (Ctrl-C or SIGTERM writes a checkpoint, `resume=` goes on) and reported
by this script from its run directory, curve and all.

    python -m jaxrl.run agent=ppo env=ALE/Pong-v5 budget.env_steps=1e7 eval.every=100 \\
        eval.episodes=8 hydra.run.dir=RUN_DIR          # first piece
    python -m jaxrl.run resume=RUN_DIR                 # every later piece
    python benchmarks/ppo_pong.py --run-dir RUN_DIR [--out PATH]

The curve: the mean return of the training episodes that ended in each iteration (what CleanRL's
`charts/episodic_return` logs; only where the run logged to TensorBoard), smoothed over 20
iterations, and the run's greedy evaluations (its `eval.episodes` games each). CleanRL's
reference (vwxyzjn/cleanrl docs/rl-algorithms/ppo.md, commit 7a96de2, `ppo_atari.py` table):
20.36 ± 0.20 on PongNoFrameskip-v4 after 10M env steps, the same settings (its v4 env has no
sticky actions; ours is v5 with 0.25).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from common import (
    RESULTS,
    evaluations_table,
    logged_training_returns,
    machine,
    plot_run_curve,
    write_report,
)

CLEANRL_FINAL = 20.36  # ± 0.20, 10M env steps, docs/rl-algorithms/ppo.md (cleanrl 7a96de2)
BAR = 18.0  # the usual "plays well" bar (issue 18)
SMOOTH = 20  # iterations in the moving mean of the training-episode curve


def report(run_dir: Path, config: dict, steps: np.ndarray, returns: np.ndarray, image: str) -> str:
    games = config["eval"]["episodes"]
    if len(returns):
        last = returns[-SMOOTH:]
        episodes = (
            f"Training episodes: mean return of the last {len(last)} iterations that ended any "
            f"(to {int(steps[-1]):,} env steps): {np.mean(last):.1f}."
        )
    else:
        episodes = "No training episodes were logged (`log.tensorboard=false`)."
    return "\n\n".join(
        [
            "# PPO on ALE/Pong-v5 at CleanRL's budget",
            f"Run directory `{run_dir}` on {machine()}; budget "
            f"{config['budget']['env_steps']:,.0f} env steps, preset `{config.get('preset')}`. "
            "Trained in pieces (`resume=`): the last column is compile and run seconds summed "
            "over the pieces (a resumed run carries its count on; the gaps between pieces are "
            "not in it).",
            evaluations_table(run_dir, f"{games} games"),
            f"{episodes} CleanRL's `ppo_atari.py`: {CLEANRL_FINAL} ± 0.20 at 10M env steps "
            f"(its docs' table, PongNoFrameskip-v4, no sticky actions); the usual bar is {BAR:g}.",
            f"![PPO on Pong: training and evaluation returns against env steps]({image})",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=RESULTS / "ppo_pong.md")
    args = parser.parse_args()
    config = json.loads((args.run_dir / "config.json").read_text())
    steps, returns = logged_training_returns(args.run_dir)  # parsed once: a 10M run's are large
    image = args.out.with_suffix(".png")
    write_report(report(args.run_dir, config, steps, returns, image.name) + "\n", args.out)
    plot_run_curve(
        args.run_dir,
        f"greedy evaluation ({config['eval']['episodes']} games)",
        steps,
        returns,
        SMOOTH,
        [
            (CLEANRL_FINAL, "--", "CleanRL ppo_atari.py at 10M"),
            (BAR, ":", f"{BAR:g}"),
        ],
        ("game score", -21.5, 21.5),
        "PPO on ALE/Pong-v5, `atari` preset, seed 0",
        image,
    )


if __name__ == "__main__":
    main()
