"""The convolution forms against hand-computed numbers and XLA's own convolution, and the per-CPU
choice of form: the margin rule, what is timed, and the plan kept on disk."""

from __future__ import annotations

import itertools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import autotune, conv_forms
from jaxrl.conv_forms import ConvPlan, candidate_forms, plan_for, planned_conv

DN = ("NHWC", "HWIO", "NHWC")


def _parts(plan: ConvPlan, x: jax.Array, w: jax.Array, strides: tuple[int, int], dy: jax.Array):
    y, vjp = jax.vjp(lambda x, w: planned_conv(x, w, strides, plan), x, w)
    dx, dw = vjp(dy)
    return y, dw, dx


@pytest.mark.parametrize("form", list(conv_forms.FORMS))
def test_every_form_gives_the_hand_computed_convolution(form: str):
    """A 4×4 image 0..15 and the 2×2 kernel [[1, 2], [3, 4]] at stride 2: each output sums one
    block, e.g. 0·1 + 1·2 + 4·3 + 5·4 = 34; with an all-ones output gradient, dW[p, q] sums the
    pixels at offset (p, q) of every block (0 + 2 + 8 + 10 = 20 for (0, 0)) and dX tiles the
    kernel, since the blocks do not overlap."""
    x = jnp.arange(16.0).reshape(1, 4, 4, 1)
    w = jnp.array([[1.0, 2.0], [3.0, 4.0]]).reshape(2, 2, 1, 1)
    y, dw, dx = _parts(ConvPlan(form, form, form), x, w, (2, 2), jnp.ones((1, 2, 2, 1)))
    np.testing.assert_allclose(y[0, :, :, 0], [[34, 54], [114, 134]])
    np.testing.assert_allclose(dw[:, :, 0, 0], [[20, 24], [36, 40]])
    np.testing.assert_allclose(dx[0, :, :, 0], np.tile([[1, 2], [3, 4]], (2, 2)))


@pytest.mark.parametrize(
    ("size", "kernel", "stride"), [(84, 8, 4), (20, 4, 2), (9, 3, 1), (23, 4, 2), (23, 4, 3)]
)
def test_forms_match_xla_convolution_and_its_derivative(size: int, kernel: int, stride: int):
    """Every form that applies, in every part, against JAX's own convolution and derivative,
    including sizes the stride does not divide (the unreached rows get a zero gradient) and a
    stride that does not divide the kernel (only `conv` applies)."""
    x = jax.random.normal(jax.random.key(0), (3, size, size + 1, 5))
    w = jax.random.normal(jax.random.key(1), (kernel, kernel, 5, 6))
    strides = (stride, stride)
    y, vjp = jax.vjp(
        lambda x, w: jax.lax.conv_general_dilated(x, w, strides, "VALID", dimension_numbers=DN),
        x,
        w,
    )
    dy = jax.random.normal(jax.random.key(2), y.shape)
    reference = (y, *vjp(dy)[::-1])
    forms = candidate_forms(w.shape, strides)
    assert len(forms) == (1 if kernel % stride else 2 if stride == 1 else 3)
    for plan in itertools.product(forms, repeat=3):
        for ours, xla in zip(_parts(ConvPlan(*plan), x, w, strides, dy), reference, strict=True):
            scale = float(jnp.abs(xla).max())
            np.testing.assert_allclose(ours, xla, rtol=1e-4, atol=1e-5 * scale, err_msg=str(plan))


def test_the_conv_form_forward_is_xla_convolution_bit_for_bit():
    x = jax.random.normal(jax.random.key(0), (2, 84, 84, 4))
    w = jax.random.normal(jax.random.key(1), (8, 8, 4, 32))
    reference = jax.lax.conv_general_dilated(x, w, (4, 4), "VALID", dimension_numbers=DN)
    np.testing.assert_array_equal(conv_forms.conv_valid(x, w, (4, 4)), reference)


def test_candidate_forms_need_equal_strides_that_divide_a_square_kernel():
    assert candidate_forms((8, 8, 4, 32), (4, 4)) == ("conv", "space_to_depth", "shifted_sums")
    assert candidate_forms((3, 3, 64, 64), (1, 1)) == ("conv", "shifted_sums")
    assert candidate_forms((4, 4, 1, 1), (3, 3)) == ("conv",)
    assert candidate_forms((4, 4, 1, 1), (2, 1)) == ("conv",)
    assert candidate_forms((4, 2, 1, 1), (2, 2)) == ("conv",)


def test_measure_plan_times_each_candidate_of_each_part(monkeypatch):
    """Each part gets its fastest form; a first layer's input gradient is not timed at all."""
    seconds = {
        ("conv", "forward"): 1.0,
        ("space_to_depth", "forward"): 0.95,  # within the margin: conv stays
        ("shifted_sums", "forward"): 0.99,
        ("conv", "kernel_grad"): 1.0,
        ("space_to_depth", "kernel_grad"): 1.2,
        ("shifted_sums", "kernel_grad"): 0.6,
        ("conv", "input_grad"): 1.0,
        ("space_to_depth", "input_grad"): 0.2,
        ("shifted_sums", "input_grad"): 0.5,
    }
    timed: list[tuple[str, str]] = []

    def fake_seconds(steps, args, perturbed, length):
        for step in steps.values():
            assert perturbed == (2 if step[1] == "input_grad" else 0)  # dX never reads x
            timed.append(step)
        return {form: seconds[step] for form, step in steps.items()}

    monkeypatch.setattr(conv_forms, "_part", lambda form, part, strides: (form, part))
    monkeypatch.setattr(autotune, "seconds_per_step", fake_seconds)
    shapes = ((2, 20, 20, 3), (4, 4, 3, 5), (2, 2), np.float32)
    plan = conv_forms.measure_plan(*shapes, input_grad=True)
    assert plan == ConvPlan("conv", "shifted_sums", "space_to_depth")
    assert sorted(timed) == sorted(seconds)
    timed.clear()
    assert conv_forms.measure_plan(*shapes, input_grad=False) == ConvPlan(
        "conv", "shifted_sums", "conv"
    )
    assert {part for _, part in timed} == {"forward", "kernel_grad"}


def test_plan_for_keeps_one_plan_per_shape_and_refuses_forms_that_do_not_apply(
    monkeypatch, xla_cache_dir
):
    measured: list[tuple] = []

    def fake_measure(x_shape, w_shape, strides, dtype, input_grad):
        measured.append((x_shape, input_grad))
        return ConvPlan("shifted_sums", "shifted_sums", "space_to_depth")

    monkeypatch.setattr(conv_forms, "measure_plan", fake_measure)
    monkeypatch.setattr(autotune, "_memory", {})
    args = ((32, 84, 84, 4), (8, 8, 4, 32), (4, 4), np.float32)
    plan = plan_for(*args, input_grad=False)
    assert plan == ConvPlan("shifted_sums", "shifted_sums", "space_to_depth")
    assert plan_for(*args, input_grad=False) == plan and len(measured) == 1
    stored = json.loads((xla_cache_dir / autotune.PLANS_FILE).read_text())
    (key,) = stored
    assert key == (
        f"{autotune.machine_key()} | conv | x [32, 84, 84, 4] | w [8, 8, 4, 32] | "
        "strides [4, 4] | float32 | no input gradient"
    )
    plan_for(*args, input_grad=True)  # another key: the input gradient is timed too
    assert measured[-1] == ((32, 84, 84, 4), True) and len(measured) == 2
    # A stored plan naming a form that does not apply (an edited file) is measured again.
    (xla_cache_dir / autotune.PLANS_FILE).write_text(json.dumps({key: {"forward": "fft"}}))
    monkeypatch.setattr(autotune, "_memory", {})
    assert plan_for(*args, input_grad=False) == plan and len(measured) == 3
    # Shapes with one candidate form are never timed.
    assert plan_for((1, 9, 9, 2), (4, 4, 2, 2), (3, 3), np.float32) == ConvPlan()
    assert len(measured) == 3
