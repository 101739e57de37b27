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
* `jaxrl.onpolicy`: the optimiser over one flat parameter vector instead of the parameter tree.

`JAXRL_AUTOTUNE=off` keeps the speed-ups but takes every timed choice's standard form.

Read when a program is traced, so it takes effect for programs traced after it is set.
"""

from __future__ import annotations

import os

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
