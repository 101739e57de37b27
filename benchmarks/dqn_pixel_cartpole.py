"""DQN on pixel CartPole (`pixel/CartPole-v1`: 84×84 grey frames, frame skip 4, stack 4) at a
budget of hours: a long run through the CLI, trained in pieces if need be (Ctrl-C or SIGTERM
writes a checkpoint, `resume=` goes on), reported by this script from its run directory.

    python -m jaxrl.run agent=dqn env=pixel/CartPole-v1 hydra.run.dir=RUN_DIR   # first piece
    python -m jaxrl.run resume=RUN_DIR                                           # later pieces
    python benchmarks/dqn_pixel_cartpole.py --run-dir RUN_DIR [RUN_DIR ...] [--out PATH]

Several run directories (the same settings, other seeds) make one report: a column per seed.

The first command takes DQN's `pixel-cartpole` preset (`jaxrl/presets.py`). Returns are in
CartPole steps (each agent step repeats its action for 4 of them), 500 at most. The reference
(the original PyTorch experiments, ../shared/reference/original-experiments.md): SB3's DQN
`CnnPolicy` on the same rendering reached a mean episode length of ~100 after 4M steps.
"""

from __future__ import annotations

from common import RESULTS, LongRun, report_long_run

CAP = 500  # CartPole-v1's episode cap, in CartPole steps

PIXEL_CARTPOLE = LongRun(
    title="DQN on pixel/CartPole-v1",
    episodes="episodes",
    y_axis=("return (CartPole steps)", 0, CAP + 20),
    references=((CAP, "--", f"the cap, {CAP}"),),
    reference_text=(
        f"Returns in CartPole steps, {CAP} at most; the training episodes are ε-greedy. The "
        "original experiments' SB3 DQN: a mean episode length of ~100 after 4M steps."
    ),
    smooth=10,
)

if __name__ == "__main__":
    report_long_run(PIXEL_CARTPOLE, __doc__.splitlines()[0], RESULTS / "dqn_pixel_cartpole.md")
