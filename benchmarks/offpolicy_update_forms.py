"""How close a SAC/TD3 update (256-256 networks, batch 256, Pendulum-v1) comes to this CPU's
matrix-product rate, and what the alternatives to its forms would cost: the bound that decides
how far any JAX peer can be outrun on one run of an update-per-step agent.

Forms, each timed as 1,000 updates on one fixed minibatch in one jitted scan (the best of
`--repeats`):

* `ensemble` (jaxrl's): the twin critics' parameters stacked and evaluated by one `vmap`
  (`jaxrl.continuous.Critics`), `networks.Dense` with its timed weight-gradient form;
* `one call per critic`: the same parameters, each critic applied on its own and the results
  stacked (what a library with two critic modules does);
* `speed-ups off`: `JAXRL_SPEEDUPS=off` while tracing (flax's own `Dense`).

XLA's FLOP count of one update over the matrix-product rate of the loop in `matmul_rate` gives
the least time the update's FLOPs can take here; the last column is that bound over the measured
time. TD3's count includes its delayed actor step in every update, though it runs in every
other one, so TD3's GFLOP/s and bound column overstate what it reaches; SAC's are exact.

    python benchmarks/offpolicy_update_forms.py [--repeats 5] [--out PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import jax
import jax.numpy as jnp
from common import (
    RESULTS,
    best_of,
    load_note,
    machine,
    markdown_table,
    pendulum_learner,
    write_report_if_quiet,
)

from jaxrl import continuous

DEFAULT_OUT = RESULTS / "offpolicy_update_forms.md"
HIDDEN = (256, 256)
BATCH = 256
UPDATES = 1000
QUIET_LOAD = 1.5
HEADER = ["agent", "form", "ms per update", "MFLOP per update", "GFLOP/s", "FLOP bound / time"]


def one_call_per_critic(self: continuous.Critics, params: Any, obs: Any, action: Any) -> Any:
    """`Critics.__call__` without the vmap: each critic's parameters sliced and applied alone."""
    return jnp.stack(
        [
            self.net.apply(jax.tree.map(lambda p, i=i: p[i], params), obs, action)
            for i in range(self.count)
        ]
    )


@contextlib.contextmanager
def form(name: str) -> Iterator[None]:
    """The tracing context of a form (see the module docstring)."""
    with contextlib.ExitStack() as stack:
        if name == "one call per critic":
            call = mock.patch.object(continuous.Critics, "__call__", one_call_per_critic)
            stack.enter_context(call)
        if name == "speed-ups off":
            stack.enter_context(mock.patch.dict(os.environ, {"JAXRL_SPEEDUPS": "off"}))
        yield


def update_time(agent: str, form_name: str, repeats: int) -> tuple[float, float]:
    """(seconds per update, XLA's FLOPs per update) of `agent` traced in form `form_name`."""
    with form(form_name):
        setup, _, state, _, batch = pendulum_learner(agent, HIDDEN, BATCH)
        learner = setup.learner
        key = jax.random.key(0)
        keys = jax.random.split(key, UPDATES)

        def updates(learner_state: Any) -> Any:
            def body(s: Any, k: jax.Array) -> tuple[Any, None]:
                return learner.update(s, batch, k)[0], None

            return jax.lax.scan(body, learner_state, keys)[0]

        compiled = jax.jit(updates).lower(state.learner).compile()
        one = jax.jit(learner.update).lower(state.learner, batch, key).compile()
    return best_of(compiled, state.learner, repeats=repeats) / UPDATES, one.cost_analysis()["flops"]


def matmul_rate(repeats: int) -> float:
    """FLOP/s of XLA:CPU on 256×256 by 256×256 products in a loop (a 256-256 layer at batch
    256: what the updates are made of)."""
    x = jax.random.normal(jax.random.key(1), (BATCH, 256))

    def loop(w: jax.Array) -> jax.Array:
        return jax.lax.scan(lambda w, _: (w + 1e-6 * (x.T @ (x @ w)), None), w, None, UPDATES)[0]

    w = jax.random.normal(jax.random.key(2), (256, 256))
    seconds = best_of(jax.jit(loop).lower(w).compile(), w, repeats=repeats)
    return UPDATES * 2 * 2 * BATCH * 256 * 256 / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    before = os.getloadavg()[0]
    peak = matmul_rate(args.repeats)
    rows = []
    for agent in ("sac", "td3"):
        for name in ("ensemble", "one call per critic", "speed-ups off"):
            seconds, flops = update_time(agent, name, args.repeats)
            rows.append(
                [
                    agent.upper(),
                    name,
                    f"{1000 * seconds:.3f}",
                    f"{flops / 1e6:.0f}",
                    f"{flops / seconds / 1e9:.0f}",
                    f"{flops / peak / seconds:.2f}",
                ]
            )
            print(" | ".join(rows[-1]), flush=True)
    after = os.getloadavg()[0]
    text = "\n\n".join(
        [
            "# SAC and TD3 updates against the CPU's matrix-product rate",
            f"`python benchmarks/offpolicy_update_forms.py --repeats {args.repeats}` on "
            f"{machine()}. Matrix products of a 256-256 layer at batch 256 in a loop: "
            f"**{peak / 1e9:.0f} GFLOP/s**. Forms and columns: the script's docstring.",
            markdown_table(HEADER, rows),
            load_note(before, after),
        ]
    )
    write_report_if_quiet(text + "\n", args.out, before, QUIET_LOAD)


if __name__ == "__main__":
    main()
