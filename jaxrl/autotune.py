"""Choosing among equivalent forms of an operation by timing them on this machine, once: the
convolution forms of `jaxrl.conv_forms` and the weight-gradient forms of `networks.batch_matmul`.

Why: on XLA:CPU the same operation costs up to several times more in one form than in another,
and which form wins depends on the shapes and on the CPU (benchmarks/results/nature_cnn.md,
design_notes.md): a choice written into the code from one machine's measurement is wrong on
another. As cuDNN autotunes on GPUs, each form is timed once per CPU model, shape and jax version,
and the choice is kept in `jaxrl_plans.json` in the XLA compilation cache directory, so every later
run on the machine reads it back and traces the same program (the forms agree to float rounding,
not bit for bit). Other backends, and runs over several processes (whose programs must agree),
take the standard form without timing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
import warnings
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl import speedups
from jaxrl.datatypes import Array

# Another form than the standard one is taken only when it is at least this much faster, so that
# timing noise between equally fast forms does not decide.
MARGIN = 0.85
TIMING_REPEATS = 3
PLANS_FILE = "jaxrl_plans.json"  # no XLA cache suffix: the cache's eviction leaves it alone
# /proc/cpuinfo flags, widest first: the vector width XLA:CPU and its kernels can use.
VECTOR_ISAS = (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX"), ("asimd", "NEON"))

# The most elements an operand of a timing may have: the timing makes its operands in host memory
# (a PPO minibatch of 268M rows would take 128 GiB), so larger operations take the standard form
# untimed.
MAX_TIMED_ELEMENTS = 2**25

_memory: dict[str, dict[str, str]] = {}


def available() -> bool:
    """Whether forms are chosen by timing: switched on (`speedups.timing_enabled`), on CPU, in a
    single-process run."""
    return speedups.timing_enabled() and jax.default_backend() == "cpu" and jax.process_count() == 1


def too_large_to_time(*shapes: tuple[int, ...]) -> bool:
    return max(math.prod(shape) for shape in shapes) > MAX_TIMED_ELEMENTS


def choose(seconds: dict[str, float], standard: str) -> str:
    """The fastest form, if it beats the standard one by the margin; the standard one otherwise."""
    fastest = min(seconds, key=seconds.__getitem__)
    return fastest if seconds[fastest] <= MARGIN * seconds[standard] else standard


def seconds_per_step(
    steps: dict[str, Callable[..., Array]],
    args: tuple[np.ndarray, ...],
    perturbed: int,
    length: int,
) -> dict[str, float]:
    """Seconds per call of each `step(*args)` inside a `length`-step scan, as agents run their
    updates (inside scans). Each step adds the previous result's first element (scaled to
    nothing) to `args[perturbed]` so that XLA cannot hoist the work out of the loop. All are
    compiled first, then timed in interleaved rounds (each once per round), so that load which
    comes and goes falls on every form alike; the best round of each counts. Inputs are NumPy
    arrays, so this runs eagerly even while a caller is traced."""

    def looped(step: Callable[..., Array]) -> Callable[..., Array]:
        def run(*args: Array) -> Array:
            def body(carry: Array, _) -> tuple[Array, None]:
                inputs = list(args)
                inputs[perturbed] = inputs[perturbed] + carry
                return step(*inputs).reshape(-1)[0] * 1e-30, None

            return jax.lax.scan(body, jnp.zeros((), args[0].dtype), None, length=length)[0]

        return run

    compiled = {name: jax.jit(looped(step)).lower(*args).compile() for name, step in steps.items()}
    for program in compiled.values():
        jax.block_until_ready(program(*args))
    best = dict.fromkeys(compiled, float("inf"))
    for _ in range(TIMING_REPEATS):
        for name, program in compiled.items():
            start = time.perf_counter()
            jax.block_until_ready(program(*args))
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: seconds / length for name, seconds in best.items()}


def cpu_model(cpuinfo: str | None = None) -> str:
    """The CPU's model name with its family, model number and widest vector instructions, e.g.
    'AMD EPYC (family 26, model 2, AVX-512)'. Why: virtual machines often report only 'AMD EPYC'
    or 'Intel Xeon' as the name, which covers CPU generations whose fastest forms and timings
    differ (an AVX-512 Zen 5 against an AVX2 Zen 3). `cpuinfo`: /proc/cpuinfo's text, read when
    None; where that file cannot be read, the platform's processor name alone."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return platform.processor() or platform.machine()
    fields: dict[str, str] = {}
    first_processor = cpuinfo.split("\n\n", 1)[0]  # every block repeats these fields
    for line in first_processor.splitlines():
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), value.strip())
    model = fields.get("model name") or platform.processor() or platform.machine()
    flags = set((fields.get("flags") or fields.get("Features", "")).split())  # x86, ARM
    isa = next((label for flag, label in VECTOR_ISAS if flag in flags), None)
    details = [
        f"{label} {fields[key]}"
        for key, label in (("cpu family", "family"), ("model", "model"))
        if key in fields
    ] + ([isa] if isa else [])
    return f"{model} ({', '.join(details)})" if details else model


def machine_key() -> str:
    """What decides the timings: the CPU model, its thread count, the compiler and its flags."""
    flags = os.environ.get("XLA_FLAGS", "").strip()
    return f"{cpu_model()}, {os.cpu_count()} threads, jax {jax.__version__}" + (
        f", XLA_FLAGS {flags}" if flags else ""
    )


def _machine_prefix() -> str:
    """What every key of this machine's plans starts with (the rest names the operation)."""
    return f"{machine_key()} | "


def default_cache_dir() -> Path:
    """The CLI's XLA compilation cache: `$JAXRL_CACHE_DIR`, else ~/.cache/jaxrl/xla."""
    return Path(os.environ.get("JAXRL_CACHE_DIR", Path.home() / ".cache" / "jaxrl" / "xla"))


def plans_path() -> Path:
    """In the XLA compilation cache in use, else in the CLI's (so that notebooks, which may set
    none, time each form once too)."""
    return Path(jax.config.jax_compilation_cache_dir or default_cache_dir()) / PLANS_FILE


def read_plans(path: Path) -> dict[str, dict[str, str]]:
    if not path.exists():
        return {}
    try:
        plans = json.loads(path.read_text())
    except (OSError, ValueError):  # a damaged file is timed again and rewritten
        return {}
    return plans if isinstance(plans, dict) else {}


def _write_plans(path: Path, plans: dict[str, dict[str, str]]) -> None:
    """Replace the file atomically: concurrent runs never see half a file. A directory that
    cannot be written (a read-only home) keeps the plans in this process only."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(plans, indent=1, sort_keys=True))
        os.replace(tmp, path)
    except OSError as e:
        warnings.warn(f"jaxrl.autotune: could not write {path} ({e})", stacklevel=3)


def _names_allowed_forms(stored: object, forms: Mapping[str, Collection[str]]) -> bool:
    return (
        isinstance(stored, dict)
        and set(stored) == set(forms)
        and all(stored[part] in allowed for part, allowed in forms.items())
    )


def plan(
    what: str, forms: Mapping[str, Collection[str]], measure: Callable[[], dict[str, str]]
) -> dict[str, str]:
    """This machine's plan (part name → form) for `what` (the operation and its shapes):
    remembered, read from disk, or measured and stored. `forms` names each part's allowed forms;
    a stored plan that does not choose one of them for every part (an edited file, a form since
    removed) is measured again."""
    key = _machine_prefix() + what
    if key not in _memory:
        path = plans_path()
        stored = read_plans(path).get(key)
        if _names_allowed_forms(stored, forms):
            _memory[key] = stored
        else:
            _memory[key] = measure()
            _write_plans(path, {**read_plans(path), key: _memory[key]})
    return _memory[key]


def forget() -> int:
    """Drop this machine's plans, so that each form is timed again at its next use (after a
    timing taken while other work loaded the CPU). Returns how many were dropped."""
    prefix = _machine_prefix()
    path = plans_path()
    plans = read_plans(path)
    kept = {k: v for k, v in plans.items() if not k.startswith(prefix)}
    if len(kept) < len(plans):
        _write_plans(path, kept)
    for key in [k for k in _memory if k.startswith(prefix)]:
        del _memory[key]
    return len(plans) - len(kept)


def main(argv: list[str] | None = None) -> None:
    """`python -m jaxrl.autotune`: the forms this machine has chosen, one line per shape;
    `--forget` drops them."""
    parser = argparse.ArgumentParser(prog="python -m jaxrl.autotune", description=main.__doc__)
    parser.add_argument(
        "--forget",
        action="store_true",
        help="drop this machine's plans: each form is timed again at its next use (do it on a "
        "quiet machine)",
    )
    if parser.parse_args(argv).forget:
        print(f"{plans_path()}: dropped {forget()} plans for {machine_key()}")
        return
    prefix = _machine_prefix()
    plans = read_plans(plans_path())
    mine = {k.removeprefix(prefix): v for k, v in plans.items() if k.startswith(prefix)}
    print(f"{plans_path()}: {len(mine)} plans for {machine_key()}", end="")
    others = len(plans) - len(mine)
    print(f" ({others} more for other CPUs, jax versions or XLA_FLAGS)" if others else "")
    for what, chosen in sorted(mine.items()):
        print(f"  {what}: {', '.join(f'{part} {form}' for part, form in chosen.items())}")


if __name__ == "__main__":
    main()
