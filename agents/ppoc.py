"""Proximal Policy Option-Critic (PPOC; Klissarov, Bacon, Harb & Precup 2017, "Learnings Options
End-to-End for Continuous Action Tasks"): option-critic whose intra-option policies are trained
by PPO, with a softmax policy over options and the option-critic termination gradient.

The rollout, GAE, minibatch epochs, normalisations and truncation bootstrapping are
`jaxrl.onpolicy`'s; this module is the network, how it acts, and the loss. The running option is
the policy's memory (`onpolicy.PolicyModel`): each env carries it from step to step, and an
episode starts without one (`NO_OPTION`). At every state s the option that arrived from the step
before ends with probability β_ω(s); if it ended (or none arrived) π_Ω(·|s) draws the next one,
which picks the action from its Gaussian (or softmax, for Discrete actions) policy.

The network follows the authors' mlp_policy.py (github.com/mklissa/PPOC, commit 74daf96): a
policy torso with each option's action head (and a state-independent log-std per option), a value
torso with Q_Ω(s, ·), and the termination head (on the value torso's features) and the policy
over options (on the policy torso's) each behind a stopped gradient, so that only their own
losses move them. Per sample of the rollout, at s_t with the option ω_t that acted:

* PPO's clipped surrogate on π_{ω_t}(a_t|s_t) with the GAE advantage of Q_Ω(s_t, ω_t), whose
  successor value is U(s′, ω) = (1 − β_ω(s′)) Q_Ω(s′, ω) + β_ω(s′) V_Ω(s′) with
  V_Ω(s) = Σ_ω̄ π_Ω(ω̄|s) Q_Ω(s, ω̄) (a truncated step bootstraps from its final observation, a
  terminated one from nothing); the (clipped) value loss on Q_Ω(s_t, ω_t) and an entropy bonus;
* the policy over options' clipped surrogate on π_Ω(ω_t|s_t) with the advantage
  G_t − V_Ω(s_t) (G_t the value target, the λ-return of Q_Ω(s_t, ω_t)), at every state rather
  than only where ω_t was drawn (as the authors' code: a choice is rare once options last, and
  the memoryless evaluation asks π_Ω at every state), and an entropy bonus `option_ent_coef`;
* where an option ω arrived in s_t, the termination gradient of option-critic at that state,
  β_ω(s_t) (Q_Ω(s_t, ω) − V_Ω(s_t) + ξ), lowering β where ω is still better than the policy over
  options' average or where switching costs the deliberation cost ξ.

Evaluation runs the options (`Agent.act_with_memory`, `onpolicy.PolicyModel.evaluate`): each
runs until it ends (β drawn), π_Ω's most likely option takes over, and the running option's
mean (greedy) action is taken. `act` (what `jaxrl.load` and videos run) has no memory: at each
state the option most likely under π_Ω and its mean action.

Departures from the authors' code: U(s′, ω) with the expected termination as the successor
value (theirs: Q_Ω of the option drawn at s′), the termination gradient at the state the option
arrives in (theirs: at the state it acted in), one Adam and learning rate for every head (theirs:
5e-7 for the terminations), ξ only in the termination advantage (theirs also takes it off the
reward at each switch and divides rewards by 10; here the return normalisation scales them),
and minibatches mixing the options (theirs: one option's samples per minibatch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp

from agents.configs import PPOCConfig
from jaxrl.datatypes import Agent, Array, Key
from jaxrl.distributions import Distribution
from jaxrl.env import Env
from jaxrl.networks import (
    ActionHead,
    Dense,
    action_head,
    make_torso,
    resolve_torso,
)
from jaxrl.onpolicy import (
    Acting,
    Algorithm,
    PolicyModel,
    Sample,
    clipped_surrogate,
    clipped_value_loss,
    make_on_policy,
    ratio_metrics,
)
from jaxrl.options import NO_OPTION, option_ends, termination_probability


class OptionOutputs(NamedTuple):
    """The network's heads for one observation (leading axes for a batch)."""

    policies: tuple[Array, ...]  # each option's action head: (logits,) or (mean, log_std), [K, A]
    option_values: Array  # Q_Ω(s, ·) [K]
    termination_logits: Array  # β_ω(s) = σ(logit) [K]
    option_logits: Array  # π_Ω(·|s) = softmax(logits) [K]


class PPOCNetwork(nn.Module):
    """Policy and value torsos (separate, or one `shared_torso`) with the heads of
    `OptionOutputs`; the termination head and the policy over options see their torso's features
    with the gradient stopped."""

    num_options: int
    action_size: int
    continuous: bool
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    torso: str = "mlp"  # "mlp" or "nature_cnn" (resolved by `resolve_torso`)
    shared_torso: bool = False
    log_std_init: float = 0.0

    def _torso(self, name: str) -> nn.Module:
        return make_torso(self.torso, self.hidden_sizes, self.activation, name)

    @nn.compact
    def __call__(self, obs: Array) -> OptionOutputs:
        k, a = self.num_options, self.action_size
        actor = self._torso("torso" if self.shared_torso else "actor_torso")(obs)
        critic = actor if self.shared_torso else self._torso("critic_torso")(obs)
        small, unit = nn.initializers.orthogonal(0.01), nn.initializers.orthogonal(1.0)
        out = Dense(k * a, kernel_init=small, name="policies")(actor)
        out = out.reshape(*out.shape[:-1], k, a)
        values = Dense(k, kernel_init=unit, name="option_values")(critic)
        terminations = Dense(k, kernel_init=small, name="terminations")(
            jax.lax.stop_gradient(critic)
        )
        option_logits = Dense(k, kernel_init=small, name="policy_over_options")(
            jax.lax.stop_gradient(actor)
        )
        if not self.continuous:
            return OptionOutputs((out,), values, terminations, option_logits)
        log_std = self.param("log_std", nn.initializers.constant(self.log_std_init), (k, a))
        policies = (out, jnp.broadcast_to(log_std, out.shape))
        return OptionOutputs(policies, values, terminations, option_logits)


class OptionRecord(NamedTuple):
    """What a step keeps of the options (`Acting.record`); [T, envs] in a rollout."""

    option: Array  # int32: the option that acted
    arrived: Array  # int32: the option that arrived from the step before (NO_OPTION: none)
    chose: Array  # bool: π_Ω drew the option here (an episode's start or a termination)
    option_log_prob: Array  # log π_Ω(option|s) under the policy that acted (drawn there or not)
    option_baseline: Array  # V_Ω(s) under the critic that acted: the choice's baseline
    arrival_beta: Array  # β of the arriving option at s; 0 where none arrived


def option_value(outputs: OptionOutputs) -> Array:
    """V_Ω(s) = Σ_ω π_Ω(ω|s) Q_Ω(s, ω): the value of letting the policy over options choose."""
    return jnp.sum(jax.nn.softmax(outputs.option_logits) * outputs.option_values, axis=-1)


def option_policy(head: ActionHead, outputs: OptionOutputs, option: Array) -> Distribution:
    """Option `option`'s action distribution at one state."""
    return head.distribution(tuple(x[option] for x in outputs.policies))


def act(head: ActionHead, outputs: OptionOutputs, arrived: Array, key: Key) -> Acting:
    """One env's step at s: the arriving option ends with probability β (always where none
    arrived), π_Ω then draws the next, and the option acting draws the action."""
    end_key, option_key, action_key = jax.random.split(key, 3)
    chose, beta = option_ends(outputs.termination_logits, arrived, end_key)
    drawn = jax.random.categorical(option_key, outputs.option_logits).astype(jnp.int32)
    option = jnp.where(chose, drawn, arrived)
    dist = option_policy(head, outputs, option)
    raw = dist.sample(action_key)
    record = OptionRecord(
        option,
        arrived,
        chose,
        jax.nn.log_softmax(outputs.option_logits)[option],
        option_value(outputs),
        beta,
    )
    value = outputs.option_values[option]
    return Acting(raw, dist.log_prob(raw), dist.env_action(raw), value, option, record)


def arrival_value(outputs: OptionOutputs, record: OptionRecord) -> Array:
    """U(s′, ω) = (1 − β_ω(s′)) Q_Ω(s′, ω) + β_ω(s′) V_Ω(s′): the value of arriving in s′ with
    the option that acted, which ends there with probability β_ω(s′)."""
    beta = termination_probability(outputs.termination_logits, record.option)
    return (1.0 - beta) * outputs.option_values[record.option] + beta * option_value(outputs)


def greedy_or_sampled_action(
    head: ActionHead, outputs: OptionOutputs, key: Key, deterministic: bool
) -> Array:
    """Without memory: the option most likely under π_Ω and its mode (deterministic), or an
    option and an action drawn."""
    option_key, action_key = jax.random.split(key)
    if deterministic:
        dist = option_policy(head, outputs, jnp.argmax(outputs.option_logits))
        return dist.env_action(dist.mode())
    dist = option_policy(head, outputs, jax.random.categorical(option_key, outputs.option_logits))
    return dist.env_action(dist.sample(action_key))


def evaluation_step(
    head: ActionHead, outputs: OptionOutputs, arrived: Array, key: Key
) -> tuple[Array, Array]:
    """Evaluation with the running option (call and return): the arriving option ends with
    probability β (always where none arrived), the option most likely under π_Ω takes over,
    and the running option's mode is the action."""
    ends, _ = option_ends(outputs.termination_logits, arrived, key)
    option = jnp.where(ends, jnp.argmax(outputs.option_logits), arrived).astype(jnp.int32)
    dist = option_policy(head, outputs, option)
    return dist.env_action(dist.mode()), option


def option_metrics(num_options: int, record: OptionRecord) -> dict[str, tuple[Array, Array]]:
    """Per iteration: the share of steps each option acted, env steps per option choice (the
    mean duration of the options begun) and the mean β of the options that arrived in a state."""
    ones = jnp.ones(record.option.shape, jnp.float32)
    usage = {
        f"option_{k}_usage": ((record.option == k).astype(jnp.float32), ones)
        for k in range(num_options)
    }
    return {
        **usage,
        "option_duration": (ones, record.chose.astype(jnp.float32)),
        "termination_probability": (
            record.arrival_beta,
            (record.arrived != NO_OPTION).astype(jnp.float32),
        ),
    }


def ppoc_model(cfg: PPOCConfig, net: PPOCNetwork, head: ActionHead) -> PolicyModel:
    """The network's outputs as an on-policy policy whose memory is the running option."""
    return PolicyModel(
        net=net,
        act=lambda outputs, memory, key: act(head, outputs, memory, key),
        successor_value=arrival_value,
        loss_inputs=lambda outputs, sample: (
            option_policy(head, outputs, sample.record.option),
            outputs.option_values[sample.record.option],
            outputs,
        ),
        action=lambda outputs, key, deterministic: greedy_or_sampled_action(
            head, outputs, key, deterministic
        ),
        state_value=option_value,
        initial_memory=jnp.int32(NO_OPTION),
        metrics=lambda record: option_metrics(cfg.num_options, record),
        evaluate=lambda outputs, memory, key: evaluation_step(head, outputs, memory, key),
    )


def option_choice_loss(
    cfg: PPOCConfig, outputs: OptionOutputs, record: OptionRecord, target: Array
) -> tuple[Array, Array]:
    """The policy over options' clipped surrogate for the option that acted at s, with the
    advantage G − V_Ω(s) of acting with it rather than letting π_Ω choose; and π_Ω's entropy."""
    log_p = jax.nn.log_softmax(outputs.option_logits)
    log_ratio = log_p[record.option] - record.option_log_prob
    advantage = target - record.option_baseline
    return clipped_surrogate(log_ratio, advantage, cfg.clip_eps), -jnp.sum(jnp.exp(log_p) * log_p)


def termination_loss(cfg: PPOCConfig, outputs: OptionOutputs, arrived: Array) -> Array:
    """β_ω(s) (Q_Ω(s, ω) − V_Ω(s) + ξ) for the option ω that arrived in s, the advantage held
    fixed: its gradient is the option-critic termination gradient. 0 where none arrived."""
    values = jax.lax.stop_gradient(outputs.option_values)
    baseline = jax.lax.stop_gradient(option_value(outputs))
    advantage = values[jnp.maximum(arrived, 0)] - baseline + cfg.deliberation_cost
    return termination_probability(outputs.termination_logits, arrived) * advantage


def ppoc_loss(
    cfg: PPOCConfig, dist: Distribution, value: Array, outputs: OptionOutputs, sample: Sample
) -> tuple[Array, dict[str, Array]]:
    """Per-sample PPOC loss: PPO's on the acting option's policy and Q_Ω(s, ω), plus the policy
    over options' and the termination's terms."""
    chex.assert_rank([value, sample.advantage, sample.target, sample.log_prob], 0)
    record = sample.record
    log_ratio = dist.log_prob(sample.raw_action) - sample.log_prob
    policy_loss = clipped_surrogate(log_ratio, sample.advantage, cfg.clip_eps)
    value_loss = clipped_value_loss(value, sample, cfg.clip_eps, cfg.clip_value)
    entropy = dist.entropy()
    choice_loss, option_entropy = option_choice_loss(cfg, outputs, record, sample.target)
    end_loss = termination_loss(cfg, outputs, record.arrived)
    loss = policy_loss + cfg.vf_coef * value_loss - cfg.ent_coef * entropy
    loss = loss + choice_loss - cfg.option_ent_coef * option_entropy + end_loss
    return loss, {
        "policy_loss": policy_loss,
        "value_loss": value_loss,
        "entropy": entropy,
        "option_choice_loss": choice_loss,
        "option_entropy": option_entropy,
        "termination_loss": end_loss,
        **ratio_metrics(log_ratio, cfg.clip_eps),
    }


def ppoc_algorithm(cfg: PPOCConfig, env: Env) -> Algorithm:
    """PPOC as an on-policy algorithm on `env`; action spaces it cannot take raise ConfigError."""
    spec = env.spec
    head = action_head(spec.action_space, cfg.squash_actions, cfg.name)
    torso = resolve_torso(cfg.torso, spec.observation_space.shape, cfg.name)
    net = PPOCNetwork(
        cfg.num_options,
        head.size,
        head.continuous,
        cfg.hidden_sizes,
        cfg.activation,
        torso,
        cfg.shared_torso,
        cfg.log_std_init,
    )
    return Algorithm(
        loss=lambda dist, value, outputs, sample: ppoc_loss(cfg, dist, value, outputs, sample),
        num_steps=cfg.num_steps,
        gae_lambda=cfg.gae_lambda,
        epochs=cfg.update_epochs,
        minibatches=cfg.num_minibatches,
        model=ppoc_model(cfg, net, head),
    )


def make_ppoc(cfg: PPOCConfig, env: Env, total_env_steps: float) -> Agent:
    """PPOC on `env`'s batch through the shared on-policy driver."""
    return make_on_policy(cfg, env, ppoc_algorithm(cfg, env), total_env_steps)
