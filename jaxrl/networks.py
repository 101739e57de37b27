"""Network building blocks (flax.linen) shared by agents: MLPs with optional virtual batch norm,
the mapping from a network's output to an action, and the actor-critic networks (MLP or Nature CNN
torsos, shared or separate) whose outputs `ActionHead` turns into action distributions."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl import autotune, conv_forms, speedups
from jaxrl.config import ConfigError
from jaxrl.datatypes import Array, Box, Discrete, Space
from jaxrl.distributions import Categorical, DiagGaussian, Distribution, TanhGaussian
from jaxrl.env import describe_actions

ACTIVATIONS = {"tanh": jnp.tanh, "relu": jax.nn.relu, "elu": jax.nn.elu, "gelu": jax.nn.gelu}
VBN_EPS = 1e-5
# Orthogonal weights with gain √2 for layers followed by ReLU/tanh (Saxe et al. 2014; the PPO
# implementation detail): every hidden layer and convolution that does not choose otherwise.
HIDDEN_ORTHOGONAL = nn.initializers.orthogonal(float(np.sqrt(2.0)))


def activation(name: str):
    if name not in ACTIVATIONS:
        raise ConfigError(f"unknown activation '{name}'; valid: {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name]


# The weight gradient xᵀ·g of a [batch, in] @ [in, out] product: autodiff's form contracts the
# batch axis of both operands (XLA:CPU runs it on Eigen); `transposed` materialises xᵀ behind an
# optimisation barrier (else XLA folds the transpose back into the dot) and multiplies plainly
# (YNNPACK). Which is faster depends on the shape and the CPU (design_notes.md).
WEIGHT_GRAD_FORMS: dict[str, Callable[[Array, Array], Array]] = {
    "plain": lambda x, g: x.T @ g,
    "transposed": lambda x, g: jax.lax.optimization_barrier(x.T) @ g,
}
# Multiply-adds a timing of one weight-gradient form aims at: small products are repeated in a
# longer scan, so that dispatch overhead does not decide.
_TIMED_MACS = 2.5e8


def weight_grad_form(x_shape: tuple[int, ...], g_shape: tuple[int, ...], dtype: np.dtype) -> str:
    """The form of WEIGHT_GRAD_FORMS this machine runs fastest for these shapes
    (`jaxrl.autotune`); `plain` where forms are not timed."""
    if not autotune.available() or autotune.too_large_to_time(x_shape, g_shape):
        return "plain"

    def measure() -> dict[str, str]:
        rng = np.random.default_rng(0)
        x = rng.standard_normal(x_shape).astype(dtype)
        g = rng.standard_normal(g_shape).astype(dtype)
        length = int(np.clip(_TIMED_MACS / (x_shape[0] * x_shape[1] * g_shape[1]), 2, 2000))
        seconds = autotune.seconds_per_step(WEIGHT_GRAD_FORMS, (x, g), 0, length)
        return {"weight_grad": autotune.choose(seconds, "plain")}

    name = np.dtype(dtype).name
    what = f"matmul weight gradient | x {list(x_shape)} | g {list(g_shape)} | {name}"
    return autotune.plan(what, {"weight_grad": WEIGHT_GRAD_FORMS}, measure)["weight_grad"]


@jax.custom_vjp
def batch_matmul(x: Array, w: Array) -> Array:
    """x [batch, in] @ w [in, out], its weight gradient in the form this machine runs fastest
    (`weight_grad_form`, chosen when the gradient is traced). Other platforms keep the plain
    form. Exact to float rounding.
    """
    return x @ w


def _batch_matmul_fwd(x: Array, w: Array):
    return x @ w, (x, w)


def _batch_matmul_bwd(residuals: tuple[Array, Array], g: Array):
    x, w = residuals
    chosen = WEIGHT_GRAD_FORMS[weight_grad_form(x.shape, g.shape, x.dtype)]
    dw = jax.lax.platform_dependent(x, g, cpu=chosen, default=WEIGHT_GRAD_FORMS["plain"])
    return g @ w.T, dw


batch_matmul.defvjp(_batch_matmul_fwd, _batch_matmul_bwd)


def _dense_dot_general(
    lhs: Array, rhs: Array, dimension_numbers, precision=None, preferred_element_type=None
) -> Array:
    """`batch_matmul` with the signature `nn.Dense` calls; a single input (a per-sample call
    under `vmap`), any other contraction, or any call with the speed-ups off
    (`jaxrl.speedups`) goes to `lax.dot_general` unchanged."""
    plain = dimension_numbers == (((1,), (0,)), ((), ())) and precision is None
    if lhs.ndim == 2 and plain and speedups.enabled():
        return batch_matmul(lhs, rhs)
    return jax.lax.dot_general(
        lhs, rhs, dimension_numbers, precision, preferred_element_type=preferred_element_type
    )


# The Dense layer every network here uses: flax's, with the CPU-friendly weight gradient. Same
# parameters and names as `nn.Dense`, so checkpoints do not change.
Dense = functools.partial(nn.Dense, dot_general=_dense_dot_general)


class MLP(nn.Module):
    """Dense layers with an activation; hidden layers can be normalised with fixed statistics.

    Virtual batch norm (Salimans et al. 2016/2017): `reference_stats` runs a reference batch
    through the network and returns each hidden layer's mean/variance; `__call__` then normalises
    with those, so every input (and, in ES, every population member on its own weights) is
    normalised against the same reference rather than against its own batch.
    """

    hidden_sizes: Sequence[int]
    out_size: int
    activation: str = "tanh"
    out_scale: float = 0.01  # small output layer: near-uniform logits / near-zero actions at start

    def setup(self) -> None:
        self.hidden = [Dense(h, kernel_init=HIDDEN_ORTHOGONAL) for h in self.hidden_sizes]
        self.head = Dense(self.out_size, kernel_init=nn.initializers.orthogonal(self.out_scale))

    def __call__(self, x: Array, vbn_stats: Sequence[tuple[Array, Array]] | None = None) -> Array:
        act = activation(self.activation)
        for i, layer in enumerate(self.hidden):
            h = layer(x)
            if vbn_stats is not None:
                mean, var = vbn_stats[i]
                h = (h - mean) * jax.lax.rsqrt(var + VBN_EPS)
            x = act(h)
        return self.head(x)

    def reference_stats(self, reference: Array) -> list[tuple[Array, Array]]:
        act = activation(self.activation)
        stats = []
        x = reference
        for layer in self.hidden:
            h = layer(x)
            mean, var = h.mean(0), h.var(0)
            stats.append((mean, var))
            x = act((h - mean) * jax.lax.rsqrt(var + VBN_EPS))
        return stats


def policy_output_size(space: Space, agent: str) -> int:
    """Logits for Discrete, one output per dimension for flat Box; anything else is refused."""
    if isinstance(space, Discrete):
        return space.n
    if isinstance(space, Box) and len(space.shape) == 1:
        if not space.bounded:
            raise ConfigError(
                f"agent '{agent}' needs a bounded Box action space to squash its actions into; "
                f"got low={space.low.tolist()} high={space.high.tolist()}"
            )
        return space.shape[0]
    raise ConfigError(
        f"agent '{agent}' supports Discrete and flat (1-D) Box action spaces; the env has "
        f"{describe_actions(space)}"
    )


def deterministic_action(output: Array, space: Space) -> Array:
    """Greedy action: argmax of logits, or tanh-squashed mean rescaled to the Box's bounds."""
    if isinstance(space, Discrete):
        return jnp.argmax(output, axis=-1).astype(jnp.int32)
    low, high = jnp.asarray(space.low), jnp.asarray(space.high)
    return low + (jnp.tanh(output) + 1.0) * 0.5 * (high - low)


def layer_init(scheme: str, fan_in: int) -> dict[str, Callable[..., Array]]:
    """`Dense` keyword arguments that start a layer of `fan_in` inputs as `scheme` says
    (`agent.layer_init`, `jaxrl.agent_config.LAYER_INIT_NAMES`): flax's default (LeCun normal
    weights, zero biases), or PyTorch's `nn.Linear` default (weights and biases uniform in
    ±1/√fan_in, its `reset_parameters`), which references written in PyTorch start from."""
    if scheme == "lecun_normal":
        return {}
    bound = 1.0 / float(np.sqrt(fan_in))

    def uniform(key: Array, shape: Sequence[int], dtype: jnp.dtype = jnp.float32) -> Array:
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return {"kernel_init": uniform, "bias_init": uniform}


# Weight initialisations an agent can offer as `agent.kernel_init`: (hidden layers, output heads).
# orthogonal: gain √2 hidden, 1 for value heads (the PPO implementation detail, our default);
# lecun_normal: flax's default Dense init, which CleanRL's and PureJaxRL's DQN networks keep.
KERNEL_INITS = {
    "orthogonal": (HIDDEN_ORTHOGONAL, nn.initializers.orthogonal(1.0)),
    "lecun_normal": (nn.initializers.lecun_normal(), nn.initializers.lecun_normal()),
}


class MLPTorso(nn.Module):
    """Hidden layers only, initialised as `KERNEL_INITS[kernel_init]` says for hidden layers."""

    hidden_sizes: Sequence[int]
    activation: str = "tanh"
    kernel_init: str = "orthogonal"

    @nn.compact
    def __call__(self, x: Array) -> Array:
        act = activation(self.activation)
        hidden_init = KERNEL_INITS[self.kernel_init][0]
        for size in self.hidden_sizes:
            x = act(Dense(size, kernel_init=hidden_init)(x))
        return x


def _flax_conv(
    lhs: Array, rhs: Array, window_strides, padding, *, input_grad: bool = True, **options
) -> Array:
    """The convolution `nn.Conv` calls (VALID, NHWC, no dilation or groups), each part in the
    form measured fastest on this CPU (`conv_forms.plan_for`); `lax.conv_general_dilated` itself
    with the speed-ups off (`jaxrl.speedups`)."""
    if not speedups.enabled():
        return jax.lax.conv_general_dilated(lhs, rhs, window_strides, padding, **options)
    strides = tuple(window_strides)
    plan = conv_forms.plan_for(lhs.shape, rhs.shape, strides, lhs.dtype, input_grad)
    return conv_forms.planned_conv(lhs, rhs, strides, plan)


class NatureCNN(nn.Module):
    """The DQN torso of Mnih et al. (2015): 8×8/4, 4×4/2, 3×3/1 convolutions and 512 units, on
    [..., H, W, C] frames with values in [0, 255] (uint8 or float)."""

    @nn.compact
    def __call__(self, x: Array) -> Array:
        x = x.astype(jnp.float32) / 255.0
        for layer, (features, kernel, stride) in enumerate(((32, 8, 4), (64, 4, 2), (64, 3, 1))):
            conv = nn.Conv(
                features,
                (kernel, kernel),
                (stride, stride),
                "VALID",
                kernel_init=HIDDEN_ORTHOGONAL,
                # The frames are data: the first layer's input gradient is never computed.
                conv_general_dilated=functools.partial(_flax_conv, input_grad=layer > 0),
            )
            x = jax.nn.relu(conv(x))
        x = x.reshape((*x.shape[:-3], -1))
        return jax.nn.relu(Dense(512, kernel_init=HIDDEN_ORTHOGONAL)(x))


# 8x8 stride 4, 4x4 stride 2, 3x3 stride 1 leave at least one pixel from 36 on.
NATURE_CNN_MIN_SIZE = 36


def resolve_torso(torso: str, obs_shape: tuple[int, ...], agent: str) -> str:
    """ "auto" is the Nature CNN for image observations ([H, W, C]) and an MLP otherwise (the
    name was checked with the agent's settings: `agent_config.check_torso`)."""
    image = len(obs_shape) == 3
    if torso == "auto":
        torso = "nature_cnn" if image else "mlp"
    if torso == "nature_cnn" and not image:
        raise ConfigError(
            f"agent '{agent}': torso=nature_cnn needs image observations [H, W, C]; "
            f"got shape {obs_shape}"
        )
    if torso == "nature_cnn" and min(obs_shape[:2]) < NATURE_CNN_MIN_SIZE:
        raise ConfigError(
            f"agent '{agent}': the Nature CNN needs images of at least {NATURE_CNN_MIN_SIZE}x"
            f"{NATURE_CNN_MIN_SIZE} (its three convolutions shrink them); the env observes "
            f"{obs_shape[0]}x{obs_shape[1]} (give it a flat observation, e.g. "
            f"env.observation=onehot for FourRooms-v0)"
        )
    if torso == "mlp" and len(obs_shape) != 1:
        raise ConfigError(
            f"agent '{agent}': torso=mlp takes flat observations; the env observes shape "
            f"{obs_shape} (images take torso=nature_cnn)"
        )
    return torso


def make_torso(torso: str, hidden_sizes: Sequence[int], activation: str, name: str) -> nn.Module:
    """The torso `resolve_torso` chose ("mlp" or "nature_cnn"), as a named submodule."""
    if torso == "nature_cnn":
        return NatureCNN(name=name)
    return MLPTorso(hidden_sizes, activation, name=name)


class ActorCritic(nn.Module):
    """Policy outputs and a state value from one observation (or a batch of them).

    Returns (policy outputs, value): the outputs are (logits,) for a discrete head and
    (mean, log_std) for a Gaussian one, whose log-std is a state-independent parameter. Torsos
    are shared or separate (separate is the usual choice for MLPs, shared for CNNs). The policy
    layer starts at gain 0.01, so the initial policy is near uniform / near zero mean.
    """

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
    def __call__(self, obs: Array) -> tuple[tuple[Array, ...], Array]:
        actor_features = self._torso("actor_torso" if not self.shared_torso else "torso")(obs)
        critic_features = actor_features if self.shared_torso else self._torso("critic_torso")(obs)
        out = Dense(self.action_size, kernel_init=nn.initializers.orthogonal(0.01))(actor_features)
        value = Dense(1, kernel_init=nn.initializers.orthogonal(1.0))(critic_features)[..., 0]
        if not self.continuous:
            return (out,), value
        log_std = self.param(
            "log_std", nn.initializers.constant(self.log_std_init), (self.action_size,)
        )
        return (out, jnp.broadcast_to(log_std, out.shape)), value


@dataclass(frozen=True)
class ActionHead:
    """How network outputs become a distribution over an env's actions."""

    space: Space
    squash: bool  # tanh-squash Gaussian samples into the Box (else clip them)

    @property
    def continuous(self) -> bool:
        return isinstance(self.space, Box)

    @property
    def size(self) -> int:
        return self.space.shape[0] if isinstance(self.space, Box) else self.space.n

    def distribution(self, outputs: tuple[Array, ...]) -> Distribution:
        if isinstance(self.space, Discrete):
            return Categorical(*outputs)
        low, high = jnp.asarray(self.space.low), jnp.asarray(self.space.high)
        kind = TanhGaussian if self.squash else DiagGaussian
        return kind(outputs[0], outputs[1], low, high)


def action_head(space: Space, squash: bool, agent: str) -> ActionHead:
    """Categorical for Discrete, (tanh-)Gaussian for flat Box; what cannot work is refused here,
    before anything compiles."""
    if isinstance(space, Discrete):
        if squash:
            raise ConfigError(
                f"agent '{agent}': squash_actions=true applies to Box action spaces; this env "
                f"has {space.n} discrete actions (set agent.squash_actions=false)"
            )
        return ActionHead(space, False)
    if isinstance(space, Box) and len(space.shape) == 1:
        if squash and not space.bounded:
            raise ConfigError(
                f"agent '{agent}': squash_actions=true needs a bounded Box to squash into; got "
                f"low={space.low.tolist()} high={space.high.tolist()}"
            )
        return ActionHead(space, squash)
    raise ConfigError(
        f"agent '{agent}' supports Discrete and flat (1-D) Box action spaces; the env has "
        f"{describe_actions(space)}"
    )
