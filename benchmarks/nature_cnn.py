"""Where an Atari PPO update's time goes: each Nature CNN layer's forward pass, kernel gradient
(dW) and input gradient (dX) on one minibatch, in the form the agents use (`networks.conv_valid`,
explicit gradients) and in two matmul forms tried as replacements:

* space-to-depth: a k×k stride-s convolution (k divisible by s) as a (k/s)×(k/s) stride-1
  convolution of the input with s×s blocks folded into channels (exact);
* shifted slices: the same, with the stride-1 convolution written as one matmul of the
  concatenated shifted slices (im2col without a patches convolution).

One PPO iteration of the `atari` preset (8 envs × 128 steps, 4 minibatches × 4 epochs) runs 16
minibatch steps of 256 frames through the shared torso, each a forward pass, dW of every layer and
dX of every layer but the first:

    python benchmarks/nature_cnn.py [--batch 256] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from common import RESULTS, load_note, machine, markdown_table, write_report

from jaxrl.networks import conv_valid

# (input [H, W, C], kernel [k, k, C, O], stride) of the Nature CNN's three convolutions.
LAYERS = (
    ((84, 84, 4), (8, 8, 4, 32), 4),
    ((20, 20, 32), (4, 4, 32, 64), 2),
    ((9, 9, 64), (3, 3, 64, 64), 1),
)


def folded(x: jax.Array, w: jax.Array, s: int) -> tuple[jax.Array, jax.Array]:
    """Input and kernel with s×s blocks folded into channels: a stride-1 convolution of them is
    the stride-s one (the rows the stride never reaches are cropped)."""
    b, h, width, c = x.shape
    k, o = w.shape[0], w.shape[-1]
    if s == 1:
        return x, w
    kk = k // s
    oh, ow = (h - k) // s + 1, (width - k) // s + 1
    hh, ww = s * (oh + kk - 1), s * (ow + kk - 1)
    x = x[:, :hh, :ww].reshape(b, hh // s, s, ww // s, s, c).transpose(0, 1, 3, 2, 4, 5)
    w = w.reshape(kk, s, kk, s, c, o).transpose(0, 2, 1, 3, 4, 5)
    return x.reshape(b, hh // s, ww // s, s * s * c), w.reshape(kk, kk, s * s * c, o)


def space_to_depth(x: jax.Array, w: jax.Array, s: int) -> jax.Array:
    return conv_valid(*folded(x, w, s), (1, 1))


def shifted_slices(x: jax.Array, w: jax.Array, s: int) -> jax.Array:
    x, w = folded(x, w, s)
    k, c, o = w.shape[0], w.shape[2], w.shape[3]
    oh, ow = x.shape[1] - k + 1, x.shape[2] - k + 1
    cols = jnp.concatenate([x[:, i : i + oh, j : j + ow] for i in range(k) for j in range(k)], -1)
    return (cols.reshape(-1, k * k * c) @ w.reshape(k * k * c, o)).reshape(x.shape[0], oh, ow, o)


FORMS: dict[str, Callable[[jax.Array, jax.Array, int], jax.Array]] = {
    "conv_valid (used)": lambda x, w, s: conv_valid(x, w, (s, s)),
    "space-to-depth": space_to_depth,
    "shifted slices": shifted_slices,
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
    before = os.getloadavg()[0]
    rng = np.random.default_rng(0)
    rows = []
    for x_shape, w_shape, stride in LAYERS:
        x = jnp.asarray(rng.standard_normal((args.batch, *x_shape)), jnp.float32)
        w = jnp.asarray(rng.standard_normal(w_shape) * 0.05, jnp.float32)
        reference = FORMS["conv_valid (used)"](x, w, stride)
        dy = jnp.ones_like(reference)
        for name, form in FORMS.items():
            error = float(jnp.abs(form(x, w, stride) - reference).max())
            times = layer_times(form, stride, (x, w, dy), args.repeats)
            print(w_shape, name, [f"{t:.1f}" for t in times], flush=True)
            rows.append(
                [f"{w_shape[0]}×{w_shape[1]}/{stride}, {x_shape[2]} → {w_shape[3]}", name]
                + [f"{t:,.1f}" for t in times]
                + [f"{error:.1e}"]
            )
    header = ["layer", "form", "forward ms", "dW ms", "dX ms", "max |Δ| vs conv_valid"]
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
