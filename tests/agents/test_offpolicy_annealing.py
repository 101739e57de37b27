"""`agent.anneal_lr` on the off-policy agents that share the deterministic and SAC learners (DQN,
P-DQN and HyAR have their own tests; DDPG is TD3's learner with a delay of 1): built as the CLI
builds them, each learning rate reaches 0 with the budget's last update, the actor's over its
own steps (one per `policy_delay`)."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from trees import tree_equal

import agents
import envs
from jaxrl.config import ConfigError, EnvConfig
from jaxrl.datatypes import PyTree
from jaxrl.deterministic import make_deterministic_learner
from jaxrl.offpolicy import graft_learner, num_updates
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


def _trained(tx: optax.GradientTransformation) -> tuple[dict, optax.OptState]:
    """Parameters and optimiser state after one update (Adam's count 1, its moments non-zero)."""
    params = {"w": jnp.arange(3.0)}
    opt_state = tx.init(params)
    updates, opt_state = tx.update({"w": jnp.array([1.0, 2.0, 3.0])}, opt_state, params)
    return optax.apply_updates(params, updates), opt_state


def _layout(tx: optax.GradientTransformation, params: dict) -> PyTree:
    """A fresh learner's (parameters, optimiser state), abstract, as `trained_init` sees it."""
    return jax.eval_shape(lambda p: (p, tx.init(p)), params)


def test_agent_init_from_grafts_a_learner_whether_or_not_either_anneals():
    """`agent.init_from`'s graft: a trained state laid onto a fresh learner's layout keeps every
    shared leaf (parameters, Adam's count and moments) and differs only in schedule counts — a
    run that anneals gets one at 0, one that does not drops it. Anything else that does not line
    up (another shape, another leaf) is refused, naming the first such leaf."""
    plain = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3))
    annealed = optax.chain(
        optax.clip_by_global_norm(1.0), optax.adam(optax.linear_schedule(1e-3, 0.0, 10))
    )
    for source, target in ((plain, annealed), (annealed, plain)):
        trained = _trained(source)
        fresh = _layout(target, trained[0])
        grafted = graft_learner(fresh, trained)
        assert jax.tree.structure(grafted) == jax.tree.structure(fresh)
        params, (_, (adam, schedule)) = grafted
        trained_params, (_, (trained_adam, _)) = trained
        assert tree_equal((params, adam), (trained_params, trained_adam))
        assert int(adam.count) == 1 and float(adam.mu["w"][2]) != 0.0
        # Annealed from here: the rate starts at 1e-3 (count 0); else no schedule state at all.
        counts = jax.tree.leaves(schedule)
        assert [np.asarray(c).tolist() for c in counts] == ([0] if target is annealed else [])

    params, opt_state = _trained(plain)
    wider = _layout(plain, {"w": jnp.zeros(4)})
    with pytest.raises(
        ValueError, match=re.escape("[0]['w'] is float32[3] there, float32[4] here")
    ):
        graft_learner(wider, (params, opt_state))
    with_bias = {**params, "b": jnp.zeros(())}
    with pytest.raises(ValueError, match=re.escape("this run has [0]['b'], which it has not")):
        graft_learner(_layout(plain, with_bias), (params, opt_state))
    with pytest.raises(ValueError, match=re.escape("it has [0]['b'], which this run has not")):
        graft_learner(_layout(plain, params), (with_bias, plain.init(with_bias)))
