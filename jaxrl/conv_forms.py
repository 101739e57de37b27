"""Equivalent forms of a VALID NHWC/HWIO convolution, and the per-CPU choice of one form for each
of its three parts: the forward pass, the kernel gradient (dW) and the input gradient (dX).

Why: on XLA:CPU the same convolution costs several times more in one form than in another, and
the fastest form depends on the layer's shape, on the part and on the CPU
(benchmarks/results/nature_cnn.md). Each part's form is chosen by timing the candidates once per
machine and shape (`jaxrl.autotune`); other backends and multi-process runs use `conv`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl import autotune
from jaxrl.datatypes import Array

_NHWC = ("NHWC", "HWIO", "NHWC")


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def conv_valid(x: Array, w: Array, strides: tuple[int, int]) -> Array:
    """A VALID NHWC/HWIO convolution whose gradients are written as plain forward convolutions.

    Why: XLA's CPU backend leaves the kernel-gradient convolution JAX derives in a non-canonical
    form inside loop bodies (`scan`, `while`), where it runs on a slow generic path, an order of
    magnitude slower than at the top level (benchmarks/results/design_notes.md). Every
    update of our agents runs inside a scan, so the gradient is given explicitly: the kernel
    gradient is the convolution of the input (channels as the batch) with the output gradient
    (dilated by the strides), the input gradient the strided-transpose convolution with the
    flipped kernel. Exact to float rounding; also faster at the top level.
    """
    return jax.lax.conv_general_dilated(x, w, strides, "VALID", dimension_numbers=_NHWC)


def _conv_valid_fwd(x: Array, w: Array, strides: tuple[int, int]):
    return conv_valid(x, w, strides), (x, w)


def _conv_valid_bwd(strides: tuple[int, int], residuals: tuple[Array, Array], dy: Array):
    x, w = residuals
    kh, kw = w.shape[:2]
    # dW[p, q, i, o] = Σ_{b,y,x} X[b, s·y + p, s·x + q, i] · dY[b, y, x, o]
    dw = jax.lax.conv_general_dilated(
        jnp.transpose(x, (3, 1, 2, 0)),  # [i, H, W, b]: input channels as the batch
        jnp.transpose(dy, (1, 2, 0, 3)),  # [y, x, b, o]: the output gradient as the kernel
        (1, 1),
        "VALID",
        rhs_dilation=strides,
        dimension_numbers=_NHWC,
    )
    dw = jnp.transpose(dw[:, :kh, :kw, :], (1, 2, 0, 3))
    # dX: dY dilated by the strides, padded by k − 1 (plus the rows the strides never reached),
    # convolved with the flipped kernel, its in/out channels swapped.
    pads = [
        (k - 1, k - 1 + size - ((n - 1) * s + k))
        for k, s, size, n in zip((kh, kw), strides, x.shape[1:3], dy.shape[1:3], strict=True)
    ]
    flipped = jnp.transpose(jnp.flip(w, (0, 1)), (0, 1, 3, 2))
    dx = jax.lax.conv_general_dilated(
        dy, flipped, (1, 1), pads, lhs_dilation=strides, dimension_numbers=_NHWC
    )
    return dx, dw


conv_valid.defvjp(_conv_valid_fwd, _conv_valid_bwd)


def _folded(x: Array, w: Array, stride: int) -> tuple[Array, Array]:
    """Input and kernel with stride×stride blocks folded into channels: their stride-1 convolution
    is the strided one (the rows and columns the stride never reaches are cropped first)."""
    if stride == 1:
        return x, w
    b, height, width, c = x.shape
    k, o = w.shape[0], w.shape[-1]
    kk = k // stride
    out_h, out_w = (height - k) // stride + 1, (width - k) // stride + 1
    hh, ww = stride * (out_h + kk - 1), stride * (out_w + kk - 1)
    x = x[:, :hh, :ww].reshape(b, hh // stride, stride, ww // stride, stride, c)
    x = x.transpose(0, 1, 3, 2, 4, 5).reshape(b, hh // stride, ww // stride, stride * stride * c)
    w = w.reshape(kk, stride, kk, stride, c, o).transpose(0, 2, 1, 3, 4, 5)
    return x, w.reshape(kk, kk, stride * stride * c, o)


def space_to_depth(x: Array, w: Array, strides: tuple[int, int]) -> Array:
    """The strided convolution as a stride-1 `conv_valid` of the folded input and kernel."""
    return conv_valid(*_folded(x, w, strides[0]), (1, 1))


def shifted_sums(x: Array, w: Array, strides: tuple[int, int]) -> Array:
    """The stride-1 convolution of the folded input as a sum of one matrix product per kernel
    offset, each of a shifted view of the input: no patch copies (im2col) and no convolution."""
    x, w = _folded(x, w, strides[0])
    k = w.shape[0]
    out_h, out_w = x.shape[1] - k + 1, x.shape[2] - k + 1
    out = None
    for i in range(k):
        for j in range(k):
            term = jnp.einsum("bhwc,co->bhwo", x[:, i : i + out_h, j : j + out_w], w[i, j])
            out = term if out is None else out + term
    return out


FORMS: dict[str, Callable[[Array, Array, tuple[int, int]], Array]] = {
    "conv": conv_valid,
    "space_to_depth": space_to_depth,
    "shifted_sums": shifted_sums,
}


class ConvPlan(NamedTuple):
    """The form (a key of FORMS) each part of one convolution is computed in."""

    forward: str = "conv"
    kernel_grad: str = "conv"
    input_grad: str = "conv"


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def planned_conv(x: Array, w: Array, strides: tuple[int, int], plan: ConvPlan) -> Array:
    """The convolution with each part in the form its plan names."""
    return FORMS[plan.forward](x, w, strides)


def _planned_conv_fwd(x: Array, w: Array, strides: tuple[int, int], plan: ConvPlan):
    return planned_conv(x, w, strides, plan), (x, w)


def _planned_conv_bwd(strides: tuple[int, int], plan: ConvPlan, residuals, dy: Array):
    x, w = residuals
    dw = jax.vjp(lambda w: FORMS[plan.kernel_grad](x, w, strides), w)[1](dy)[0]
    dx = jax.vjp(lambda x: FORMS[plan.input_grad](x, w, strides), x)[1](dy)[0]
    return dx, dw


planned_conv.defvjp(_planned_conv_fwd, _planned_conv_bwd)


def candidate_forms(kernel_shape: tuple[int, ...], strides: tuple[int, int]) -> tuple[str, ...]:
    """The forms that apply: folding needs equal strides that divide a square kernel, and at
    stride 1 space-to-depth is the plain convolution."""
    kh, kw = kernel_shape[:2]
    if strides[0] != strides[1] or kh != kw or kh % strides[0]:
        return ("conv",)
    if strides[0] == 1:
        return ("conv", "shifted_sums")
    return tuple(FORMS)


def _part(form: str, part: str, strides: tuple[int, int]) -> Callable[[Array, Array, Array], Array]:
    """One part of one form as a function of (x, w, dy)."""
    fn = FORMS[form]

    def run(x: Array, w: Array, dy: Array) -> Array:
        if part == "forward":
            return fn(x, w, strides)
        if part == "kernel_grad":
            return jax.vjp(lambda w: fn(x, w, strides), w)[1](dy)[0]
        return jax.vjp(lambda x: fn(x, w, strides), x)[1](dy)[0]

    return run


def measure_plan(
    x_shape: tuple[int, ...],
    w_shape: tuple[int, ...],
    strides: tuple[int, int],
    dtype: np.dtype,
    input_grad: bool,
) -> ConvPlan:
    """Time every candidate form of each part on random inputs of these shapes, in a two-step
    scan (a step is milliseconds at these sizes), and choose."""
    forms = candidate_forms(w_shape, strides)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = (rng.standard_normal(w_shape) * 0.05).astype(dtype)
    out_shape = jax.eval_shape(lambda x, w: conv_valid(x, w, strides), x, w).shape
    dy = rng.standard_normal(out_shape).astype(dtype)
    parts = ("forward", "kernel_grad") + (("input_grad",) if input_grad else ())
    chosen = {}
    for part in parts:
        perturbed = 2 if part == "input_grad" else 0  # an input the part reads
        steps = {form: _part(form, part, strides) for form in forms}
        seconds = autotune.seconds_per_step(steps, (x, w, dy), perturbed, 2)
        chosen[part] = autotune.choose(seconds, "conv")
    return ConvPlan(**chosen)


def plan_for(
    x_shape: tuple[int, ...],
    w_shape: tuple[int, ...],
    strides: tuple[int, int],
    dtype: np.dtype,
    input_grad: bool = True,
) -> ConvPlan:
    """This machine's plan for a convolution of these shapes (`jaxrl.autotune`).
    `input_grad=False` for a first layer, whose input gradient is never computed, skips timing
    it."""
    forms = candidate_forms(w_shape, strides)
    if len(forms) == 1 or not autotune.available() or autotune.too_large_to_time(x_shape):
        return ConvPlan()
    what = (
        f"conv | x {list(x_shape)} | w {list(w_shape)} | strides {list(strides)} | "
        f"{np.dtype(dtype).name}{'' if input_grad else ' | no input gradient'}"
    )
    chosen = autotune.plan(
        what,
        {part: forms for part in ConvPlan._fields},
        lambda: measure_plan(x_shape, w_shape, strides, dtype, input_grad)._asdict(),
    )
    return ConvPlan(**chosen)
