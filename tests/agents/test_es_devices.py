"""ES population sharding: 4 forced CPU devices give the same update as 1 device.

Each device count needs its own process (XLA_FLAGS is read at JAX start-up); the runs are guarded
by a timeout because multi-device CPU runs have hung (docs/architecture.md, Training loop).
"""

from __future__ import annotations

import numpy as np
import pytest
from cli_helpers import script_result

SCRIPT = """
import json, jax, jax.numpy as jnp
import envs
from agents.es import ESConfig, make_es
from jaxrl.config import EnvConfig

env = envs.make(EnvConfig("CartPole-v1"))
agent = make_es(ESConfig(population_size=16, episodes_per_member=2, hidden_sizes=(16,)), env)
step = jax.jit(agent.train_step)
out = {"devices": jax.device_count()}
state = agent.init(jax.random.PRNGKey(0))
for g in range(2):
    state, _, metrics = step(state, None, jax.random.PRNGKey(10 + g))
out["theta"] = state.theta.tolist()
out["fitness_mean"] = float(metrics["fitness_mean"])
out["obs_count"] = float(state.obs_stats.count)
# Two seeds vmapped over the sharded generation (the case that hung before the lax.map init).
states = jax.lax.map(agent.init, jax.random.split(jax.random.PRNGKey(1), 2))  # see Trainer.init
states, _, _ = jax.jit(jax.vmap(agent.train_step, in_axes=(0, None, 0)))(
    states, None, jax.random.split(jax.random.PRNGKey(2), 2)
)
out["seeds_theta"] = states.theta.tolist()
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def one_and_four() -> tuple[dict, dict]:
    return script_result(SCRIPT, 1), script_result(SCRIPT, 4)


def test_four_devices_give_the_same_update_as_one(one_and_four) -> None:
    one, four = one_and_four
    assert (one["devices"], four["devices"]) == (1, 4)
    assert one["fitness_mean"] == four["fitness_mean"]
    assert one["obs_count"] == four["obs_count"]
    np.testing.assert_allclose(four["theta"], one["theta"], rtol=1e-5, atol=1e-6)


def test_vmapped_seeds_over_sharded_population(one_and_four) -> None:
    one, four = one_and_four
    np.testing.assert_allclose(four["seeds_theta"], one["seeds_theta"], rtol=1e-5, atol=1e-6)
    seeds = np.asarray(one["seeds_theta"])
    assert not np.allclose(seeds[0], seeds[1])
