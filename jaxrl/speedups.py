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

Read when a program is traced, so it takes effect for programs traced after it is set.
"""

from __future__ import annotations

import os

from jaxrl.config import ConfigError

SWITCH = "JAXRL_SPEEDUPS"
VALUES = ("on", "off")


def enabled() -> bool:
    """Whether the speed-ups are on; a value other than on/off is refused in one line."""
    value = os.environ.get(SWITCH, "on")
    if value not in VALUES:
        raise ConfigError(f"{SWITCH}={value!r} is not one of: {', '.join(VALUES)}")
    return value == "on"
