"""Platform-specific speed-ups, in one place behind one switch: the environment variable
`JAXRL_SPEEDUPS` (`on`, the default, or `off`).

Each replaces a standard JAX/flax/optax form by an equivalent one that ran faster on XLA:CPU
(benchmarks/results/design_notes.md). `off` traces the standard forms everywhere: to compare, to
debug, or to use per-layer optax transforms (masks, per-module learning rates) that the flat
optimiser state rules out.

* `networks.Dense`: the weight gradient in the form timed faster on this machine, autodiff's or
  a plain matmul of a materialised xᵀ (`jaxrl.autotune`; CPU only, other platforms keep
  autodiff's form either way);
* `networks.NatureCNN`'s convolutions: explicit gradients, and on CPU each part (forward pass,
  kernel and input gradients) in the form measured fastest on this machine (`jaxrl.conv_forms`);
* `jaxrl.onpolicy`: the optimiser over one flat parameter vector instead of the parameter tree;
* programs that step host envs (`unrolled_threefry`): JAX's threefry hash lowered unrolled, as
  on GPU, instead of CPU's five-round loop, whose small kernels cost more per step than a
  CartPole step (benchmarks/results/host_bridge_xeon.md). Same bits either way.

`JAXRL_AUTOTUNE=off` keeps the speed-ups but takes every timed choice's standard form.

Read when a program is traced, so it takes effect for programs traced after it is set.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from jaxrl.config import ConfigError

SWITCH = "JAXRL_SPEEDUPS"
# Off, every operation takes its standard form instead of the one timed fastest on this machine
# (`jaxrl.autotune`): nothing timed, no plan read or written. A program is then the same on every
# machine of a CPU type whatever its timings: the test suite's setting (tests/conftest.py), since
# forms within timing noise of each other flip from one fresh cache to the next, and RL amplifies
# the last bit they change.
TIMING_SWITCH = "JAXRL_AUTOTUNE"
VALUES = ("on", "off")


def _switch(name: str) -> bool:
    value = os.environ.get(name, "on")
    if value not in VALUES:
        raise ConfigError(f"{name}={value!r} is not one of: {', '.join(VALUES)}")
    return value == "on"


def enabled() -> bool:
    """Whether the speed-ups are on; a value other than on/off is refused in one line."""
    return _switch(SWITCH)


def timing_enabled() -> bool:
    """Whether forms may be chosen by timing (`JAXRL_AUTOTUNE`); refused like `enabled`."""
    return _switch(TIMING_SWITCH)


# Programs lowered while this is above 0 take the unrolled threefry hash (`unrolled_threefry`).
# A process-wide count, not a thread-local one: the training loop lowers its chunk in a worker
# thread.
_unrolled_threefry_users = 0
_threefry_rule_installed = False


def _install_threefry_rule() -> bool:
    """Route CPU lowerings of JAX's threefry primitive through a rule that picks the unrolled
    form while `unrolled_threefry` is active. JAX keeps both forms in a private module; on a
    JAX without them nothing changes (False)."""
    global _threefry_rule_installed
    if _threefry_rule_installed:
        return True
    try:
        from jax._src.interpreters import mlir
        from jax._src.random import threefry2x32 as threefry
    except ImportError:
        return False
    unrolled = getattr(threefry, "_threefry2x32_lowering_rule", None)
    rolled = getattr(threefry, "_threefry2x32_cpu_lowering_rule", None)
    if unrolled is None or rolled is None:
        return False

    def rule(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        chosen = unrolled if _unrolled_threefry_users > 0 else rolled
        return chosen(ctx, *args, **kwargs)

    mlir.register_lowering(threefry.threefry2x32_p, rule, platform="cpu")
    _threefry_rule_installed = True
    return True


@contextlib.contextmanager
def unrolled_threefry(wanted: bool = True) -> Iterator[None]:
    """Programs lowered inside take threefry's unrolled form on CPU (with the speed-ups on and
    `wanted`): for programs whose steps are host calls, where each of the loop's kernels is a
    hand-off that costs more than the hash; JAX-native programs keep the loop, which ran them
    faster (benchmarks/results/threefry_forms.md). Draws the same numbers."""
    global _unrolled_threefry_users
    active = wanted and enabled() and _install_threefry_rule()
    _unrolled_threefry_users += active
    try:
        yield
    finally:
        _unrolled_threefry_users -= active
