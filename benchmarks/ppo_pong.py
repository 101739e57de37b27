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

from common import RESULTS, LongRun, report_long_run

CLEANRL_FINAL = 20.36  # ± 0.20, 10M env steps, docs/rl-algorithms/ppo.md (cleanrl 7a96de2)
BAR = 18.0  # the usual "plays well" bar (issue 18)

PONG = LongRun(
    title="PPO on ALE/Pong-v5 at CleanRL's budget",
    episodes="games",
    y_axis=("game score", -21.5, 21.5),
    references=(
        (CLEANRL_FINAL, "--", "CleanRL ppo_atari.py at 10M"),
        (BAR, ":", f"{BAR:g}"),
    ),
    reference_text=(
        f"CleanRL's `ppo_atari.py`: {CLEANRL_FINAL} ± 0.20 at 10M env steps (its docs' table, "
        f"PongNoFrameskip-v4, no sticky actions); the usual bar is {BAR:g}."
    ),
    smooth=20,
)

if __name__ == "__main__":
    report_long_run(PONG, __doc__.splitlines()[0], RESULTS / "ppo_pong.md")
