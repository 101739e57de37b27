"""Equivalent forms of a VALID NHWC/HWIO convolution, and the per-CPU choice of one form for each
of its three parts: the forward pass, the kernel gradient (dW) and the input gradient (dX).

Why: on XLA:CPU the same convolution costs several times more in one form than in another, and
the fastest form depends on the layer's shape, on the part and on the CPU
(benchmarks/results/nature_cnn.md). As cuDNN autotunes on GPUs, each part's form is chosen by
timing the candidates once per CPU model, shape and jax version; the choice is kept on disk beside
the XLA compilation cache, so every later run on the machine traces the same program (the forms
agree to float rounding, not bit for bit). Other backends, and runs over several processes (whose
programs must agree), use the `conv` form without timing.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.datatypes import Array

_NHWC = ("NHWC", "HWIO", "NHWC")
# A form other than `conv` is taken only when it is at least this much faster, so that timing
# noise between equally fast forms does not decide.
MARGIN = 0.85
TIMING_REPEATS = 3
PLANS_FILE = "jaxrl_conv_plans.json"  # no XLA cache suffix: its eviction leaves it alone


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


def choose(seconds: dict[str, float]) -> str:
    """The fastest form, if it beats `conv` by the margin; `conv` otherwise."""
    fastest = min(seconds, key=seconds.__getitem__)
    return fastest if seconds[fastest] <= MARGIN * seconds["conv"] else "conv"


def _part(form: str, part: str, strides: tuple[int, int]) -> Callable[[Array, Array, Array], Array]:
    """One part of one form as a function of (x, w, dy), repeated in a two-step scan as agents
    run it (inside their update scans); each step perturbs an input by the previous result so
    that XLA cannot hoist the work out of the loop."""
    fn = FORMS[form]

    def once(x: Array, w: Array, dy: Array) -> Array:
        if part == "forward":
            return fn(x, w, strides)
        if part == "kernel_grad":
            return jax.vjp(lambda w: fn(x, w, strides), w)[1](dy)[0]
        return jax.vjp(lambda x: fn(x, w, strides), x)[1](dy)[0]

    def looped(x: Array, w: Array, dy: Array) -> Array:
        def step(carry: Array, _) -> tuple[Array, None]:
            out = once(x, w, dy + carry) if part == "input_grad" else once(x + carry, w, dy)
            return out.reshape(-1)[0] * 1e-30, None

        return jax.lax.scan(step, jnp.zeros((), x.dtype), None, length=2)[0]

    return looped


def _seconds(fn: Callable, args: tuple[np.ndarray, ...]) -> float:
    compiled = jax.jit(fn).lower(*args).compile()
    jax.block_until_ready(compiled(*args))
    best = float("inf")
    for _ in range(TIMING_REPEATS):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        best = min(best, time.perf_counter() - start)
    return best


def measure_plan(
    x_shape: tuple[int, ...],
    w_shape: tuple[int, ...],
    strides: tuple[int, int],
    dtype: np.dtype,
    input_grad: bool,
) -> ConvPlan:
    """Time every candidate form of each part on random inputs of these shapes and choose.
    Inputs are NumPy arrays, so this runs (eagerly) even while a caller is being traced."""
    forms = candidate_forms(w_shape, strides)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = (rng.standard_normal(w_shape) * 0.05).astype(dtype)
    out_shape = jax.eval_shape(lambda x, w: conv_valid(x, w, strides), x, w).shape
    dy = rng.standard_normal(out_shape).astype(dtype)
    parts = ("forward", "kernel_grad") + (("input_grad",) if input_grad else ())
    chosen = {
        part: choose({form: _seconds(_part(form, part, strides), (x, w, dy)) for form in forms})
        for part in parts
    }
    return ConvPlan(**chosen)


def machine_key() -> str:
    """What decides the timings: the CPU model, its thread count, the compiler and its flags."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.partition(":")[2].strip()
                break
    except OSError:
        pass
    flags = os.environ.get("XLA_FLAGS", "").strip()
    return f"{model}, {os.cpu_count()} threads, jax {jax.__version__}" + (
        f", XLA_FLAGS {flags}" if flags else ""
    )


def default_cache_dir() -> Path:
    """The CLI's XLA compilation cache: `$JAXRL_CACHE_DIR`, else ~/.cache/jaxrl/xla."""
    return Path(os.environ.get("JAXRL_CACHE_DIR", Path.home() / ".cache" / "jaxrl" / "xla"))


def plans_path() -> Path:
    """In the XLA compilation cache in use, else in the CLI's (notebooks that set none measure
    once too)."""
    return Path(jax.config.jax_compilation_cache_dir or default_cache_dir()) / PLANS_FILE


def _read_plans(path: Path) -> dict[str, dict[str, str]]:
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):  # a damaged file is measured again and rewritten
        return {}


def _write_plan(path: Path, key: str, plan: ConvPlan) -> None:
    """Merge into the file and replace it atomically: concurrent runs never see half a file."""
    plans = _read_plans(path)
    plans[key] = plan._asdict()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(plans, indent=1, sort_keys=True))
    os.replace(tmp, path)


_memory: dict[str, ConvPlan] = {}


def plan_for(
    x_shape: tuple[int, ...],
    w_shape: tuple[int, ...],
    strides: tuple[int, int],
    dtype: np.dtype,
    input_grad: bool = True,
) -> ConvPlan:
    """This machine's plan for a convolution of these shapes: remembered, read from disk, or
    measured and stored. `input_grad=False` for a first layer, whose input gradient is never
    computed, skips timing it."""
    forms = candidate_forms(w_shape, strides)
    if len(forms) == 1 or jax.default_backend() != "cpu" or jax.process_count() > 1:
        return ConvPlan()
    key = (
        f"{machine_key()} | x {list(x_shape)} | w {list(w_shape)} | strides {list(strides)} | "
        f"{np.dtype(dtype).name}{'' if input_grad else ' | no input gradient'}"
    )
    if key not in _memory:
        path = plans_path()
        stored = _read_plans(path).get(key)
        if stored is not None and set(stored.values()) <= set(forms):
            _memory[key] = ConvPlan(**stored)
        else:
            _memory[key] = measure_plan(x_shape, w_shape, strides, np.dtype(dtype), input_grad)
            _write_plan(path, key, _memory[key])
    return _memory[key]
