"""ES's compiled chunk on CartPole-v1 at XLA:CPU's LLVM optimisation levels: compile seconds
against run seconds, and whether the numbers stay the same, for the cold-start gap to evosax
(es_solved.md: jaxrl's compile is where it loses).

The chunk is jaxrl.loop's (`python -m jaxrl.run agent=es env=CartPole-v1`'s config: population
64, 5 episodes per member, an evaluation every generation), lowered once per compile and
compiled with `compiler_options={"xla_backend_optimization_level": level}` ("default": no
option, what every jaxrl run uses). Compiles run `--repeats` times with the levels interleaved;
each compiled chunk then runs `--chunks` generations from the same initial carry, best of 3.
"bitwise" says whether its final carry equals the default's (NaN equal to NaN).

    python benchmarks/es_compile_levels.py [--repeats 3] [--chunks 5] [--out PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from common import RESULTS, load_note, machine, markdown_table, write_report

from jaxrl.cli import compose
from jaxrl.loop import Trainer
from jaxrl.prng import keys_to_data

DEFAULT_OUT = RESULTS / "es_compile_levels.md"
LEVELS: dict[str, dict[str, int]] = {
    "default": {},
    "1": {"xla_backend_optimization_level": 1},
    "0": {"xla_backend_optimization_level": 0},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chunks", type=int, default=5)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    trainer = Trainer(compose(["agent=es", "env=CartPole-v1"]))
    keys = trainer.run_keys()
    first_carry = jax.block_until_ready(trainer.init(keys, trainer.hyper))
    abstract = jax.eval_shape(trainer.init, keys, trainer.hyper)
    iterations = jax.ShapeDtypeStruct((), jnp.int32)
    evaluate = jax.ShapeDtypeStruct((), jnp.bool_)

    compile_seconds: dict[str, list[float]] = {name: [] for name in LEVELS}
    compiled = {}
    for _ in range(args.repeats):
        for name, options in LEVELS.items():
            jax.clear_caches()  # else the same program at the same level is not compiled again
            lowered = trainer.chunk.lower(abstract, trainer.hyper, iterations, evaluate)
            t = time.perf_counter()
            compiled[name] = lowered.compile(compiler_options=options)
            compile_seconds[name].append(time.perf_counter() - t)

    run_seconds, final = {}, {}
    for name, chunk in compiled.items():
        best = float("inf")
        for _ in range(3):
            carry = jax.tree.map(jnp.copy, first_carry)  # the chunk takes its carry (donated)
            t = time.perf_counter()
            for _ in range(args.chunks):
                carry, _ = chunk(carry, trainer.hyper, np.int32(trainer.eval_every), np.bool_(True))
            jax.block_until_ready(carry)
            best = min(best, time.perf_counter() - t)
        run_seconds[name], final[name] = best, jax.tree.leaves(keys_to_data(carry))
    load_after = os.getloadavg()[0]

    rows = []
    for name in LEVELS:
        same = all(
            np.array_equal(a, b, equal_nan=True)
            for a, b in zip(final[name], final["default"], strict=True)
        )
        rows.append(
            [
                name,
                f"{statistics.median(compile_seconds[name]):.2f}",
                f"{min(compile_seconds[name]):.2f}-{max(compile_seconds[name]):.2f}",
                f"{run_seconds[name]:.3f}",
                f"{run_seconds[name] / run_seconds['default']:.2f}",
                "yes" if same else "no",
            ]
        )
    header = [
        "LLVM level",
        "chunk compile s, median",
        "range",
        f"{args.chunks} generations s, best of 3",
        "run × default",
        "bitwise = default",
    ]
    text = (
        "# ES's chunk at XLA:CPU's LLVM optimisation levels\n\n"
        f"`python benchmarks/es_compile_levels.py --repeats {args.repeats} --chunks "
        f"{args.chunks}` on {machine()}\n\n"
        + markdown_table(header, rows)
        + "\n\nOne process; the chunk lowered afresh for each compile, levels interleaved. "
        f"{load_note(load_before, load_after)}\n"
    )
    write_report(text, args.out)


if __name__ == "__main__":
    main()
