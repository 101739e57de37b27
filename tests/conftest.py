"""Suite-wide settings.

* The persistent XLA cache is the CLI's own: a run of the same program (resume tests, repeated
  configs, a second suite run) loads its executable instead of compiling.
* XLA:CPU compiles at LLVM optimisation level 1 (`--xla_backend_optimization_level=1`, also in
  the CLI subprocesses the tests start): the suite compiles hundreds of small programs, and
  level 1 cuts their compile time by about a third with the same run time. Measured on an AMD
  EPYC: PPO CartPole 500k compile 6.1 → 5.1 s, run 5.3 s both, parameters bit-identical; SAC
  8.4 → 6.7 s, bit-identical; ES 7.0 → 4.9 s, parameters within 3e-8.
* On a GPU, float32 matrix products run at full precision: JAX's default there is TF32 (10-bit
  mantissa) on Ampere and Hopper, and the hand-computed comparisons are float32 to float32.
  XLA:CPU multiplies float32 in float32 whatever the setting, so the CPU programs are unchanged.
"""

from __future__ import annotations

import os
from typing import Any

os.environ["XLA_FLAGS"] = " ".join(
    (os.environ.get("XLA_FLAGS", ""), "--xla_backend_optimization_level=1")
).strip()

import jax
import pytest

from jaxrl.cli import enable_compilation_cache

enable_compilation_cache()
if jax.default_backend() != "cpu":
    jax.config.update("jax_default_matmul_precision", "highest")


@pytest.fixture(scope="session")
def pendulum_sac_expert(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The imitation tests' expert (learning.PENDULUM_SAC_EXPERT), which is also test_sac's
    learning run: one training serves both (about 50 s on 2 cores); the `RunResult`."""
    from learning import PENDULUM_SAC_EXPERT

    import jaxrl

    return jaxrl.train(*PENDULUM_SAC_EXPERT, run_dir=tmp_path_factory.mktemp("sac_expert"))
