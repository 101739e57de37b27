"""ERL's population split over 4 forced CPU devices (`agents/erl.py: split_episodes`): each row
of the gathered block is the episode of the member it belongs to, and seeds vmap over it.

XLA_FLAGS is read at JAX start-up, so the check runs in a process of its own, under a timeout.
"""

from __future__ import annotations

from cli_helpers import script_result

SCRIPT = """
import json, jax, jax.numpy as jnp, numpy as np
import envs
from agents.erl import ERLConfig, erl_setup, make_erl, split_episodes
from jaxrl.config import EnvConfig
from jaxrl.prng import make_key

cfg = ERLConfig(population_size=4, episodes_per_member=2, rl_episodes=1, buffer_size=20_000,
                batch_size=32, learning_starts=64, updates_per_step=0.02, hidden_sizes=(16, 16))
env = envs.make(EnvConfig("Pendulum-v1"))
setup = erl_setup(cfg, env)
agent = make_erl(cfg, env)
state = jax.jit(agent.init)(make_key(0))
ep = jax.jit(lambda s, k: split_episodes(setup, s, k))(state, make_key(1))
out = {"devices": jax.device_count(), "axis": setup.axis.size, "mismatch": 0.0}
valid = np.asarray(ep.valid)
out["lengths_agree"] = bool((valid.sum(0) == np.asarray(ep.lengths)).all())
rewards = np.where(valid, np.asarray(ep.staged.reward), 0.0).sum(0)
out["returns_agree"] = bool(np.allclose(rewards, np.asarray(ep.returns), rtol=1e-5))
for row in range(cfg.population_size * cfg.episodes_per_member):
    member = jax.tree.map(lambda x: x[row // cfg.episodes_per_member], state.population)
    obs = ep.staged.obs[:, row]
    acted = setup.learner.act(state.learner._replace(actor_params=member), obs, make_key(2), True)
    gap = np.abs(np.asarray(acted) - np.asarray(ep.staged.action[:, row]))[valid[:, row]]
    out["mismatch"] = max(out["mismatch"], float(gap.max()))
out["rows"] = int(valid.shape[1])
# Two seeds vmapped over the split generation, as the Trainer runs num_seeds=2.
states = jax.lax.map(agent.init, jax.random.split(make_key(3), 2))
states, _, metrics = jax.jit(jax.vmap(agent.train_step, in_axes=(0, None, 0)))(
    states, None, jax.random.split(make_key(4), 2)
)
out["seed_buffer_sizes"] = np.asarray(states.buffer.size).tolist()
out["seed_env_steps"] = np.asarray(metrics["env_steps"]).tolist()
print("RESULT " + json.dumps(out))
"""


def test_split_rows_are_their_members_episodes() -> None:
    """4 members x 2 episodes on 4 devices, then the learner's episode: 9 rows, each row's
    actions are its member's deterministic actions on the row's observations (so the gathered
    block keeps the one-batch row order the fitness reads), each row's return is the sum of its
    staged rewards and its length the count of its valid steps; two vmapped seeds add exactly
    their episodes' steps to their buffers (Pendulum: 200 steps each)."""
    out = script_result(SCRIPT, 4, timeout=300)
    assert (out["devices"], out["axis"], out["rows"]) == (4, 4, 9)
    assert out["lengths_agree"] and out["returns_agree"]
    assert out["mismatch"] < 1e-6
    assert out["seed_buffer_sizes"] == [9 * 200, 9 * 200]
    assert out["seed_env_steps"] == [9 * 200, 9 * 200]
