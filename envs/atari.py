"""Atari 2600 games (`ALE/<Game>-v5`) on the host, through ALE's own C++ vector engine.

ale_py's `AtariVectorEnv` steps every game of a pool on its own threads and does the standard
preprocessing in C++ (no-op and FIRE reset, frame skip with a max-pool of the last two frames,
84×84 grey resize with area interpolation, frame stack). Its `SameStep` auto-reset gives the
ended episode's last observation beside the next episode's first, as the host contract
(`envs.host.HostPool`) requires. Three things are done here in Python instead, each because
ALE's version would not give the contract's semantics:

* Reward clipping: ALE returns only the clipped reward, and the episode statistics must report
  the game score. The pool gets raw rewards, sums them for `episode_return` and gives the learner
  their sign.
* Episodic life: ALE's `episodic_life` resets the game on a life loss and its `life_loss_info`
  does not separate a life loss from a game over. Here a life loss (the lives counter drops and
  stays above 0, as in OpenAI Baselines' `EpisodicLifeEnv`) is `terminated` for the learner while
  the game, its frame stack and its statistics run on; the episode statistics (return, length,
  `episode_done`) are those of the whole game. So `terminated` without `episode_done` means "a
  life was lost".
* The time limit: ALE cuts the frame skip short when its frame cap is reached, so its last
  observation misses the step's final frame. The pool counts agent steps and resets a game
  itself when the cap is hit, so `final_obs` at a truncation is the frame the game really shows
  (learners bootstrap from it).

Defaults (`AtariConfig`) against the usual references: Gym = Gymnasium's `AtariPreprocessing` +
`FrameStackObservation` on `ALE/<Game>-v5` made with `frameskip=1`; SB3 = Stable-Baselines3's
`AtariWrapper` + `VecFrameStack` on `<Game>NoFrameskip-v4`; ALE = `AtariVectorEnv`'s defaults.

| option | jaxrl | Gym | SB3 | ALE |
| --- | --- | --- | --- | --- |
| observation | uint8 [84, 84, 4] (H, W, C) | [4, 84, 84] | [84, 84, 4] | [4, 84, 84] |
| frame skip | 4, max of the last 2 frames | same | same | same |
| reset | FIRE, then 0–28 no-ops | 1–30 no-ops | 1–30 no-ops, FIRE | as jaxrl |
| life loss | `terminated`, game goes on | nothing | done, game goes on | nothing |
| reward | sign; statistics: game score | raw | sign; Monitor: raw | clipped ±1 |
| stack padding | zeros | first frame | zeros | zeros |
| sticky actions | 0.25 | 0.25 | 0.0 | 0.0 |
| action set | minimal | minimal | minimal | minimal |
| episode cap | 27,000 steps (108,000 frames) | 108,000 frames | 108,000 frames | 108,000 frames |

Every cap is a truncation. Grey is ITU-R 601 luma, resized with area interpolation, everywhere.
The no-op counts are for `noop_max=30`; FIRE is pressed only in games that have it.

Sticky actions default to 0.25 because the id says `-v5` (Machado et al., 2018) and Gymnasium's
`ALE/Breakout-v5` then has the same dynamics; `env.repeat_action_probability=0` gives the
deterministic `NoFrameskip-v4` games of the DQN papers and of SB3/CleanRL benchmarks.

Differences from SB3's wrappers that remain: after a life loss the game is not "reset" (no extra
no-op step, no FIRE press, the frame stack keeps running), so in games such as Breakout the agent
must press FIRE itself to launch the next ball; ALE presses FIRE before the no-ops, SB3 after.

Evaluation should report the game score: build the evaluation pool from `evaluation_config(cfg)`
(episodic life and clipping off), or read `episode_return` where `episode_done`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

from envs.configs import AtariConfig
from envs.host import HostStep
from envs.host_ids import rom
from jaxrl.config import require
from jaxrl.datatypes import Box, Discrete, EnvSpec

# ALE's own frame cap is lifted out of reach (see the module docstring: the pool truncates).
_ALE_FRAME_CAP = 2**30


def evaluation_config(cfg: AtariConfig) -> AtariConfig:
    """The same games scored as games: whole-game episodes and unclipped rewards."""
    return dataclasses.replace(cfg, episodic_life=False, clip_rewards=False)


def vector_env(cfg: AtariConfig, num_envs: int) -> Any:
    """ALE's `AtariVectorEnv` as the pool drives it: same-step reset, raw rewards, no life or
    time handling of its own."""
    from ale_py.vector_env import AtariVectorEnv

    return AtariVectorEnv(
        rom(cfg.id),
        num_envs,
        num_threads=cfg.threads,
        max_num_frames_per_episode=_ALE_FRAME_CAP,
        repeat_action_probability=cfg.repeat_action_probability,
        full_action_space=cfg.full_action_space,
        autoreset_mode="SameStep",
        img_height=cfg.screen_size,
        img_width=cfg.screen_size,
        grayscale=True,
        stack_num=cfg.frame_stack,
        frameskip=cfg.frame_skip,
        maxpool=True,
        noop_max=cfg.noop_max,
        episodic_life=False,
        life_loss_info=False,
        reward_clipping=False,
        use_fire_reset=cfg.fire_reset,
    )


@functools.cache
def _minimal_action_count(rom: str) -> int:
    import ale_py

    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    ale = ale_py.ALEInterface()
    ale.loadROM(ale_py.roms.get_rom_path(rom))
    return len(ale.getMinimalActionSet())


def num_actions(cfg: AtariConfig) -> int:
    """The size of the game's action set (minimal, or all 18) without starting a pool."""
    return 18 if cfg.full_action_space else _minimal_action_count(rom(cfg.id))


def atari_spec(cfg: AtariConfig, num_envs: int) -> EnvSpec:
    """What agents see of an Atari pool: uint8 [H, W, frame_stack] frames, Discrete actions."""
    shape = (cfg.screen_size, cfg.screen_size, cfg.frame_stack)
    return EnvSpec(
        name=cfg.id,
        family="host",
        observation_space=Box(
            np.zeros(shape, np.uint8), np.full(shape, 255, np.uint8), shape, np.uint8
        ),
        action_space=Discrete(num_actions(cfg)),
        num_envs=num_envs,
        max_episode_steps=cfg.episode_steps,
        vmappable=False,
    )


# The pool keeps ALE's [stack, H, W] frames; the bridge hands agents [H, W, stack] (the spec's
# layout, the Nature CNN's), permuted by XLA: `HostEnv.obs_axes`.
POOL_OBS_AXES = (1, 2, 0)


class AtariPool:
    """`num_envs` games stepped together by ALE's C++ threads; an `envs.host.HostPool` whose
    observations are ALE's [n, stack, H, W] frames (`POOL_OBS_AXES`)."""

    def __init__(self, cfg: AtariConfig, num_envs: int) -> None:
        require(num_envs >= 1, f"num_envs={num_envs} must be >= 1")
        self.cfg = cfg
        self.num_envs = num_envs
        self.max_episode_steps = cfg.episode_steps
        self._env = vector_env(cfg, num_envs)
        self.num_actions = int(self._env.single_action_space.n)
        self._steps = np.zeros(num_envs, np.int64)
        self._return = np.zeros(num_envs, np.float64)
        self._lives = np.zeros(num_envs, np.int32)

    def reset(self, seed: int, env_offset: int = 0) -> np.ndarray:
        """Reseed and restart every game; game i's seed is word `env_offset + i` of
        `SeedSequence(seed)`'s state (a prefix of a longer state is the shorter one), so pools
        with neighbouring seeds share no game seeds."""
        words = np.random.SeedSequence(seed).generate_state(env_offset + self.num_envs)
        seeds = words[env_offset:] & 0x7FFFFFFF
        obs, info = self._env.reset(seed=seeds.astype(np.int64))
        self._steps[:] = 0
        self._return[:] = 0.0
        self._lives[:] = info["lives"]
        return obs

    def step(self, actions: np.ndarray) -> HostStep:
        actions = np.asarray(actions)
        # ALE's worker threads swallow a bad action's exception and the pool then waits forever.
        if (
            actions.shape != (self.num_envs,)
            or not np.issubdtype(actions.dtype, np.integer)
            or actions.min() < 0
            or actions.max() >= self.num_actions
        ):
            raise ValueError(
                f"{self.cfg.id}: actions must be {self.num_envs} integers in "
                f"[0, {self.num_actions}); got {actions.dtype} {actions.shape} {actions!r}"
            )
        obs, raw, game_over, _, info = self._env.step(actions.astype(np.int32))
        raw = raw.astype(np.float64)
        game_over = game_over.astype(bool)
        self._steps += 1
        self._return += raw
        time_up = (self._steps >= self.max_episode_steps) & ~game_over
        lives = info["lives"]
        life_lost = (lives < self._lives) & (lives > 0) & ~game_over
        terminated = game_over | (life_lost & self.cfg.episodic_life)
        episode_done = game_over | time_up

        final_obs = obs.copy()
        if game_over.any():
            final_obs[game_over] = info["final_obs"][game_over]
        if time_up.any():
            fresh, fresh_info = self._env.reset(seed=None, options={"reset_mask": time_up})
            obs[time_up] = fresh[time_up]
            lives = np.where(time_up, fresh_info["lives"], lives)

        result = HostStep(
            obs=obs,
            reward=(np.sign(raw) if self.cfg.clip_rewards else raw).astype(np.float32),
            terminated=terminated,
            truncated=time_up & ~terminated,
            final_obs=final_obs,
            episode_return=self._return.astype(np.float32),
            episode_length=self._steps.astype(np.int32),
            episode_done=episode_done,
        )
        self._lives = lives.astype(np.int32)
        self._steps[episode_done] = 0
        self._return[episode_done] = 0.0
        return result

    def close(self) -> None:
        self._env.close()


def make_atari_pool(cfg: AtariConfig, num_envs: int, seed: int) -> AtariPool:
    """A pool of `num_envs` games (an `envs.host.PoolFactory` once `cfg` is bound). `seed` is not
    used here: the games are seeded by `reset(seed)`, which the bridge calls next; seeding costs
    a ROM reload per game (~0.1 s), so it is done once."""
    del seed
    return AtariPool(cfg, num_envs)
