"""HyAR's nearest choice (the embedding nearest each latent z_k) in two forms, timed in whole
learning iterations on Hard Move n = 10, where there are K = 1,024 choices: the differences
z − e_k of every pair summed over their short last axis (what `agents.hyar.nearest_choice` did),
and ‖e_k‖² − 2 z·e_k, one matrix product (what it does).

One process; each form traced into its own training program (`nearest_choice` is read when the
program is traced), both past the random warm-up, then timed in turns: `--repeats` calls of two
1,000-step iterations each, medians with min-max, per iteration.

    python benchmarks/hyar_nearest_choice.py [--seeds 1] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp
from common import RESULTS, load_note, machine, markdown_table, write_report

from agents import hyar
from jaxrl.cli import compose
from jaxrl.datatypes import Array
from jaxrl.loop import Trainer

DEFAULT_OUT = RESULTS / "hyar_nearest_choice.md"


def by_differences(embeddings: Array, discrete_latent: Array) -> Array:
    distances = jnp.sum((discrete_latent[..., None, :] - embeddings) ** 2, axis=-1)
    return jnp.argmin(distances, axis=-1).astype(jnp.int32)


FORMS = {"differences summed": by_differences, "one matrix product": hyar.nearest_choice}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    overrides = [
        "agent=hyar",
        "env=HardMove-v0",
        "+env.kwargs.num_actuators=10",
        f"num_seeds={args.seeds}",
        "agent.learning_starts=2000",  # past the warm-up after two iterations
        "agent.exploration_steps=1000",
        "agent.vae_train_after=1000",
        "agent.vae_pretrain_steps=10",
        "budget.env_steps=1000000",
        "eval.every=1000",
    ]
    load_before = os.getloadavg()[0]
    programs = {}
    for name, form in FORMS.items():
        hyar.nearest_choice = form
        trainer = Trainer(compose(overrides))
        carry = trainer.initial_carry()
        shapes = (jax.ShapeDtypeStruct((), jnp.int32), jax.ShapeDtypeStruct((), jnp.bool_))
        chunk = trainer.chunk.lower(carry, trainer.hyper, *shapes).compile()
        carry, _ = chunk(carry, trainer.hyper, jnp.int32(4), jnp.bool_(False))
        programs[name] = [trainer, chunk, jax.block_until_ready(carry)]
    hyar.nearest_choice = FORMS["one matrix product"]
    seconds: dict[str, list[float]] = {name: [] for name in programs}
    for _ in range(args.repeats):
        for name, entry in programs.items():
            trainer, chunk, carry = entry
            start = time.perf_counter()
            carry, _ = chunk(carry, trainer.hyper, jnp.int32(2), jnp.bool_(False))
            jax.block_until_ready(carry)
            seconds[name].append((time.perf_counter() - start) / 2)
            entry[2] = carry
    base = statistics.median(seconds["differences summed"])
    rows = [
        [
            name,
            f"{statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})",
            f"{base / statistics.median(v):.2f}x",
        ]
        for name, v in seconds.items()
    ]
    table = markdown_table(["nearest choice", "s per 1,000-step iteration", "speed-up"], rows)
    text = (
        f"# HyAR's nearest choice on Hard Move n = 10 (K = 1,024)\n\n"
        f"`python benchmarks/hyar_nearest_choice.py --seeds {args.seeds} --repeats "
        f"{args.repeats}` on {machine()}: {args.seeds} seed(s), the learning phase.\n\n{table}\n\n"
        f"{load_note(load_before, os.getloadavg()[0])}\n"
    )
    write_report(text, args.out)


if __name__ == "__main__":
    main()
