"""How a learning test judges a run: several seeds trained in one program, never one seed.

XLA:CPU rounds differently on AMD EPYC and Intel Xeon machines and RL amplifies the last bit
(a test passing on one failed on the other), so a learning test trains `num_seeds` seeds in one
compiled program and asserts the mean over seeds of a return, against a threshold well below
what was measured. Each test's docstring gives the per-seed values measured and the machine.
"""

from __future__ import annotations

import numpy as np


def seed_values(summary: dict, key: str = "final_eval_return") -> np.ndarray:
    """`key` of every seed's row of a run's summary."""
    return np.array([row[key] for row in summary["runs"]], dtype=np.float64)


def assert_mean_at_least(summary: dict, threshold: float, key: str = "final_eval_return") -> None:
    """The mean over seeds of `key` reaches `threshold`; the message lists every seed."""
    values = seed_values(summary, key)
    assert len(values) >= 2, f"a learning test trains several seeds, got {len(values)}"
    assert values.mean() >= threshold, (
        f"mean {key} over seeds {values.mean():.1f} < {threshold}: per seed {values.tolist()}"
    )
