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
import struct
from pathlib import Path

import numpy as np
from common import RESULTS, eval_curves, fmt, machine, markdown_table, write_report

CLEANRL_FINAL = 20.36  # ± 0.20, 10M env steps, docs/rl-algorithms/ppo.md (cleanrl 7a96de2)
BAR = 18.0  # the usual "plays well" bar (issue 18)
SMOOTH = 20  # iterations in the moving mean of the training-episode curve


def training_returns(run_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """(env steps, mean return of the episodes that ended) per iteration that ended any, from
    the run's TensorBoard events; a resumed run's repeated iterations: the last value wins."""
    from tensorboardX.proto.event_pb2 import Event

    by_step: dict[str, dict[int, float]] = {"train/episode_return": {}, "train/episodes": {}}
    for path in sorted((run_dir / "tb").glob("seed_0/events.out.tfevents.*")):
        data, offset = path.read_bytes(), 0
        while offset + 12 <= len(data):
            (length,) = struct.unpack("<Q", data[offset : offset + 8])
            event = Event.FromString(data[offset + 12 : offset + 12 + length])
            offset += 12 + length + 4
            for value in event.summary.value:
                if value.tag in by_step:
                    by_step[value.tag][event.step] = value.simple_value
    returns, episodes = by_step["train/episode_return"], by_step["train/episodes"]
    steps = np.array(sorted(s for s in returns if episodes.get(s, 0) > 0))
    return steps, np.array([returns[s] for s in steps])


def plot(run_dir: Path, config: dict, steps: np.ndarray, returns: np.ndarray, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    eval_steps, curves = eval_curves(run_dir, ["eval_return"])
    games = config["eval"]["episodes"]
    fig, ax = plt.subplots(figsize=(6, 4))
    if len(returns) >= SMOOTH:
        smooth = np.convolve(returns, np.ones(SMOOTH) / SMOOTH, mode="valid")
        ax.plot(steps[SMOOTH - 1 :], smooth, label=f"training episodes ({SMOOTH}-iteration mean)")
    ax.plot(eval_steps, curves["eval_return"][0], "o-", label=f"greedy evaluation ({games} games)")
    ax.axhline(CLEANRL_FINAL, color="gray", linestyle="--", label="CleanRL ppo_atari.py at 10M")
    ax.axhline(BAR, color="gray", linestyle=":", label=f"{BAR:g}")
    ax.set_xlabel("env steps")
    ax.set_ylabel("game score")
    ax.set_ylim(-21.5, 21.5)
    ax.set_title("PPO on ALE/Pong-v5, `atari` preset, seed 0")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def report(run_dir: Path, config: dict, steps: np.ndarray, returns: np.ndarray, image: str) -> str:
    rows = [
        line.split(",")
        for line in (run_dir / "evals.csv").read_text().splitlines()[1:]
        if line.strip()
    ]
    table = markdown_table(
        [
            "env steps",
            f"evaluation return ({config['eval']['episodes']} games)",
            "std",
            "training seconds so far",
        ],
        [
            [fmt(float(r[2]), 0), fmt(float(r[3]), 2), fmt(float(r[4]), 2), fmt(float(r[5]), 0)]
            for r in rows
        ],
    )
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
            table,
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
    steps, returns = training_returns(args.run_dir)  # parsed once: a 10M run's events are large
    image = args.out.with_suffix(".png")
    write_report(report(args.run_dir, config, steps, returns, image.name) + "\n", args.out)
    plot(args.run_dir, config, steps, returns, image)


if __name__ == "__main__":
    main()
