"""Every agent's settings are checked without JAX (`agents/configs.py`, `jaxrl/agent_config.py`;
the CLI's refusals: `tests/jaxrl/test_startup.py`), and the names the checks accept are those
the machinery has."""

from __future__ import annotations

import os
import subprocess
import sys

from cli_helpers import REPO, pythonpath

HEAVY = ("jax", "flax", "optax", "chex")


def imported_heavy_modules(code: str, *args: str) -> list[str]:
    """The heavy modules a fresh process has imported after running `code` (its last line)."""
    probe = f"{code}\nimport sys; print([m for m in {HEAVY!r} if m in sys.modules])"
    out = subprocess.run(
        [sys.executable, "-c", probe, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": pythonpath()},
        timeout=120,
        check=True,
    )
    return eval(out.stdout.strip().splitlines()[-1])


def test_every_agents_config_builds_and_checks_without_jax() -> None:
    code = (
        "from agents import REGISTRY\n"
        "configs = [entry.config() for entry in REGISTRY.values()]\n"  # defaults, checked
        "assert len(configs) == len(REGISTRY) == 17, len(configs)"
    )
    assert imported_heavy_modules(code) == []


def test_the_names_the_checks_accept_are_the_machinerys() -> None:
    from agents.configs import FRAME_STORAGE_NAMES
    from agents.dqn import FRAME_STORAGE
    from jaxrl.agent_config import ACTIVATION_NAMES, KERNEL_INIT_NAMES
    from jaxrl.networks import ACTIVATIONS, KERNEL_INITS

    assert tuple(ACTIVATIONS) == ACTIVATION_NAMES
    assert tuple(KERNEL_INITS) == KERNEL_INIT_NAMES
    assert tuple(FRAME_STORAGE) == FRAME_STORAGE_NAMES
