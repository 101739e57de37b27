"""DAgger (Ross, Gordon & Bagnell 2011, "A Reduction of Imitation Learning and Structured
Prediction to No-Regret Online Learning").

Iteration n rolls in with the mixture π_n = β_n·expert + (1 − β_n)·learner (per env step;
β_n = `mixture` decayed by `mixture_schedule`), labels every visited state with the expert's
action, aggregates the labels into one dataset (a replay buffer that keeps everything up to
`dataset_size`, then the newest) and fits the learner to the whole dataset by `loss`. The learner
is trained on from one iteration to the next rather than refitted from scratch (the paper's
no-regret argument holds for either; this is the usual practice). The driver and the learner are
`jaxrl.imitation`'s.
"""

from __future__ import annotations

import functools

import jax.numpy as jnp

from agents.configs import DAggerConfig
from jaxrl.datatypes import Agent, Key, Metrics
from jaxrl.env import Env
from jaxrl.imitation import (
    ImitationState,
    Method,
    Rollin,
    Setup,
    aggregate_and_fit,
    check_box_loss,
    empty_labels,
    expert_share,
    load_expert,
    make_imitation,
    mixture_acts,
)


def update(
    cfg: DAggerConfig, setup: Setup, state: ImitationState, record: Rollin, key: Key
) -> tuple[ImitationState, Metrics]:
    keep = jnp.ones_like(record.expert_acted)
    state, metrics = aggregate_and_fit(setup, cfg.loss, state, record, keep, key)
    return state, {**metrics, "mixture": expert_share(cfg, state.iteration)}


def make_dagger(cfg: DAggerConfig, env: Env) -> Agent:
    check_box_loss(cfg.loss, env.spec, cfg.name)
    expert = load_expert(cfg, env.spec)
    method = Method(
        expert_acts=functools.partial(mixture_acts, cfg),
        update=functools.partial(update, cfg),
        dataset=lambda setup: empty_labels(setup, cfg.dataset_size),
    )
    return make_imitation(cfg, env, method, expert)
