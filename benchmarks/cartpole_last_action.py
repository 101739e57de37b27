"""DQN on CartPole seen as pixel CartPole's frame stack sees it, with and without the last action.
Why: `pixel_cartpole_observability.py` found that at frame skip 4 the velocities at the end of an
agent step are not in frames one step apart, and that a linear rule balances once the last
action is added; this asks whether a learner (jaxrl's DQN, seeds in one program) plateaus below
500 from such a stack and reaches it with the last action, without pictures, so in minutes.

`StackedCartPole-v1` (registered with Gymnasium here, trained as `gym/StackedCartPole-v1`):
`envs/pixel.py`'s `PixelCartPole` (CartPole-v1 with each action held for `frame_skip` CartPole
steps, reward = CartPole steps survived, 500-step cap: 125 agent steps at frame skip 4) observed,
instead of drawn, as

* `state`: the state [x, x′, θ, θ′] itself;
* `stack`: x and θ now, and their changes over each of the last `stack - 1` agent steps per
  second — the information of `stack` frames one agent step apart (the pixel env's stack, with
  positions exact instead of drawn; before the first steps the reset state is repeated);
* `stack_and_action`: the same and the last action as ±1 (0 before the first).

    python benchmarks/cartpole_last_action.py [--seeds 4] [--steps 100000] [--out FILE]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from common import RESULTS, machine, markdown_table, write_report

import jaxrl
from envs.pixel import PixelCartPole

ENV_ID = "StackedCartPole-v1"
OBSERVATIONS = ("state", "stack", "stack_and_action")


class StackedCartPole(PixelCartPole):
    """Pixel CartPole's env (CartPole-v1, the held action, the 500-step cap) observed as one of
    OBSERVATIONS (see the module) instead of drawn."""

    def __init__(self, observe: str = "stack", frame_skip: int = 4, stack: int = 4) -> None:
        if observe not in OBSERVATIONS:
            raise ValueError(f"observe={observe!r}: one of {OBSERVATIONS}")
        super().__init__(frame_skip)
        self.observe, self.stack = observe, stack
        size = {"state": 4, "stack": 2 * stack, "stack_and_action": 2 * stack + 1}[observe]
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)
        self._positions: list[np.ndarray] = []  # [x, θ] now, then one agent step earlier, ...

    def _observe(self) -> np.ndarray:
        """Called once by reset (no last action yet) and once after each step."""
        state = np.asarray(self.cartpole.unwrapped.state, np.float64)
        if self.observe == "state":
            return state.astype(np.float32)
        earlier = self._positions if self._last_action is not None else [state[[0, 2]]] * self.stack
        self._positions = [state[[0, 2]], *earlier][: self.stack]
        positions = np.stack(self._positions)
        changes = (positions[:-1] - positions[1:]) / (0.02 * self.frame_skip)
        parts = [positions[0], changes.ravel()]
        if self.observe == "stack_and_action":
            push = 0.0 if self._last_action is None else 2.0 * self._last_action - 1.0
            parts.append(np.array([push]))
        return np.concatenate(parts).astype(np.float32)


def train(observe: str, seeds: int, steps: int, run_root: Path) -> Any:
    """One program for all seeds: DQN's defaults with 3-step returns and a dueling head."""
    return jaxrl.train(
        "agent=dqn",
        f"env=gym/{ENV_ID}",
        f"+env.kwargs.observe={observe}",
        f"num_seeds={seeds}",
        f"budget.env_steps={steps}",
        "agent.n_step=3",
        "agent.dueling=true",
        "log.progress=false",
        "log.tensorboard=false",
        run_dir=run_root / observe,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--run-root", type=Path, default=Path("runs/cartpole_last_action"))
    parser.add_argument("--out", type=Path, default=RESULTS / "cartpole_last_action.md")
    args = parser.parse_args()

    rows = []
    for observe in OBSERVATIONS:
        result = train(observe, args.seeds, args.steps, args.run_root)
        scores = jaxrl.evaluate(result.run_dir, episodes=args.episodes)
        means = [run.mean_return for run in scores.runs]
        at_cap = [run.truncated.mean() for run in scores.runs]
        rows.append(
            [
                observe,
                ", ".join(f"{m:.0f}" for m in means),
                f"{np.mean(means):.1f}",
                f"{np.mean(at_cap):.2f}",
            ]
        )
        print(" | ".join(rows[-1]), flush=True)
    header = ["observation", "greedy return per seed", "mean", "share at the cap"]
    text = (
        "# DQN on CartPole seen through a frame stack, with and without the last action\n\n"
        f"`python benchmarks/cartpole_last_action.py --seeds {args.seeds} --steps {args.steps}` "
        f"on {machine()}: frame skip 4, {args.seeds} seeds in one program per row, "
        f"{args.steps:,} env steps, then {args.episodes} greedy episodes per seed "
        "(`jaxrl.evaluate`); returns in CartPole steps, 500 at most.\n\n"
        + markdown_table(header, rows)
        + "\n"
    )
    write_report(text, args.out)


gym.register(ENV_ID, entry_point=StackedCartPole)

if __name__ == "__main__":
    main()
