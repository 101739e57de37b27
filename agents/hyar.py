"""HyAR-TD3 (Li et al., ICLR 2022, "HyAR: Addressing Discrete-Continuous Action Reinforcement
Learning via Hybrid Action Representation"), for `Hybrid` action spaces: TD3 acts in a learned
latent action space, and a conditional VAE turns its latents into the env's hybrid actions.

* Representation. A table of K learned choice embeddings e_k (tanh-squashed,
  `discrete_latent_size` each) and a conditional VAE over the chosen choice's own parameters x_k
  (normalised to [−1, 1], zero-padded to the largest choice's count): the encoder
  q(z_x | s, x_k, e_k) and the decoder p(x_k | s, z_x, e_k), whose second head predicts the
  observation's change s' − s (the dynamics-predictive loss). Each branch multiplies an embedding
  of (s, e_k) into one of x_k (or z_x), as the reference does. Loss: `dynamics_weight`·MSE(s' − s)
  + `reconstruction_weight`·MSE(x_k) + `kl_weight`·KL(q ‖ N(0, I)).
* Acting. The actor μ(s) gives a latent (z_k, z_x) in [−1, 1]. The choice is the embedding
  nearest to z_k (L2); its parameters are the decoder's at z_x mapped into the range the encoder
  actually produces (`LatentRange`: per dimension, the `range_percent` and 100 − `range_percent`
  percentiles of encoder samples μ + σε over `range_samples` stored transitions; the paper's
  latent space constraint). Exploration adds Gaussian noise to the latent, σ linear from
  `exploration_noise_start` to `exploration_noise` over `exploration_steps` env steps after the
  warm-up, clipped to [−1, 1]. Evaluation is μ(s) decoded, noise-free.
* TD3 on latents: `jaxrl.deterministic`'s update (twin critics Q(s, z_k, z_x), target smoothing,
  delayed actor and Polyak targets; only termination stops the bootstrap, a truncated step
  bootstraps from its episode's last observation). The actor's tanh outputs pass their gradient
  through Hausknecht & Stone's inversion (`inverting_gradients`) and the actor's gradient is
  clipped (`max_grad_norm`), as in the reference; the critics' is not.
* Relabelling. Before each critic step the sampled latents meet the current representation: z_k
  is kept while it still decodes to the stored choice k, else replaced by e_k plus
  clip(N(0, `relabel_noise`²), ±`target_noise_clip`); z_x is kept while the decoder's predicted
  s' − s at (s, z_x, e_k) has a mean squared error under `relabel_threshold` × the VAE's current
  dynamics error, else replaced by a fresh encoding of (s, x_k, e_k) mapped back into [−1, 1].
  Transitions of the random warm-up have no latent (`HyARAction.valid` is False) and are always
  relabelled. `discrete_relabel_rate` and `parameter_relabel_rate` are the shares replaced.
* Schedule. `learning_starts` env steps of uniformly random hybrid actions (the reference's 5,000
  random episodes), then `vae_pretrain_steps` VAE steps on them before TD3's first update; once
  `vae_train_after` more env steps have passed, one VAE step per `vae_every` env steps, and the
  latent range and dynamics error measured again after them. With `schedule_unit=episodes` σ's
  fall and the periodic VAE steps count the episodes TD3's policy has ended instead, as the
  reference's do (`exploration_episodes`, `vae_train_after_episodes`, `vae_every_episodes`; the
  learner counts them as it collects, `observe`). `anneal_lr` takes TD3's learning rates
  linearly to 0 over its updates in the budget (`td3_updates`).

Followed, for facts and settings (the code here is ours): github.com/TJU-DRL-LAB/self-supervised-rl,
commit ece9562, `RL_with_Action_Representation/HyAR/`: `embedding/ActionRepresentation_vae.py`
(`VAE`: the embedding table initialised uniform in [−1, 1] and read through a tanh, the
multiplicative encoder and decoder of 256 units, log σ clipped to [−4, 15], the tanh heads;
`Action_representation`: the loss 1·MSE(s' − s) + 2·MSE(x) + 0.5·KL with Adam 1e-4, the nearest
embedding by squared distance, `get_c_rate`/`z_range`: the 2nd and 98th percentiles of 5,000
encoder samples and the dynamics error on them), `agents/P_TD3_relable.py` (the TD3 on latents:
256-256 networks, Adam 3e-4, the relabelling rules and their noise 0.1 clipped at 0.5, the
threshold 5 × the dynamics error, the inverted gradients on the tanh outputs, actor gradients
clipped at 10), `HyAR_RL/main_embedding_platform_td3.py` and `main_embedding_hard_move_td3.py`
(the settings: 6-dimensional z_k and z_x, 4 and 4 in `main_embedding_direction_catch_td3.py`, the
`catch-point` preset's; batch 128, γ 0.99, τ 0.005, smoothing 0.1 clipped at
0.5, policy delay 2, 5,000 random episodes, 5,000 pre-training VAE steps of batch 64, exploration
σ 1 → 0.1 over 1,000 episodes, one VAE step every 10 episodes from episode 1,000).

Departures, each because our driver differs or to keep the algorithm consistent:
(1) One replay buffer. The reference keeps two, TD3's (its own steps only, 1e5) and the VAE's
(everything, 2e6); here the warm-up's transitions also reach TD3, relabelled, unless
`td3_buffer_size` > 0 gives TD3 a window of the newest of its own (the reference's). (2) Schedules
count env steps by default, not episodes: the defaults are Platform's (1,000 of its early episodes
are about `exploration_steps` env steps; 10 episodes about `vae_every`); `schedule_unit=episodes`
counts as the reference does. (3) VAE training runs between the driver's iterations (`train_step`):
the pre-training after the iteration in which the warm-up ended (until then the learner still acts
at random and its updates change nothing), and each iteration's periodic VAE steps at its end,
followed by one range measurement (the reference measures after every VAE step). (4) The relabelling
check decodes z_x mapped into the encoder's range, as it was decoded when acting; the reference
passes the unmapped actor output (`relabel_check_range=actor`). (5) The VAE's Adam keeps its
moments; the reference builds a new Adam at every VAE step, so each of its steps is Adam's first,
about `vae_lr`·sign(gradient) (`vae_adam_moments=false`). (6) A fixed number of pre-training steps;
the reference stops after 5,000 once its loss stops falling. (7) One update per env step unless
`update_at_episode_start`; the reference adds one at each episode's start. (8) Flax's LeCun-normal
initialisers instead of PyTorch's unless `layer_init=pytorch`; a latent range is kept at least 1e-6
wide so that mapping back into [−1, 1] never divides by zero.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from agents.configs import HyARConfig
from jaxrl import deterministic, offpolicy, optimizers, replay
from jaxrl.config import require
from jaxrl.continuous import ActionScale, Critics, StateActionCritic, inverted_gradients
from jaxrl.datatypes import Agent, Array, EnvSpec, Hybrid, Key, Metrics, PyTree, Transition
from jaxrl.deterministic import (
    DeterministicActor,
    DeterministicNetworks,
    DeterministicState,
)
from jaxrl.env import Env
from jaxrl.hybrid_actions import hybrid_actions, parameter_owners, parameter_scale
from jaxrl.networks import Dense, layer_init
from jaxrl.offpolicy import Learner, OffPolicySetup, OffPolicyState
from jaxrl.parallel import every_run
from jaxrl.replay import ReplayState

MIN_RANGE_HALF_WIDTH = 1e-6  # a collapsed latent dimension still maps back into [−1, 1]


class HyARAction(NamedTuple):
    """What the buffer stores per step: the hybrid action taken, in the VAE's terms, and the
    latent it was decoded from."""

    choice: Array  # int32[...]
    parameters: Array  # float32[..., X]: choice's own parameters, normalised, zero-padded
    latent: Array  # float32[..., Zk + Zx]: the actor-space latent, in [−1, 1]
    valid: Array  # bool[...]: False for warm-up draws, which have no latent


class LatentRange(NamedTuple):
    """Per z_x dimension, the bounds of what the encoder produces: actor latents in [−1, 1] map
    affinely onto [low, high]."""

    low: Array  # float32[Zx]
    high: Array  # float32[Zx]


class VAEFit(NamedTuple):
    """The VAE's unweighted loss terms on the last range sample; `dynamics` also sets the
    relabelling threshold."""

    dynamics: Array
    reconstruction: Array
    kl: Array


class HyARState(NamedTuple):
    td3: DeterministicState  # the actor and critics on latents
    vae_params: PyTree  # encoder, decoder and the choice embeddings
    vae_opt_state: optax.OptState
    latent_range: LatentRange
    fit: VAEFit
    pretrained: Array  # bool: the VAE has had its pre-training, TD3 may learn
    # int32: episodes ended since the pre-training, the episode schedules' clock (0 on steps')
    episodes: Array
    episode_vae_steps: Array  # int32: periodic VAE steps taken on the episode schedule


def uniform_init(key: Key, shape: Sequence[int], dtype: jnp.dtype = jnp.float32) -> Array:
    """Uniform in [−1, 1): the reference's embedding table, away from the tanh's flat ends."""
    return jax.random.uniform(key, shape, dtype, -1.0, 1.0)


class HybridActionVAE(nn.Module):
    """The choice embeddings and the conditional VAE over a choice's parameters."""

    num_choices: int
    embedding_size: int  # discrete_latent_size
    parameter_size: int  # X
    latent_size: int  # parameter_latent_size
    obs_size: int
    hidden_size: int
    init_scheme: str = "lecun_normal"  # `networks.layer_init`'s scheme

    def setup(self) -> None:
        hidden = self.hidden_size

        def dense(size: int, fan_in: int) -> nn.Module:
            return Dense(size, **layer_init(self.init_scheme, fan_in))

        self.embeddings = self.param(
            "embeddings", uniform_init, (self.num_choices, self.embedding_size)
        )
        conditioned = self.obs_size + self.embedding_size  # (s, e_k)
        self.encoder_condition = dense(hidden, conditioned)
        self.encoder_parameters = dense(hidden, self.parameter_size)
        self.encoder_hidden = (dense(hidden, hidden), dense(hidden, hidden))
        self.latent_mean = dense(self.latent_size, hidden)
        self.latent_log_std = dense(self.latent_size, hidden)
        self.decoder_condition = dense(hidden, conditioned)
        self.decoder_latent = dense(hidden, self.latent_size)
        self.decoder_hidden = (dense(hidden, hidden), dense(hidden, hidden))
        self.parameter_head = dense(self.parameter_size, hidden)
        self.dynamics_hidden = dense(hidden, hidden)
        self.dynamics_head = dense(self.obs_size, hidden)

    def choice_embeddings(self) -> Array:
        """[K, Zk]: every choice's embedding e_k."""
        return jnp.tanh(self.embeddings)

    def encode(self, obs: Array, embedding: Array, parameters: Array) -> tuple[Array, Array]:
        """The mean and log σ (clipped to [−4, 15]) of q(z_x | s, x_k, e_k)."""
        condition = nn.relu(self.encoder_condition(jnp.concatenate([obs, embedding], axis=-1)))
        h = condition * nn.relu(self.encoder_parameters(parameters))
        for layer in self.encoder_hidden:
            h = nn.relu(layer(h))
        return self.latent_mean(h), jnp.clip(self.latent_log_std(h), -4.0, 15.0)

    def decode(self, obs: Array, latent: Array, embedding: Array) -> tuple[Array, Array]:
        """The decoded parameters x_k and the predicted change s' − s, both through a tanh."""
        condition = nn.relu(self.decoder_condition(jnp.concatenate([obs, embedding], axis=-1)))
        h = condition * nn.relu(self.decoder_latent(latent))
        for layer in self.decoder_hidden:
            h = nn.relu(layer(h))
        delta = self.dynamics_head(nn.relu(self.dynamics_hidden(h)))
        return jnp.tanh(self.parameter_head(h)), jnp.tanh(delta)

    def __call__(
        self, obs: Array, choice: Array, parameters: Array, noise: Array
    ) -> tuple[Array, Array, Array, Array, Array]:
        """The whole pass at a reparameterised sample z = μ + σ·`noise`: (decoded parameters,
        predicted change, μ, log σ, z)."""
        embedding = self.choice_embeddings()[choice]
        mean, log_std = self.encode(obs, embedding, parameters)
        latent = mean + jnp.exp(log_std) * noise
        decoded, delta = self.decode(obs, latent, embedding)
        return decoded, delta, mean, log_std, latent


@jax.custom_vjp
def inverting_gradients_at_bounds(latent: Array) -> Array:
    """The identity, whose backward pass inverts the gradient near ±1 (`inverted_gradients`):
    the reference's inverted gradients on its tanh actor, for `jaxrl.deterministic`'s −Q loss."""
    return latent


def _identity_forward(latent: Array) -> tuple[Array, Array]:
    return latent, latent


def _inverted_backward(latent: Array, cotangent: Array) -> tuple[Array]:
    # The cotangent is a descent direction of the loss −Q; inversion takes ascent directions.
    return (-inverted_gradients(-cotangent, latent),)


inverting_gradients_at_bounds.defvjp(_identity_forward, _inverted_backward)


class LatentActor(nn.Module):
    """μ(s): the latent (z_k, z_x) through a tanh, its gradient inverted near ±1 when `invert`."""

    latent_size: int
    hidden_sizes: Sequence[int]
    activation: str = "relu"
    layer_norm: bool = False
    invert: bool = True
    squash: bool = True  # what jaxrl.deterministic reads: the output is already in [−1, 1]
    init_scheme: str = "lecun_normal"  # `networks.layer_init`'s scheme

    @nn.compact
    def __call__(self, obs: Array) -> Array:
        latent = DeterministicActor(
            self.latent_size,
            self.hidden_sizes,
            self.activation,
            self.layer_norm,
            init_scheme=self.init_scheme,
        )(obs)
        return inverting_gradients_at_bounds(latent) if self.invert else latent


class HyARSetup(NamedTuple):
    """What the learner's functions share, fixed when the program is traced."""

    cfg: HyARConfig
    nets: DeterministicNetworks  # TD3 on Box(−1, 1, (Zk + Zx,)): identity scaling
    vae: HybridActionVAE
    vae_tx: optax.GradientTransformation
    scale: ActionScale  # normalised parameters ↔ the env's parameter Box
    owners: np.ndarray  # float32[K, P], `parameter_owners`
    positions: np.ndarray  # int32[K, P]: where parameter p sits in choice k's own vector
    sizes: np.ndarray  # int32[K]: each choice's parameter count


def vae_pass(
    setup: HyARSetup, vae_params: PyTree, batch: Transition, noise: Array
) -> tuple[VAEFit, Array]:
    """The unweighted VAE loss terms on a batch at the sample z = μ + σ·`noise` (the mean
    squared error of the predicted s' − s and of the decoded parameters, and the KL divergence
    from N(0, I), each a mean over the batch and the features), and that sample."""
    action = batch.action
    obs = batch.obs.astype(jnp.float32)
    decoded, delta, mean, log_std, latent = setup.vae.apply(
        vae_params, obs, action.choice, action.parameters, noise
    )
    kl = -0.5 * jnp.mean(1.0 + 2.0 * log_std - mean**2 - jnp.exp(2.0 * log_std))
    terms = VAEFit(
        dynamics=jnp.mean((delta - (batch.next_obs - obs)) ** 2),
        reconstruction=jnp.mean((decoded - action.parameters) ** 2),
        kl=kl,
    )
    return terms, latent


def vae_loss(setup: HyARSetup, vae_params: PyTree, batch: Transition, noise: Array) -> Array:
    """The weighted sum of `vae_pass`'s terms: what a VAE step descends."""
    cfg = setup.cfg
    terms, _ = vae_pass(setup, vae_params, batch, noise)
    return (
        cfg.dynamics_weight * terms.dynamics
        + cfg.reconstruction_weight * terms.reconstruction
        + cfg.kl_weight * terms.kl
    )


def vae_step(setup: HyARSetup, state: HyARState, buffer: ReplayState, key: Key) -> HyARState:
    """One Adam step of the VAE on `vae_batch_size` stored transitions (from fresh moments
    without `vae_adam_moments`)."""
    sample_key, noise_key = jax.random.split(key)
    batch = replay.sample(buffer, sample_key, setup.cfg.vae_batch_size)
    noise = jax.random.normal(noise_key, (setup.cfg.vae_batch_size, setup.vae.latent_size))
    grads = jax.grad(functools.partial(vae_loss, setup))(state.vae_params, batch, noise)
    opt_state = state.vae_opt_state
    if not setup.cfg.vae_adam_moments:
        opt_state = setup.vae_tx.init(state.vae_params)
    updates, opt_state = setup.vae_tx.update(grads, opt_state)
    return state._replace(
        vae_params=optax.apply_updates(state.vae_params, updates), vae_opt_state=opt_state
    )


def latent_range(latents: Array, percent: float | Array) -> LatentRange:
    """Per dimension of `latents` [N, Zx], the values at sorted positions ⌊percent·N/100⌋ from
    either end (the reference's `z_range`: 100 of 5,000 samples at 2%)."""
    count = latents.shape[0]
    border = jnp.floor(percent * count / 100).astype(jnp.int32)
    border = jnp.clip(border, 0, (count - 1) // 2)
    ordered = jnp.sort(latents, axis=0)
    return LatentRange(low=ordered[border], high=ordered[count - 1 - border])


def _center_and_half_width(bounds: LatentRange) -> tuple[Array, Array]:
    half_width = jnp.maximum((bounds.high - bounds.low) / 2.0, MIN_RANGE_HALF_WIDTH)
    return (bounds.high + bounds.low) / 2.0, half_width


def to_encoder_range(bounds: LatentRange, latent: Array) -> Array:
    """An actor-space z_x in [−1, 1] mapped affinely onto the encoder's range."""
    center, half_width = _center_and_half_width(bounds)
    return center + half_width * latent


def to_actor_range(bounds: LatentRange, latent: Array) -> Array:
    """An encoder sample mapped back to actor units (the inverse of `to_encoder_range`)."""
    center, half_width = _center_and_half_width(bounds)
    return (latent - center) / half_width


def measure_range(setup: HyARSetup, state: HyARState, buffer: ReplayState, key: Key) -> HyARState:
    """The latent range and the VAE's loss terms measured on `range_samples` stored
    transitions, one encoder sample each."""
    sample_key, noise_key = jax.random.split(key)
    count = setup.cfg.range_samples
    batch = replay.sample(buffer, sample_key, count)
    noise = jax.random.normal(noise_key, (count, setup.vae.latent_size))
    fit, latents = vae_pass(setup, state.vae_params, batch, noise)
    return state._replace(latent_range=latent_range(latents, setup.cfg.range_percent), fit=fit)


def episode_vae_steps_due(cfg: HyARConfig, episodes: Array) -> Array:
    """Periodic VAE steps owed after `episodes` episodes: one for each count t ≤ `episodes` that
    is a multiple of `vae_every_episodes` and at least `vae_train_after_episodes` (the
    reference's `t % 10 == 0 and t >= 1000`, checked as each episode ends)."""
    every = cfg.vae_every_episodes
    before_first = (max(cfg.vae_train_after_episodes, 1) - 1) // every
    return jnp.maximum(episodes // every - before_first, 0)


def train_vae(
    setup: HyARSetup, state: HyARState, buffer: ReplayState, env_steps: Array, key: Key
) -> HyARState:
    """After an iteration: the pre-training once the warm-up has ended, or the iteration's
    periodic VAE steps once `vae_train_after` env steps have followed it, one per `vae_every`
    (with `schedule_unit=episodes`, those `episode_vae_steps_due` owes); after either, the
    latent range measured again. The step count is data, so vmapped seeds (which share their
    env steps) run the pre-training's loop once, not in every iteration. A run resumed without
    its buffer (`checkpoint.replay_buffer=false`) trains the VAE again once it is refilled."""
    cfg = setup.cfg
    # The runs of one program share these schedules: agreed, the loop and the range are skipped
    # under vmap when no run needs them (`parallel.every_run`).
    filled = buffer.size >= min(cfg.learning_starts, cfg.buffer_size)
    pretraining = every_run(~state.pretrained & (env_steps >= cfg.learning_starts) & filled)
    if cfg.schedule_unit == "episodes":
        # Runs end their episodes at different steps, so their counts differ: under vmap the
        # loop runs the largest and each run keeps its own.
        owed = episode_vae_steps_due(cfg, state.episodes) - state.episode_vae_steps
        periodic = state.pretrained & filled & (owed > 0)
        periodic_steps = jnp.where(periodic, owed, 0)
        state = state._replace(episode_vae_steps=state.episode_vae_steps + periodic_steps)
    else:
        periodic = every_run(
            state.pretrained & (env_steps >= cfg.learning_starts + cfg.vae_train_after) & filled
        )
        periodic_steps = jnp.where(periodic, cfg.iteration_steps // cfg.vae_every, 0)
    steps = jnp.where(pretraining, cfg.vae_pretrain_steps, periodic_steps)
    steps_key, range_key = jax.random.split(key)
    state = jax.lax.fori_loop(
        0,
        steps,
        lambda i, s: vae_step(setup, s, buffer, jax.random.fold_in(steps_key, i)),
        state,
    )
    state = jax.lax.cond(
        pretraining | periodic,
        lambda s: measure_range(setup, s, buffer, range_key),
        lambda s: s,
        state,
    )
    return state._replace(pretrained=state.pretrained | pretraining)


def choice_embeddings(setup: HyARSetup, vae_params: PyTree) -> Array:
    return setup.vae.apply(vae_params, method=HybridActionVAE.choice_embeddings)


def nearest_choice(embeddings: Array, discrete_latent: Array) -> Array:
    """int32[...]: the choice whose embedding [K, Zk] is nearest (L2) to each z_k [..., Zk].
    ‖z − e‖² = ‖z‖² − 2 z·e + ‖e‖², and ‖z‖² is the same for every e: one matrix product
    instead of the [..., K, Zk] differences summed over their short last axis, which XLA:CPU
    reduces slowly once K is large (Hard Move n = 10: 1,024; results/hyar_nearest_choice.md)."""
    scores = jnp.sum(embeddings**2, axis=-1) - 2 * discrete_latent @ embeddings.T
    return jnp.argmin(scores, axis=-1).astype(jnp.int32)


def split_latent(setup: HyARSetup, latent: Array) -> tuple[Array, Array]:
    size = setup.cfg.discrete_latent_size
    return latent[..., :size], latent[..., size:]


def own_parameters_mask(setup: HyARSetup, choice: Array) -> Array:
    """float32[..., X]: 1 on the entries of a choice's own parameter vector that exist."""
    size = setup.vae.parameter_size
    return (jnp.arange(size) < jnp.asarray(setup.sizes)[choice][..., None]).astype(jnp.float32)


def decode_latent(setup: HyARSetup, state: HyARState, obs: Array, latent: Array) -> HyARAction:
    """The hybrid action a latent in [−1, 1] stands for: the nearest embedding's choice and the
    decoder's parameters at z_x mapped into the encoder's range."""
    obs = obs.astype(jnp.float32)
    discrete_latent, parameter_latent = split_latent(setup, latent)
    embeddings = choice_embeddings(setup, state.vae_params)
    choice = nearest_choice(embeddings, discrete_latent)
    parameters, _ = setup.vae.apply(
        state.vae_params,
        obs,
        to_encoder_range(state.latent_range, parameter_latent),
        embeddings[choice],
        method=HybridActionVAE.decode,
    )
    parameters = parameters * own_parameters_mask(setup, choice)
    return HyARAction(choice, parameters, latent, jnp.ones(choice.shape, bool))


def env_action(setup: HyARSetup, action: HyARAction) -> tuple[Array, Array]:
    """The env's `(choice, parameters)`: the choice's own parameters put into its slice of the
    parameter vector (every other entry mid-range) and rescaled to the Box."""
    positions = jnp.asarray(setup.positions)[action.choice]  # [..., P]
    own = jnp.take_along_axis(action.parameters, positions, axis=-1)
    normalised = own * jnp.asarray(setup.owners)[action.choice]
    return action.choice, setup.scale.to_env(normalised)


def random_action(setup: HyARSetup, key: Key, batch_size: int) -> HyARAction:
    """The warm-up's draws: a uniform choice with its parameters uniform in their bounds, and no
    latent (relabelled whenever sampled)."""
    choice_key, parameter_key = jax.random.split(key)
    choice = jax.random.randint(choice_key, (batch_size,), 0, len(setup.sizes), jnp.int32)
    size = setup.vae.parameter_size
    parameters = jax.random.uniform(parameter_key, (batch_size, size), minval=-1.0, maxval=1.0)
    latent_size = setup.cfg.discrete_latent_size + setup.cfg.parameter_latent_size
    return HyARAction(
        choice,
        parameters * own_parameters_mask(setup, choice),
        jnp.zeros((batch_size, latent_size), jnp.float32),
        jnp.zeros((batch_size,), bool),
    )


def exploration_sigma(cfg: HyARConfig, env_steps: Array, episodes: Array) -> Array:
    """σ of the latent noise after `env_steps` env steps and `episodes` episodes since the
    pre-training: linear from `exploration_noise_start` at the warm-up's end to
    `exploration_noise` `exploration_steps` env steps (or `exploration_episodes` episodes)
    later, then constant."""
    if cfg.schedule_unit == "episodes":
        progress = jnp.clip(episodes / max(cfg.exploration_episodes, 1), 0, 1)
    else:
        progress = jnp.clip((env_steps - cfg.learning_starts) / max(cfg.exploration_steps, 1), 0, 1)
    start, end = cfg.exploration_noise_start, cfg.exploration_noise
    return start + (end - start) * progress


def noisy_latent(setup: HyARSetup, state: HyARState, obs: Array, key: Key, sigma: Array) -> Array:
    """μ(s) plus N(0, σ²) noise, clipped to [−1, 1]."""
    mu = setup.nets.actor.apply(state.td3.actor_params, obs.astype(jnp.float32))
    return jnp.clip(mu + sigma * jax.random.normal(key, mu.shape), -1.0, 1.0)


def explore(
    setup: HyARSetup, state: HyARState, obs: Array, key: Key, env_steps: Array
) -> HyARAction:
    """The stored action of every env: a noisy latent and what it decodes to; random actions
    until the VAE is pre-trained."""
    noise_key, random_key = jax.random.split(key)
    sigma = exploration_sigma(setup.cfg, env_steps, state.episodes)
    latent = noisy_latent(setup, state, obs, noise_key, sigma)
    explored = decode_latent(setup, state, obs, latent)
    random = random_action(setup, random_key, obs.shape[0])
    return jax.tree.map(lambda e, r: jnp.where(state.pretrained, e, r), explored, random)


def observe(setup: HyARSetup, state: HyARState, transition: Transition) -> HyARState:
    """The episodes ended by the batch's step, counted once the VAE is pre-trained (the warm-up's
    random episodes are not TD3's)."""
    ended = jnp.sum(transition.terminated | transition.truncated, dtype=jnp.int32)
    return state._replace(episodes=state.episodes + jnp.where(state.pretrained, ended, 0))


def act(
    setup: HyARSetup, state: HyARState, obs: Array, key: Key, deterministic: bool
) -> tuple[Array, Array]:
    """The env's `(choice, parameters)`: μ(s) decoded for evaluation, else with the final
    exploration noise."""
    if deterministic:
        latent = setup.nets.actor.apply(state.td3.actor_params, obs.astype(jnp.float32))
    else:
        latent = noisy_latent(setup, state, obs, key, jnp.asarray(setup.cfg.exploration_noise))
    return env_action(setup, decode_latent(setup, state, obs, latent))


class Relabelled(NamedTuple):
    latent: Array  # float32[B, Zk + Zx]: what the critic learns on
    discrete: Array  # bool[B]: z_k replaced
    parameter: Array  # bool[B]: z_x replaced


def relabel(setup: HyARSetup, state: HyARState, batch: Transition, key: Key) -> Relabelled:
    """The sampled latents checked against the current representation (module docstring)."""
    cfg = setup.cfg
    action = batch.action
    discrete_latent, parameter_latent = split_latent(setup, action.latent)
    embeddings = choice_embeddings(setup, state.vae_params)
    embedding = embeddings[action.choice]
    discrete_key, parameter_key = jax.random.split(key)

    keep_discrete = action.valid & (nearest_choice(embeddings, discrete_latent) == action.choice)
    noise = cfg.relabel_noise * jax.random.normal(discrete_key, embedding.shape)
    noise = jnp.clip(noise, -cfg.target_noise_clip, cfg.target_noise_clip)
    discrete_latent = jnp.where(
        keep_discrete[:, None], discrete_latent, jnp.clip(embedding + noise, -1.0, 1.0)
    )

    if cfg.relabel_check_range == "encoder":
        checked_latent = to_encoder_range(state.latent_range, parameter_latent)
    else:
        checked_latent = parameter_latent
    _, predicted_delta = setup.vae.apply(
        state.vae_params, batch.obs, checked_latent, embedding, method=HybridActionVAE.decode
    )
    error = jnp.mean((predicted_delta - (batch.next_obs - batch.obs)) ** 2, axis=-1)
    keep_parameter = action.valid & (error < cfg.relabel_threshold * state.fit.dynamics)
    mean, log_std = setup.vae.apply(
        state.vae_params, batch.obs, embedding, action.parameters, method=HybridActionVAE.encode
    )
    encoded = mean + jnp.exp(log_std) * jax.random.normal(parameter_key, mean.shape)
    encoded = jnp.clip(to_actor_range(state.latent_range, encoded), -1.0, 1.0)
    parameter_latent = jnp.where(keep_parameter[:, None], parameter_latent, encoded)

    latent = jnp.concatenate([discrete_latent, parameter_latent], axis=-1)
    return Relabelled(latent, ~keep_discrete, ~keep_parameter)


def update(
    setup: HyARSetup, state: HyARState, batch: Transition, key: Key
) -> tuple[HyARState, Metrics]:
    """TD3's update on the batch's relabelled latents; no change before the VAE's pre-training
    (the driver may start updating within the iteration in which the warm-up ends)."""
    relabel_key, td3_key = jax.random.split(key)
    relabelled = relabel(setup, state, batch, relabel_key)
    td3, metrics = deterministic.update(
        setup.cfg, setup.nets, state.td3, batch._replace(action=relabelled.latent), td3_key
    )
    td3 = jax.tree.map(lambda new, old: jnp.where(state.pretrained, new, old), td3, state.td3)
    metrics = {
        **metrics,
        "discrete_relabel_rate": relabelled.discrete.mean(),
        "parameter_relabel_rate": relabelled.parameter.mean(),
    }
    return state._replace(td3=td3), metrics


def init(setup: HyARSetup, obs: Array, key: Key) -> HyARState:
    """Fresh networks from an example (unbatched) observation; the latent range [−1, 1]."""
    td3_key, vae_key = jax.random.split(key)
    latent_size = setup.cfg.discrete_latent_size + setup.cfg.parameter_latent_size
    td3 = deterministic.init(setup.nets, obs, jnp.zeros(latent_size, jnp.float32), td3_key)
    vae_params = setup.vae.init(
        vae_key,
        obs,
        jnp.zeros((), jnp.int32),
        jnp.zeros(setup.vae.parameter_size, jnp.float32),
        jnp.zeros(setup.vae.latent_size, jnp.float32),
    )
    zero = jnp.zeros((), jnp.float32)
    ones = jnp.ones(setup.vae.latent_size, jnp.float32)
    return HyARState(
        td3,
        vae_params,
        setup.vae_tx.init(vae_params),
        LatentRange(-ones, ones),
        VAEFit(zero, zero, zero),
        jnp.zeros((), bool),
        jnp.zeros((), jnp.int32),
        jnp.zeros((), jnp.int32),
    )


def train_step(
    setup: HyARSetup,
    driver: OffPolicySetup,
    state: OffPolicyState,
    env_state: PyTree,
    key: Key,
) -> tuple[OffPolicyState, PyTree, Metrics]:
    """One iteration of the off-policy driver (collecting, relabelled TD3 updates), then the
    iteration's VAE training; the VAE's loss terms are those of the last range measurement."""
    driver_key, vae_key = jax.random.split(key)
    state, env_state, metrics = offpolicy.train_step(driver, state, env_state, driver_key)
    learner = train_vae(setup, state.learner, state.buffer, state.env_steps, vae_key)
    fit = learner.fit
    metrics = {
        **metrics,
        "vae_dynamics_loss": fit.dynamics,
        "vae_reconstruction_loss": fit.reconstruction,
        "vae_kl": fit.kl,
    }
    return state._replace(learner=learner), env_state, metrics


def parameter_layout(space: Hybrid) -> tuple[np.ndarray, np.ndarray]:
    """Each choice's parameter count (int32[K]) and, per choice, each parameter's position in
    the choice's own vector (int32[K, P]; 0 where the parameter is another choice's)."""
    sizes = np.array([stop - start for start, stop in space.slices], np.int32)
    starts = np.array([start for start, _ in space.slices], np.int32)
    columns = np.arange(space.parameters.shape[0], dtype=np.int32)
    positions = np.clip(columns[None, :] - starts[:, None], 0, max(int(sizes.max()), 1) - 1)
    return sizes, positions.astype(np.int32)


def td3_updates(cfg: HyARConfig, num_envs: int, total_env_steps: float) -> int:
    """TD3's updates in a run of `total_env_steps`: the driver's, less those of the iterations
    up to the one in which the warm-up ends, which `update` discards (the VAE pre-trains after
    it)."""
    warm_up_end = -(-cfg.learning_starts // cfg.iteration_steps) * cfg.iteration_steps
    discarded = offpolicy.num_updates(cfg, num_envs, min(warm_up_end, total_env_steps))
    return offpolicy.num_updates(cfg, num_envs, total_env_steps) - discarded


def make_setup(cfg: HyARConfig, spec: EnvSpec, total_env_steps: float | None = None) -> HyARSetup:
    """The networks, optimisers and parameter layout for `spec` (Hybrid actions, else
    ConfigError); `total_env_steps`, the run's budget, is the horizon `anneal_lr` needs."""
    space = hybrid_actions(spec, cfg.name)
    critic_lr: float | optax.Schedule = cfg.critic_lr
    actor_lr: float | optax.Schedule = cfg.actor_lr
    if cfg.anneal_lr:
        budget = offpolicy.annealing_budget(total_env_steps)
        actor_lr, critic_lr = deterministic.annealed_rates(
            cfg, td3_updates(cfg, spec.num_envs, budget)
        )
    obs_shape = spec.observation_space.shape
    require(
        len(obs_shape) == 1,
        f"agent '{cfg.name}' needs flat (1-D) observations, whose change its VAE predicts; env "
        f"'{spec.name}' has shape {obs_shape}",
    )
    sizes, positions = parameter_layout(space)
    latent_size = cfg.discrete_latent_size + cfg.parameter_latent_size
    actor = LatentActor(
        latent_size,
        cfg.hidden_sizes,
        cfg.activation,
        cfg.layer_norm,
        cfg.inverting_gradients,
        init_scheme=cfg.layer_init,
    )
    critic = StateActionCritic(cfg.hidden_sizes, cfg.activation, cfg.layer_norm, cfg.layer_init)
    critics = Critics(critic, 2 if cfg.twin_critics else 1)
    # Adam's moments as one flat vector per network (`optax.flatten`): the same steps in a few
    # ops instead of a few per weight array, a smaller program to compile.
    actor_tx = optax.flatten(
        optax.chain(optimizers.clip_by_global_norm(cfg.max_grad_norm), optax.adam(actor_lr))
    )
    nets = DeterministicNetworks(
        actor,
        critics,
        ActionScale(np.zeros(latent_size, np.float32), np.ones(latent_size, np.float32)),
        actor_tx,
        optax.flatten(optax.adam(critic_lr)),
    )
    vae = HybridActionVAE(
        num_choices=space.choices.n,
        embedding_size=cfg.discrete_latent_size,
        parameter_size=max(int(sizes.max()), 1),
        latent_size=cfg.parameter_latent_size,
        obs_size=obs_shape[0],
        hidden_size=cfg.vae_hidden_size,
        init_scheme=cfg.layer_init,
    )
    return HyARSetup(
        cfg,
        nets,
        vae,
        optax.flatten(optax.adam(cfg.vae_lr)),
        parameter_scale(space),
        parameter_owners(space),
        positions,
        sizes,
    )


def make_learner(setup: HyARSetup, spec: EnvSpec) -> Learner:
    """HyAR's learner: it stores `HyARAction`s and gives the env hybrid actions."""
    obs0 = jnp.zeros(spec.observation_space.shape, jnp.float32)
    # Only the episode schedules read the episode count: the step schedules collect as before.
    counting = functools.partial(observe, setup) if setup.cfg.schedule_unit == "episodes" else None
    return Learner(
        init=functools.partial(init, setup, obs0),
        explore=functools.partial(explore, setup),
        act=functools.partial(act, setup),
        update=functools.partial(update, setup),
        params=lambda state: (state.td3.actor_params, state.vae_params, state.latent_range),
        env_action=functools.partial(env_action, setup),
        random_action=functools.partial(random_action, setup),
        observe=counting,
    )


def make_hyar(cfg: HyARConfig, env: Env, total_env_steps: float) -> Agent:
    """HyAR-TD3 on `env`'s batch: the off-policy driver with HyAR's learner, each iteration
    followed by its VAE training; `total_env_steps` is the run's budget (the annealing horizon
    with `anneal_lr`)."""
    setup = make_setup(cfg, env.spec, total_env_steps)
    learner = make_learner(setup, env.spec)
    driver = offpolicy.off_policy_setup(
        cfg,
        env,
        learner,
        own_steps_window=cfg.td3_buffer_size,
        update_at_episode_start=cfg.update_at_episode_start,
    )
    agent = offpolicy.off_policy_agent(driver)
    return agent._replace(train_step=functools.partial(train_step, setup, driver))
