"""PPO on CartPole-v1 in PureJaxRL's configuration: speed, compile time and final return.

4 envs x 128 steps, 4 minibatches, 4 epochs, lr 2.5e-4 annealed, 64-64 tanh actor and critic;
976 updates = 499,712 env steps per seed (PureJaxRL's 5e5 // 512), evaluated (10 deterministic
episodes) every 122 updates. Rows, all in this one process with no persistent compile cache:

* 1 seed (`jaxrl.loop.train`, as the CLI runs it), with our defaults (observation and return
  normalisation on) and with PureJaxRL's settings (both off: the algorithm PureJaxRL runs);
* N seeds in one program (`num_seeds=N`: the whole training vmapped over seeds);
* N single runs one after another, reusing the 1-seed program (so one compile); the table also
  gives what N separate processes would cost, N x that compile + the measured runs.

    python benchmarks/ppo_cartpole.py [--seeds 16] [--out PATH]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np
from common import (
    PUREJAXRL_PPO_CARTPOLE,
    PUREJAXRL_SETTINGS,
    RESULTS,
    fmt,
    machine,
    markdown_table,
    write_report,
)

from jaxrl.cli import compose
from jaxrl.loop import Trainer, train
from jaxrl.prng import make_key

DEFAULT_OUT = RESULTS / "ppo_cartpole.md"
# PureJaxRL itself is not shipped here; this is how it was measured, on the machine of the table.
REFERENCE = (
    "PureJaxRL's purejaxrl/ppo.py (commit 146b485; distrax's Categorical replaced by a "
    "log-softmax, gymnax 1.0's step returning terminated and truncated, done = either) compiled "
    "once and run 7 times interleaved with jaxrl's runs in one process (2026-11-23, 2-core Intel "
    "Xeon): compile 3.2 s, run median 2.63 s (2.59-2.68), final training return 459-500; jaxrl "
    "with PureJaxRL's settings in the same process: compile 3.1 s, run median 2.50 s "
    "(2.49-2.52) including its 8 evaluations, eval return 500 in 7/7. Earlier sessions on a "
    "2-core AMD EPYC: PureJaxRL 6.0-6.7 s compile, 4.8-5.7 s run."
)
UPDATES = 976
STEPS_PER_UPDATE = 4 * 128
EVAL_EVERY = 122
OVERRIDES = [
    *PUREJAXRL_PPO_CARTPOLE,
    f"budget.env_steps={UPDATES * STEPS_PER_UPDATE}",
    f"eval.every={EVAL_EVERY}",
    "log.progress=false",
    "log.tensorboard=false",
]


@dataclass
class Row:
    what: str
    env_steps: int  # summed over seeds
    compile_s: float
    run_s: float
    final_return: float  # mean over seeds
    solved: str  # seeds whose final return is >= 475


def run_train(what: str, num_seeds: int, workdir: Path, extra: tuple[str, ...] = ()) -> Row:
    cfg = compose([*OVERRIDES, f"num_seeds={num_seeds}", *extra])
    # a directory of its own per row (with --seeds 1 two rows had the same seeds and extras)
    result = train(cfg, workdir / f"row_{len(list(workdir.iterdir()))}")
    s = result.summary
    finals = [seed["final_eval_return"] for seed in s["runs"]]
    return Row(
        what,
        s["env_steps"] * num_seeds,
        s["compile_seconds"],
        s["run_seconds"],
        s["final_eval_return"],
        f"{sum(f >= 475 for f in finals)}/{num_seeds}",
    )


def run_singles(num_seeds: int) -> tuple[Row, float]:
    """N one-seed trainings through one compiled program; returns the row and its compile s."""
    cfg = compose([*OVERRIDES, "num_seeds=1"])
    trainer = Trainer(cfg)
    t0 = time.perf_counter()
    carry = trainer.initial_carry()
    iterations = np.int32(EVAL_EVERY)  # train steps per chunk
    compiled = trainer.chunk.lower(carry, trainer.hyper, iterations, np.bool_(True)).compile()
    compile_s = time.perf_counter() - t0
    run_s, finals = 0.0, []
    for seed in range(num_seeds):
        carry = trainer.init(make_key(seed)[None], trainer.hyper)
        t0 = time.perf_counter()
        for _ in range(UPDATES // EVAL_EVERY):
            carry, out = compiled(carry, trainer.hyper, iterations, np.bool_(True))
        out = jax.device_get(out)
        run_s += time.perf_counter() - t0
        finals.append(float(np.mean(out.eval_returns)))
    row = Row(
        f"{num_seeds} single runs, one after another",
        UPDATES * STEPS_PER_UPDATE * num_seeds,
        compile_s,
        run_s,
        float(np.mean(finals)),
        f"{sum(f >= 475 for f in finals)}/{num_seeds}",
    )
    return row, compile_s


def markdown(rows: list[Row], where: str) -> str:
    """The table of `rows`, with `where` in the machine column."""
    header = ["what", "env steps/s", "compile s", "run s", "final return", "seeds ≥ 475", "machine"]
    cells = [
        [
            r.what,
            fmt(r.env_steps / r.run_s, 0),
            f"{r.compile_s:.1f}",
            f"{r.run_s:.1f}",
            f"{r.final_return:.1f}",
            r.solved,
            where,
        ]
        for r in rows
    ]
    return markdown_table(header, cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=16)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    n = args.seeds

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="jaxrl-bench-ppo-") as tmp:
        rows = [run_train("1 seed", 1, Path(tmp))]
        print(markdown(rows, ""), flush=True)
        rows.append(
            run_train(
                "1 seed, PureJaxRL's settings (no obs/return normalisation)",
                1,
                Path(tmp),
                tuple(PUREJAXRL_SETTINGS),
            )
        )
        print(markdown(rows[-1:], ""), flush=True)
        rows.append(run_train(f"{n} seeds in one program (vmap)", n, Path(tmp)))
        print(markdown(rows[-1:], ""), flush=True)
    singles, compile_s = run_singles(n)
    rows.append(singles)
    load_after = os.getloadavg()[0]

    vmapped = rows[2]
    separate_total = n * compile_s + singles.run_s
    table = markdown(rows, machine())
    notes = (
        f"Env steps are summed over seeds. Wall time of {n} seeds: one program "
        f"{vmapped.compile_s + vmapped.run_s:.1f} s (compile + run); {n} single runs reusing one "
        f"compiled program {compile_s + singles.run_s:.1f} s; {n} separate processes without a "
        f"compile cache about {separate_total:.1f} s ({n} x {compile_s:.1f} s compile + "
        f"{singles.run_s:.1f} s run). Reference: {REFERENCE} "
        f"1-minute load average {load_before:.2f} before, {load_after:.2f} after (other "
        f"processes shared the CPU when it is well above 0)."
    )
    text = f"# PPO on CartPole-v1 (PureJaxRL configuration)\n\n{table}\n\n{notes}\n"
    write_report(text, args.out)


if __name__ == "__main__":
    main()
