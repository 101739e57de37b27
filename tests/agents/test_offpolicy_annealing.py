"""`agent.anneal_lr` on the off-policy agents that share the deterministic and SAC learners (DQN,
P-DQN and HyAR have their own tests; DDPG is TD3's learner with a delay of 1): built as the CLI
builds them, each learning rate reaches 0 with the budget's last update, the actor's over its
own steps (one per `policy_delay`)."""

from __future__ import annotations

import jax
import pytest
from trees import tree_equal

import agents
import envs
from jaxrl.config import ConfigError, EnvConfig
from jaxrl.deterministic import make_deterministic_learner
from jaxrl.offpolicy import num_updates
from jaxrl.prng import make_key

# One env: a round is one step; the first update comes after step 16. A 64-step budget in
# 32-step iterations is rounds 16 to 64: 49 updates, 17 in the first iteration.
SCHEDULE = {
    "learning_starts": 16,
    "batch_size": 8,
    "buffer_size": 100,
    "iteration_steps": 32,
    "hidden_sizes": (8,),
    "anneal_lr": True,
}
BUDGET = 64


@pytest.mark.parametrize(
    "name, env_id, networks",
    [
        ("td3", "Pendulum-v1", ("actor_params", "critic_params")),
        ("sac", "Pendulum-v1", ("actor_params", "critic_params", "log_alpha")),
        ("paddpg", "Platform-v0", ("actor_params", "critic_params")),
    ],
)
def test_every_learning_rate_reaches_zero_with_the_budgets_last_update(name, env_id, networks):
    """The second iteration (updates 18 to 49) still moves every network, so none was 0 early;
    a third, past the budget, moves none. TD3's actor steps on every second update: its 24
    steps are its horizon, else it would stop halfway through the critic's."""
    entry = agents.REGISTRY[name]
    cfg = entry.config(**SCHEDULE)
    assert num_updates(cfg, 1, BUDGET) == 49
    env = envs.make(EnvConfig(env_id), num_envs=1)
    agent = entry.build(cfg, env, BUDGET)
    step = jax.jit(agent.train_step)
    state, env_state = agent.init(make_key(0)), env.reset(make_key(1))
    state, env_state, _ = step(state, env_state, make_key(2))
    at_budget, env_state, _ = step(state, env_state, make_key(3))
    later, _, _ = step(at_budget, env_state, make_key(4))
    for network in networks:
        first, last = getattr(state.learner, network), getattr(at_budget.learner, network)
        assert not tree_equal(first, last), network
        assert tree_equal(getattr(later.learner, network), last), network


def test_annealing_without_a_budget_is_refused():
    """A learner built outside a run (ERL's, a script's) has no horizon to anneal over."""
    cfg = agents.REGISTRY["td3"].config(anneal_lr=True)
    spec = envs.make(EnvConfig("Pendulum-v1")).spec
    with pytest.raises(ConfigError, match=r"agent\.anneal_lr=true needs the run's budget"):
        make_deterministic_learner(cfg, spec)
