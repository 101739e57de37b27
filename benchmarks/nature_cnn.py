"""Where an Atari PPO update's time goes: each Nature CNN layer's forward pass, kernel gradient
(dW) and input gradient (dX) on one minibatch in each form of `jaxrl.conv_forms` (`conv`: the
convolution with explicit gradients; `space_to_depth`: stride-s blocks folded into channels and a
stride-1 convolution; `shifted_sums`: that stride-1 convolution as one matrix product per kernel
offset), and the plan `conv_forms.plan_for` chooses on this machine for the same shapes.

One PPO iteration of the `atari` preset (8 envs × 128 steps, 4 minibatches × 4 epochs) runs 16
minibatch steps of 256 frames through the shared torso, each a forward pass, dW of every layer and
dX of every layer but the first:

    python benchmarks/nature_cnn.py [--batch 256] [--repeats 5]
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from common import RESULTS, load_note, machine, markdown_table, write_report

from jaxrl import conv_forms
from jaxrl.cli import enable_compilation_cache

# (input [H, W, C], kernel [k, k, C, O], stride) of the Nature CNN's three convolutions.
LAYERS = (
    ((84, 84, 4), (8, 8, 4, 32), 4),
    ((20, 20, 32), (4, 4, 32, 64), 2),
    ((9, 9, 64), (3, 3, 64, 64), 1),
)


FORMS: dict[str, Callable[[jax.Array, jax.Array, int], jax.Array]] = {
    name: functools.partial(lambda x, w, s, form: form(x, w, (s, s)), form=form)
    for name, form in conv_forms.FORMS.items()
}


def milliseconds(fn: Callable, args: tuple, repeats: int) -> float:
    compiled = jax.jit(fn).lower(*args).compile()
    jax.block_until_ready(compiled(*args))
    start = time.perf_counter()
    for _ in range(repeats):
        jax.block_until_ready(compiled(*args))
    return (time.perf_counter() - start) / repeats * 1000


def layer_times(
    form: Callable[[jax.Array, jax.Array, int], jax.Array],
    stride: int,
    inputs: tuple[jax.Array, jax.Array, jax.Array],
    repeats: int,
) -> list[float]:
    """Milliseconds of the forward pass, dW and dX of one layer in one form."""
    x, w, dy = inputs

    def forward(x: jax.Array, w: jax.Array) -> jax.Array:
        return form(x, w, stride)

    def dw(x: jax.Array, w: jax.Array, dy: jax.Array) -> jax.Array:
        return jax.vjp(forward, x, w)[1](dy)[1]

    def dx(x: jax.Array, w: jax.Array, dy: jax.Array) -> jax.Array:
        return jax.vjp(forward, x, w)[1](dy)[0]

    return [
        milliseconds(forward, (x, w), repeats),
        milliseconds(dw, (x, w, dy), repeats),
        milliseconds(dx, (x, w, dy), repeats),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(RESULTS / "nature_cnn.md"))
    args = parser.parse_args()
    enable_compilation_cache()  # the plans the runs on this machine read
    before = os.getloadavg()[0]
    rng = np.random.default_rng(0)
    rows = []
    for layer, (x_shape, w_shape, stride) in enumerate(LAYERS):
        x = jnp.asarray(rng.standard_normal((args.batch, *x_shape)), jnp.float32)
        w = jnp.asarray(rng.standard_normal(w_shape) * 0.05, jnp.float32)
        reference = FORMS["conv"](x, w, stride)
        dy = jnp.ones_like(reference)
        plan = conv_forms.plan_for(x.shape, w.shape, (stride, stride), x.dtype, layer > 0)
        for name, form in FORMS.items():
            if name not in conv_forms.candidate_forms(w_shape, (stride, stride)):
                continue
            error = float(jnp.abs(form(x, w, stride) - reference).max())
            times = layer_times(form, stride, (x, w, dy), args.repeats)
            print(w_shape, name, [f"{t:.1f}" for t in times], flush=True)
            rows.append(
                [f"{w_shape[0]}×{w_shape[1]}/{stride}, {x_shape[2]} → {w_shape[3]}", name]
                + [", ".join(part for part, chosen in plan._asdict().items() if chosen == name)]
                + [f"{t:,.1f}" for t in times]
                + [f"{error:.1e}"]
            )
    header = ["layer", "form", "chosen for", "forward ms", "dW ms", "dX ms", "max |Δ| vs conv"]
    text = "\n\n".join(
        [
            "# Nature CNN layers: forward and gradients per minibatch",
            f"`python benchmarks/nature_cnn.py --batch {args.batch} --repeats {args.repeats}` on "
            f"{machine()}; minibatch of {args.batch} frames, float32, each time the mean of "
            f"{args.repeats} calls of a compiled program. {load_note(before, os.getloadavg()[0])}",
            markdown_table(header, rows),
        ]
    )
    write_report(text + "\n", Path(args.out))


if __name__ == "__main__":
    main()
