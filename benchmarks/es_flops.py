"""ES on CartPole-v1 against the FLOP bound of its policy network on this CPU: what fraction of
the arithmetic this machine can do goes into the policy while ES trains.

Three measurements in one process, each compiled once and timed best of `--repeats`:

* the CPU's reachable dense rate: one 2048 x 2048 x 2048 float32 matrix product under `jax.jit`
  (2n³ FLOPs), the most a single XLA:CPU product reaches here;
* the policy alone in ES's shape: jaxrl's 64-64 tanh MLP (`jaxrl.networks.MLP`, 4 inputs, 2
  logits) on each of the 64 members' own parameters, 5 episodes each, for 500 steps in a
  `lax.scan` with no env (each step's input depends on the last step's output, so nothing is
  hoisted): the ceiling of a generation's forward passes in this shape, without env, noise or
  update;
* ES training itself: es_cartpole.py's 1-seed row (`python -m jaxrl.run agent=es
  env=CartPole-v1 budget.env_steps=2e6 eval.every=1`: the same population, episodes and
  network), env steps computed per second of run time (steps in batches whose other episodes are
  still running count: the network runs on them).

FLOPs per policy step: 2 x (4·64 + 64·64 + 64·2) = 8,960 (multiply and add per weight; biases
and tanh left out), so the policy's share of the training rate is 8,960 x computed env steps/s.

    python benchmarks/es_flops.py [--repeats 5] [--out PATH]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
from common import RESULTS, best_of, load_note, machine, markdown_table, write_report
from es_cartpole import Row, run_cli

from jaxrl.networks import MLP

DEFAULT_OUT = RESULTS / "es_flops.md"
OBS, HIDDEN, LOGITS = 4, (64, 64), 2
MEMBERS, EPISODES, STEPS = 64, 5, 500
POLICY_FLOPS = 2 * (OBS * HIDDEN[0] + HIDDEN[0] * HIDDEN[1] + HIDDEN[1] * LOGITS)
MATMUL_N = 2048


def dense_gflops(repeats: int) -> float:
    a = jax.random.normal(jax.random.key(0), (MATMUL_N, MATMUL_N), jnp.float32)
    b = jax.random.normal(jax.random.key(1), (MATMUL_N, MATMUL_N), jnp.float32)
    seconds = best_of(jax.jit(jnp.matmul).lower(a, b).compile(), a, b, repeats=repeats)
    return 2 * MATMUL_N**3 / seconds / 1e9


def policy_alone(repeats: int) -> tuple[float, float]:
    """(GFLOP/s, policy steps/s) of the members' forward passes in a scan."""
    net = MLP(HIDDEN, LOGITS)
    keys = jax.random.split(jax.random.key(0), MEMBERS)
    params = jax.vmap(lambda k: net.init(k, jnp.zeros((OBS,))))(keys)
    obs = jax.random.normal(jax.random.key(1), (MEMBERS, EPISODES, OBS))

    @jax.jit
    def rollout(params, obs):
        def step(x, _):
            logits = jax.vmap(net.apply)(params, x)
            return x + 1e-3 * logits.sum(-1, keepdims=True), None

        return jax.lax.scan(step, obs, None, length=STEPS)[0]

    seconds = best_of(rollout.lower(params, obs).compile(), params, obs, repeats=repeats)
    steps_per_s = MEMBERS * EPISODES * STEPS / seconds
    return POLICY_FLOPS * steps_per_s / 1e9, steps_per_s


def es_training(workdir: Path) -> Row:
    """es_cartpole.py's 1-seed row: 2M env steps, an evaluation every generation."""
    return run_cli("es", 1, workdir / "cache", workdir, 2e6, eval_every=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    peak = dense_gflops(args.repeats)
    alone, alone_steps = policy_alone(args.repeats)
    with tempfile.TemporaryDirectory(prefix="jaxrl-bench-es-flops-") as tmp:
        row = es_training(Path(tmp))
    load_after = os.getloadavg()[0]
    computed, counted = row.computed_steps_per_s, row.steps_per_s
    training = POLICY_FLOPS * computed / 1e9

    header = ["what", "policy steps/s", "GFLOP/s", "of the dense rate", "of the policy alone"]
    rows = [
        [f"dense {MATMUL_N}³ float32 product", "—", f"{peak:.1f}", "100%", "—"],
        [
            f"policy alone: {MEMBERS} members × {EPISODES} episodes, {STEPS}-step scan",
            f"{alone_steps:,.0f}",
            f"{alone:.2f}",
            f"{alone / peak:.1%}",
            "100%",
        ],
        [
            f"ES training, CartPole-v1, 2M env steps (computed steps; counted: {counted:,.0f}/s)",
            f"{computed:,.0f}",
            f"{training:.2f}",
            f"{training / peak:.1%}",
            f"{training / alone:.1%}",
        ],
    ]
    text = (
        "# ES against the FLOP bound of its policy on this CPU\n\n"
        f"`python benchmarks/es_flops.py --repeats {args.repeats}` on {machine()}\n\n"
        + markdown_table(header, rows)
        + f"\n\nFLOPs per policy step: {POLICY_FLOPS:,} (2 per weight of the 4-64-64-2 MLP). "
        "The dense rate is what one large product reaches; the policy's products are "
        f"[{EPISODES}, 64] × [64, 64] per member, far too small to reach it, so 'policy alone' "
        "is the practical ceiling of ES's forward passes in this shape, and the last column says "
        "how close training (env, noise, fitness shaping, update and evaluations included) comes "
        f"to it. {load_note(load_before, load_after)}\n"
    )
    write_report(text, args.out)


if __name__ == "__main__":
    main()
