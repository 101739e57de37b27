"""Behaviour cloning: supervised learning on `expert_episodes` whole episodes of the expert.

The expert acts until its episodes are complete (env i of the batch contributes its episodes
i, i + num_envs, ... of the dataset) and every step it takes is labelled with its own action;
after that the learner acts and nothing more is stored. Every iteration fits the dataset by
`loss` (`jaxrl.imitation.supervised_loss`): the run's budget sets how long, its dataset stays
`expert_episodes` episodes. The driver and the learner are `jaxrl.imitation`'s.
"""

from __future__ import annotations

import functools

import jax.numpy as jnp

from agents.configs import BCConfig
from jaxrl.datatypes import Agent, Array, Key, Metrics
from jaxrl.env import Env
from jaxrl.imitation import (
    ImitationState,
    Method,
    Rollin,
    Setup,
    aggregate_and_fit,
    check_box_loss,
    empty_labels,
    load_expert,
    make_imitation,
)


def expert_acts(cfg: BCConfig, setup: Setup, state: ImitationState, key: Key) -> Array:
    """True in the envs whose current episode is one of the dataset's."""
    num_envs = setup.env.spec.num_envs
    return jnp.arange(num_envs) + num_envs * state.env_episodes < cfg.expert_episodes


def update(
    cfg: BCConfig, setup: Setup, state: ImitationState, record: Rollin, key: Key
) -> tuple[ImitationState, Metrics]:
    return aggregate_and_fit(setup, cfg.loss, state, record, record.expert_acted, key)


def make_bc(cfg: BCConfig, env: Env) -> Agent:
    check_box_loss(cfg.loss, env.spec, cfg.name)
    expert = load_expert(cfg, env.spec)
    capacity = cfg.expert_episodes * env.spec.max_episode_steps
    method = Method(
        expert_acts=functools.partial(expert_acts, cfg),
        update=functools.partial(update, cfg),
        dataset=lambda setup: empty_labels(setup, capacity),
    )
    return make_imitation(cfg, env, method, expert)
