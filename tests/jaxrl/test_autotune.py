"""Choosing forms by timing (`jaxrl.autotune`): the margin rule, the timing loop, the plans kept
on disk, and the Dense weight-gradient forms it chooses between."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import autotune, conv_forms, networks


def test_another_form_is_chosen_only_when_it_beats_the_standard_by_the_margin():
    assert autotune.MARGIN == 0.85
    assert autotune.choose({"conv": 1.0, "a": 0.9, "b": 0.86}, "conv") == "conv"
    assert autotune.choose({"conv": 1.0, "a": 0.85, "b": 0.9}, "conv") == "a"
    assert autotune.choose({"conv": 1.0, "a": 0.5, "b": 0.4}, "conv") == "b"
    assert autotune.choose({"conv": 0.2, "a": 0.5, "b": 0.4}, "conv") == "conv"


def test_seconds_per_step_runs_the_step_length_times_per_timing():
    """One warm-up and TIMING_REPEATS timed runs of a 7-step scan: 28 calls of the step, each
    on the perturbed input (so the work stays in the loop)."""
    calls: list[float] = []

    def step(x, y):
        jax.debug.callback(lambda v: calls.append(float(v)), x[0])
        return x * y

    x, y = np.ones(3, np.float32), np.full(3, 2.0, np.float32)
    seconds = autotune.seconds_per_step({"only": step}, (x, y), perturbed=0, length=7)
    assert len(calls) == (1 + autotune.TIMING_REPEATS) * 7
    assert set(seconds) == {"only"} and 0 < seconds["only"] < 0.1
    # The first step sees x itself; later ones x plus the previous result scaled to nothing.
    assert calls[0] == 1.0 and calls[1] == 1.0 + 2.0 * 1e-30


def test_a_plan_is_measured_once_per_machine_and_kept_beside_the_xla_cache(
    monkeypatch, xla_cache_dir
):
    measured: list[int] = []

    def measure() -> dict[str, str]:
        measured.append(1)
        return {"part": "fast"}

    forms = {"part": ("standard", "fast")}
    monkeypatch.setattr(autotune, "_memory", {})
    assert autotune.plan("op | x [2, 3]", forms, measure) == {"part": "fast"}
    assert autotune.plan("op | x [2, 3]", forms, measure) == {"part": "fast"}
    assert len(measured) == 1
    stored = json.loads((xla_cache_dir / autotune.PLANS_FILE).read_text())
    assert stored == {f"{autotune.machine_key()} | op | x [2, 3]": {"part": "fast"}}
    monkeypatch.setattr(autotune, "_memory", {})  # a new process reads the file
    assert autotune.plan("op | x [2, 3]", forms, measure) == {"part": "fast"}
    assert len(measured) == 1
    autotune.plan("op | x [4, 3]", forms, measure)  # another shape, another plan
    assert len(measured) == 2 and len(json.loads(autotune.plans_path().read_text())) == 2
    # A damaged file is measured again and rewritten.
    for damaged in ("{not json", "[1, 2]"):
        autotune.plans_path().write_text(damaged)
        monkeypatch.setattr(autotune, "_memory", {})
        assert autotune.plan("op | x [2, 3]", forms, measure) == {"part": "fast"}
        assert len(json.loads(autotune.plans_path().read_text())) == 1
    assert len(measured) == 4
    # So is a stored plan that names a form no longer allowed, or misses a part.
    for edited in ({"part": "removed"}, {}, {"part": "fast", "other": "fast"}):
        key = f"{autotune.machine_key()} | op | x [2, 3]"
        autotune.plans_path().write_text(json.dumps({key: edited}))
        monkeypatch.setattr(autotune, "_memory", {})
        assert autotune.plan("op | x [2, 3]", forms, measure) == {"part": "fast"}
    assert len(measured) == 7
    # Forgetting this machine's plans (the CLI's --forget) times them again, in this process too.
    assert autotune.forget() == 1 and json.loads(autotune.plans_path().read_text()) == {}
    assert autotune.plan("op | x [2, 3]", forms, measure) == {"part": "fast"}
    assert len(measured) == 8


def test_the_machine_key_names_the_cpu_threads_jax_and_xla_flags(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=1")
    key = autotune.machine_key()
    assert f"jax {jax.__version__}" in key and f"{__import__('os').cpu_count()} threads" in key
    assert key.endswith("XLA_FLAGS --xla_backend_optimization_level=1")
    monkeypatch.delenv("XLA_FLAGS")
    assert "XLA_FLAGS" not in autotune.machine_key()


ZEN5 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 26
model\t\t: 2
model name\t: AMD EPYC
flags\t\t: fpu sse2 avx fma avx2 avx512f avx512bw

processor\t: 1
cpu family\t: 26
model\t\t: 2
model name\t: AMD EPYC
flags\t\t: fpu sse2 avx fma avx2 avx512f avx512bw
"""


def test_the_cpu_model_tells_generations_that_share_a_name_apart():
    # Both report 'AMD EPYC' as the name: family, model and vector width separate them.
    assert autotune.cpu_model(ZEN5) == "AMD EPYC (family 26, model 2, AVX-512)"
    zen3 = ZEN5.replace("26", "25").replace("model\t\t: 2", "model\t\t: 1")
    zen3 = zen3.replace(" avx512f avx512bw", "")
    assert autotune.cpu_model(zen3) == "AMD EPYC (family 25, model 1, AVX2)"
    # An ARM CPU's /proc/cpuinfo has no model name or family; its features name the vectors.
    assert autotune.cpu_model("processor\t: 0\nFeatures\t: fp asimd\n").endswith(" (NEON)")


def test_plans_are_kept_in_the_cli_cache_when_no_xla_cache_is_set(monkeypatch, tmp_path):
    before = jax.config.jax_compilation_cache_dir
    monkeypatch.setenv("JAXRL_CACHE_DIR", str(tmp_path / "xla"))
    jax.config.update("jax_compilation_cache_dir", None)
    try:
        assert autotune.plans_path() == tmp_path / "xla" / autotune.PLANS_FILE
    finally:
        jax.config.update("jax_compilation_cache_dir", before)
    assert autotune.plans_path() == Path(before) / autotune.PLANS_FILE


def test_both_weight_gradient_forms_give_the_hand_computed_product():
    """x = [[1, 2], [3, 4]], g = [[1, 0], [1, 2]]: xᵀg = [[1 + 3, 6], [2 + 4, 8]]."""
    x = jnp.array([[1.0, 2.0], [3.0, 4.0]])
    g = jnp.array([[1.0, 0.0], [1.0, 2.0]])
    for form in networks.WEIGHT_GRAD_FORMS.values():
        np.testing.assert_array_equal(jax.jit(form)(x, g), [[4.0, 6.0], [6.0, 8.0]])


def test_dense_takes_the_weight_gradient_form_its_plan_names(monkeypatch, xla_cache_dir):
    """The timed-faster form is the one traced, keyed by the product's shapes; the gradient is
    the same either way."""
    seconds = {"plain": 1.0, "transposed": 0.5}
    timed: list[tuple[int, ...]] = []

    def fake_seconds(steps, args, perturbed, length):
        assert steps is networks.WEIGHT_GRAD_FORMS
        timed.append((args[0].shape, length))
        return dict(seconds)

    monkeypatch.setattr(autotune, "seconds_per_step", fake_seconds)
    monkeypatch.setattr(autotune, "_memory", {})
    assert networks.weight_grad_form((128, 64), (128, 32), np.float32) == "transposed"
    # 128·64·32 multiply-adds per step: the scan repeats it to about 2.5e8 (capped at 2,000).
    assert timed == [((128, 64), 953)]
    seconds["transposed"] = 0.9  # within the margin: autodiff's form stays
    assert networks.weight_grad_form((256, 3136), (256, 512), np.float32) == "plain"
    assert timed[-1] == ((256, 3136), 2)

    x = jax.random.normal(jax.random.key(0), (128, 64))
    w = jax.random.normal(jax.random.key(1), (64, 32))
    loss = lambda matmul: lambda w: jnp.sum(jnp.sin(matmul(x, w)))
    ours = jax.jit(jax.grad(loss(networks.batch_matmul)))(w)
    reference = jax.grad(loss(jnp.matmul))(w)
    np.testing.assert_allclose(ours, reference, rtol=1e-5, atol=1e-5)
    assert "optimization_barrier" in str(jax.make_jaxpr(jax.grad(loss(networks.batch_matmul)))(w))


def test_python_m_jaxrl_autotune_lists_this_machines_plans(monkeypatch, xla_cache_dir, capsys):
    monkeypatch.setattr(autotune, "_memory", {})
    autotune.plan("op | x [2, 3]", {"forward": ["fast"]}, lambda: {"forward": "fast"})
    plans = json.loads(autotune.plans_path().read_text())
    plans["another CPU | op | x [2, 3]"] = {"forward": "slow"}
    autotune.plans_path().write_text(json.dumps(plans))
    autotune.main([])
    assert capsys.readouterr().out.splitlines() == [
        f"{autotune.plans_path()}: 1 plans for {autotune.machine_key()} (1 more for other CPUs, "
        "jax versions or XLA_FLAGS)",
        "  op | x [2, 3]: forward fast",
    ]


def test_python_m_jaxrl_autotune_forget_drops_only_this_machines_plans(tmp_path):
    """Through the CLI: plans timed under load are dropped, so each form is timed again at its
    next use; other machines' plans stay."""
    cache = tmp_path / "xla"
    cache.mkdir()
    mine = f"{autotune.machine_key()} | op | x [2, 3]"
    other = "another CPU | op | x [2, 3]"
    (cache / autotune.PLANS_FILE).write_text(
        json.dumps({mine: {"forward": "fast"}, other: {"forward": "slow"}})
    )
    env = {**os.environ, "JAXRL_CACHE_DIR": str(cache)}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)

    def cli(*args: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-m", "jaxrl.autotune", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return done.stdout.splitlines()

    path = cache / autotune.PLANS_FILE
    assert cli("--forget") == [f"{path}: dropped 1 plans for {autotune.machine_key()}"]
    assert json.loads(path.read_text()) == {other: {"forward": "slow"}}
    assert cli() == [
        f"{path}: 0 plans for {autotune.machine_key()} (1 more for other CPUs, jax versions or "
        "XLA_FLAGS)"
    ]


def test_an_unwritable_cache_keeps_the_plan_in_memory_with_a_warning(monkeypatch, tmp_path):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("")  # the cache "directory" is a file: nothing can be written under it
    before = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir", str(blocker / "xla"))
    monkeypatch.setattr(autotune, "_memory", {})
    try:
        with pytest.warns(UserWarning, match=r"could not write .*not_a_dir/xla"):
            assert autotune.plan("op", {"forward": ["fast"]}, lambda: {"forward": "fast"}) == {
                "forward": "fast"
            }
        assert autotune.plan("op", {"forward": ["slow"]}, lambda: {"forward": "slow"}) == {
            "forward": "fast"
        }
    finally:
        jax.config.update("jax_compilation_cache_dir", before)


def test_switched_off_every_form_is_the_standard_one_and_nothing_is_timed(
    monkeypatch, xla_cache_dir
):
    """`JAXRL_AUTOTUNE=off` (the suite's setting): autodiff's weight gradient and the `conv`
    plan, no timing, no plans file."""

    def no_timing(*args, **kwargs):
        raise AssertionError("timed with the switch off")

    monkeypatch.setattr(autotune, "seconds_per_step", no_timing)
    monkeypatch.setattr(autotune, "_memory", {})
    monkeypatch.setenv("JAXRL_AUTOTUNE", "off")
    assert not autotune.available()
    assert networks.weight_grad_form((128, 64), (128, 32), np.float32) == "plain"
    plan = conv_forms.plan_for((3, 20, 20, 32), (4, 4, 32, 64), (2, 2), np.float32)
    assert plan == conv_forms.ConvPlan()
    assert not (xla_cache_dir / autotune.PLANS_FILE).exists()
    monkeypatch.setenv("JAXRL_AUTOTUNE", "on")
    assert autotune.available()


def test_operations_too_large_to_time_take_the_standard_form_untimed(monkeypatch, xla_cache_dir):
    """A timing makes its operands in host memory: PPO minibatches of 268M rows (128 GiB in
    float64) raised a MemoryError while tracing. Beyond 2^25 elements in an operand nothing is
    timed or stored; at the bound the operation is still timed."""
    timed: list[tuple[int, ...]] = []

    def fake_seconds(steps, args, perturbed, length):
        timed.append(args[0].shape)
        return {form: 1.0 for form in steps}

    monkeypatch.setattr(autotune, "seconds_per_step", fake_seconds)
    monkeypatch.setattr(autotune, "_memory", {})
    monkeypatch.setenv("JAXRL_AUTOTUNE", "on")
    rows = 2**25 // 64
    assert networks.weight_grad_form((2**28, 64), (2**28, 1), np.float32) == "plain"
    assert networks.weight_grad_form((rows + 1, 64), (rows + 1, 1), np.float32) == "plain"
    huge_frames = (2**25 // (84 * 84 * 4) + 1, 84, 84, 4)
    plan = conv_forms.plan_for(huge_frames, (8, 8, 4, 32), (4, 4), np.float32, input_grad=False)
    assert plan == conv_forms.ConvPlan()
    assert timed == [] and not (xla_cache_dir / autotune.PLANS_FILE).exists()
    assert networks.weight_grad_form((4, 64), (4, 1), np.float32) == "plain"
    assert timed == [(4, 64)]
    assert autotune.too_large_to_time((rows, 64)) is False


@pytest.mark.parametrize("switch", ["JAXRL_AUTOTUNE", "JAXRL_SPEEDUPS"])
def test_a_bad_switch_value_is_refused_in_one_line_before_any_work(switch, tmp_path):
    """Through the CLI: exit 2, one line naming the variable and the valid values, no run
    directory."""
    from cli_helpers import cli

    run_dir = tmp_path / "run"
    result = cli("agent=ppo", f"log.dir={run_dir}", extra_env={switch: "fast"})
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [f"error: {switch}='fast' is not one of: on, off"]
    assert not run_dir.exists()
