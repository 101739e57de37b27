"""PPO on CartPole-v1 beside PureJaxRL's own ppo.py, in one process, runs interleaved.

PureJaxRL is not shipped with jaxrl: pass a checkout of https://github.com/luchris429/purejaxrl
(`--purejaxrl PATH`). Its `purejaxrl/ppo.py` is imported unchanged, with stand-ins for two
modules it imports that do not import with today's packages (`purejaxrl_compat.py`).

Both sides run PureJaxRL's config (4 envs x 128 steps, 4 minibatches, 4 epochs, lr 2.5e-4
annealed, 64-64 tanh actor and critic, no observation or return normalisation, 5e5 env steps).
PureJaxRL is `jax.jit(make_train(config))` (N seeds: `jax.jit(jax.vmap(make_train(config)))`),
compiled with `.lower().compile()`; jaxrl is `jaxrl.loop.train` as the CLI runs it, with its
default evaluations and checkpoints, and its run time is the whole `train` call but the
compile (`compile_seconds`): evaluations, checkpoints, logs and the run directory's set-up are
all work PureJaxRL does not do. Each side is compiled once per seed count, then the runs
alternate (PureJaxRL, jaxrl, PureJaxRL, ...). Printed per row: compile s,
median run s (min-max), the ratio of medians, and the final return (PureJaxRL: the mean
training return of episodes ended in the last update; jaxrl: its last evaluation).
The process has the devices a CLI run has (`parallel.use_cores_as_devices`): jaxrl's seeds run
spread over the cores, PureJaxRL's program on the first device, as its script runs it.

    python benchmarks/ppo_purejaxrl.py --purejaxrl ../purejaxrl [--seeds 1 64] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np
from common import (
    PUREJAXRL_PPO_CARTPOLE,
    PUREJAXRL_SETTINGS,
    RESULTS,
    machine,
    markdown_table,
    median_range,
    write_report,
)
from purejaxrl_compat import load_make_train

from jaxrl import parallel
from jaxrl.cli import compose
from jaxrl.loop import train

DEFAULT_OUT = RESULTS / "ppo_purejaxrl.md"
TOTAL_STEPS = 500_000
PUREJAXRL_CONFIG = {
    "LR": 2.5e-4,
    "NUM_ENVS": 4,
    "NUM_STEPS": 128,
    "TOTAL_TIMESTEPS": TOTAL_STEPS,
    "UPDATE_EPOCHS": 4,
    "NUM_MINIBATCHES": 4,
    "GAMMA": 0.99,
    "GAE_LAMBDA": 0.95,
    "CLIP_EPS": 0.2,
    "ENT_COEF": 0.01,
    "VF_COEF": 0.5,
    "MAX_GRAD_NORM": 0.5,
    "ACTIVATION": "tanh",
    "ENV_NAME": "CartPole-v1",
    "ANNEAL_LR": True,
    "DEBUG": False,
}
JAXRL_OVERRIDES = [
    *PUREJAXRL_PPO_CARTPOLE,
    *PUREJAXRL_SETTINGS,
    f"budget.env_steps={TOTAL_STEPS // 512 * 512}",
    "log.progress=false",
    "log.tensorboard=false",
]


def purejaxrl_side(make_train: Any, seeds: int) -> tuple[float, Any]:
    """(compile s, a function that runs once and returns (run s, final return))."""
    keys = jax.random.split(jax.random.PRNGKey(30), seeds)
    t0 = time.perf_counter()
    compiled = jax.jit(jax.vmap(make_train(dict(PUREJAXRL_CONFIG)))).lower(keys).compile()
    compile_s = time.perf_counter() - t0

    def run() -> tuple[float, float]:
        t = time.perf_counter()
        out = compiled(keys)
        info = jax.block_until_ready(out["metrics"])
        run_s = time.perf_counter() - t
        returns = np.asarray(info["returned_episode_returns"][:, -1])  # (seeds, steps, envs)
        ended = np.asarray(info["returned_episode"][:, -1])
        return run_s, float(returns[ended].mean()) if ended.any() else float("nan")

    return compile_s, run


def jaxrl_side(seeds: int, workdir: Path, extra: list[str]) -> Any:
    """A function that trains once into a new run directory: (run s, final return, compile s),
    the run seconds being all of `train` but the compile: checkpoints, logs and set-up too."""
    cfg = compose([*JAXRL_OVERRIDES, f"num_seeds={seeds}", *extra])
    count = iter(range(1_000_000))

    def run() -> tuple[float, float, float]:
        t = time.perf_counter()
        s = train(cfg, workdir / f"s{seeds}_{next(count)}").summary
        wall = time.perf_counter() - t
        return wall - s["compile_seconds"], s["final_eval_return"], s["compile_seconds"]

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--purejaxrl", type=Path, required=True, help="a PureJaxRL checkout")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--jaxrl", nargs="*", default=[], help="extra jaxrl overrides")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    parallel.use_cores_as_devices()  # the devices a CLI run of jaxrl has
    make_train, _ = load_make_train(args.purejaxrl, "ppo.py")

    rows = []
    with tempfile.TemporaryDirectory(prefix="jaxrl-bench-pjr-") as tmp:
        for seeds in args.seeds:
            peer_compile, peer_run = purejaxrl_side(make_train, seeds)
            ours_run = jaxrl_side(seeds, Path(tmp), args.jaxrl)
            peer, ours = [], []
            print(f"{seeds} seed(s): PureJaxRL compiled in {peer_compile:.1f} s", flush=True)
            for _ in range(args.repeats):
                peer.append(peer_run())
                ours.append(ours_run())
                print(f"  PureJaxRL run {peer[-1]}, jaxrl run {ours[-1]}", flush=True)
            peer_s = [r[0] for r in peer]
            ours_s = [r[0] for r in ours]
            ratio = statistics.median(peer_s) / statistics.median(ours_s)
            rows.append([
                f"{seeds} seed(s), {TOTAL_STEPS:,} steps each",
                f"{peer_compile:.1f}",
                median_range(peer_s),
                f"{ours[0][2]:.1f}",
                median_range(ours_s),
                f"{ratio:.2f}x",
                f"{np.mean([r[1] for r in peer]):.1f}",
                f"{np.mean([r[1] for r in ours]):.1f}",
            ])  # fmt: skip
            print(rows[-1], flush=True)
    header = [
        "what",
        "PureJaxRL compile s",
        "PureJaxRL run s",
        "jaxrl compile s",
        "jaxrl run s",
        "speed-up (PureJaxRL run / jaxrl run)",
        "PureJaxRL final train return",
        "jaxrl final eval return",
    ]
    table = markdown_table(header, rows)
    text = (
        "# PPO CartPole-v1: jaxrl beside PureJaxRL's ppo.py (one process, runs interleaved)\n\n"
        f"Machine: {machine()}. Command: `python benchmarks/ppo_purejaxrl.py "
        f"{' '.join(sys.argv[1:])}`. {args.repeats} runs per side and seed count, alternating; "
        "medians with min-max. jaxrl's run s is its whole `train` call but the compile, with its "
        "default evaluations and checkpoints "
        f"(overrides: {' '.join(JAXRL_OVERRIDES + args.jaxrl)}).\n\n{table}\n"
    )
    write_report(text, args.out)


if __name__ == "__main__":
    main()
