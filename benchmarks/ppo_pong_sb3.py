"""PPO on Pong: env steps/s of full training (rollouts + updates) in jaxrl's `atari` preset
against Stable-Baselines3's PPO with RL Baselines3 Zoo's Atari hyperparameters, which are the same
ones (CleanRL's `ppo_atari.py`, the preset's source, follows the same PPO paper settings).

Both rows run in this process, one after the other, on the same budget (`--steps`, default 16,384
env steps): 8 envs × 128 steps per rollout, 4 epochs of 4 minibatches (256 frames), Adam lr
2.5e-4 annealed linearly to 0 over the budget, clip 0.1, entropy 0.01, value 0.5, gradient norm
0.5, GAE γ 0.99 λ 0.95, advantages normalised per minibatch, one Nature CNN for policy and value.

* jaxrl: `jaxrl.loop.train` with `agent=ppo env=ALE/Pong-v5` (the `atari` preset is picked by the
  env), evaluated once at the end (`--eval-episodes` greedy games). Env steps/s is over the run
  seconds minus that final evaluation, timed by running it again on the final parameters with
  the run's own key (same games).
* SB3: `PPO("CnnPolicy", ...)` on `make_atari_env("ALE/Pong-v5", n_envs=8, frameskip=1, sticky
  actions 0.25)` (SB3's `AtariWrapper`: no-op reset, frame skip 4 with max-pool, FIRE reset,
  84×84 grey, reward sign) and `VecFrameStack(n_stack=4)`, its envs stepped in this process
  (`DummyVecEnv`, the Zoo's default); `model.learn(total_timesteps=steps)` timed wall-clock,
  torch's default thread count.

Run it on a quiet machine (torch's OpenMP threads spin while they wait: see
dqn_breakout_sb3.py). Stable-Baselines3, torch and OpenCV are not jaxrl dependencies
(`pip install -e ".[sb3]"`); without them the SB3 row is skipped with a message.

    python benchmarks/ppo_pong_sb3.py [--steps 16384] [--eval-episodes 1] [--out PATH]
"""

from __future__ import annotations

import argparse
import functools
import os
import tempfile
import time
from pathlib import Path

import jax
from common import (
    RESULTS,
    TrainingRow,
    load_note,
    machine,
    rerun_final_evaluation,
    sb3_atari_env,
    training_rows,
    training_table,
    write_report,
)

from jaxrl.cli import compose, enable_compilation_cache
from jaxrl.loop import train

DEFAULT_OUT = RESULTS / "ppo_pong_sb3.md"
ENV_ID = "ALE/Pong-v5"
NUM_ENVS = 8
ROLLOUT_STEPS = 128
STICKY = 0.25  # AtariConfig.repeat_action_probability (the -v5 default)
SEED = 0


def run_jaxrl(steps: int, eval_episodes: int) -> tuple[TrainingRow, list[str]]:
    """The jaxrl row (run seconds without the final evaluation) and notes on the run."""
    iterations = steps // (NUM_ENVS * ROLLOUT_STEPS)
    overrides = [
        "agent=ppo",
        f"env={ENV_ID}",
        f"budget.env_steps={steps}",
        f"eval.every={iterations}",  # one evaluation, at the end
        f"eval.episodes={eval_episodes}",
        f"seed={SEED}",
        "log.progress=false",
        "log.tensorboard=false",
    ]
    cfg = compose(overrides)
    if (cfg.env.num_envs, cfg.agent.num_steps) != (NUM_ENVS, ROLLOUT_STEPS):
        raise SystemExit(f"the `atari` preset was not picked: {cfg.env}, {cfg.agent}")
    with tempfile.TemporaryDirectory(prefix="jaxrl-bench-pong-") as tmp:
        result = train(cfg, Path(tmp))
    eval_s, note = rerun_final_evaluation(result, SEED, "game(s)")
    summary = result.summary
    row = TrainingRow(
        f"jaxrl PPO, `atari` preset, jax {jax.__version__} {jax.default_backend()}",
        summary["env_steps"],
        summary["compile_seconds"],
        summary["run_seconds"] - eval_s,
        summary["final_eval_return"],
    )
    return row, [f"jaxrl: `python -m jaxrl.run {' '.join(overrides)}`.", note]


def run_sb3(steps: int, eval_episodes: int) -> tuple[TrainingRow, list[str]] | None:
    """The SB3 row and notes on its setup; None (with a printed message) without SB3."""
    start = time.perf_counter()
    env = sb3_atari_env(ENV_ID, NUM_ENVS, SEED, STICKY)
    if env is None:
        return None
    import stable_baselines3
    import torch
    from stable_baselines3 import PPO

    model = PPO(
        "CnnPolicy",
        env,
        learning_rate=lambda progress_remaining: 2.5e-4 * progress_remaining,
        n_steps=ROLLOUT_STEPS,
        batch_size=NUM_ENVS * ROLLOUT_STEPS // 4,
        n_epochs=4,
        gamma=0.99,
        gae_lambda=0.95,
        clip_range=0.1,
        ent_coef=0.01,
        vf_coef=0.5,
        max_grad_norm=0.5,
        seed=SEED,
    )
    setup_s = time.perf_counter() - start
    start = time.perf_counter()
    model.learn(total_timesteps=steps)
    run_s = time.perf_counter() - start
    games = [score for scores in env.env_method("get_episode_rewards") for score in scores]
    env.close()

    scores = games[-eval_episodes:]
    row = TrainingRow(
        f"SB3 {stable_baselines3.__version__} PPO, torch {torch.__version__} {model.device}",
        model.num_timesteps,
        None,
        run_s,
        sum(scores) / len(scores) if scores else None,
    )
    notes = [
        f"SB3: torch.get_num_threads() = {torch.get_num_threads()}, OMP_WAIT_POLICY "
        f"{os.environ.get('OMP_WAIT_POLICY', 'unset')}, device {model.device}; building the envs "
        f"and the model took {setup_s:.1f} s, not timed; final return = mean game score of the "
        f"last {len(scores)} training game(s) it finished ({len(games)} in all, Monitor)."
    ]
    return row, notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=16_384, help="env steps of each run")
    parser.add_argument("--eval-episodes", type=int, default=1, help="jaxrl's final evaluation")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    enable_compilation_cache()  # as CLI runs: a warm cache, and the convolution plans they read
    rollout = NUM_ENVS * ROLLOUT_STEPS
    if args.steps < rollout or args.steps % rollout:
        parser.error(f"--steps={args.steps} must be a positive multiple of {rollout}")

    rows, notes, load_before, load_after = training_rows(
        [functools.partial(run, args.steps, args.eval_episodes) for run in (run_jaxrl, run_sb3)]
    )

    text = "\n\n".join(
        [
            "# PPO on Pong: jaxrl against Stable-Baselines3",
            f"`python benchmarks/ppo_pong_sb3.py --steps {args.steps} --eval-episodes "
            f"{args.eval_episodes}`",
            training_table(rows, machine()),
            f"Both: {ENV_ID}, {args.steps:,} env steps, {NUM_ENVS} envs × {ROLLOUT_STEPS} steps, "
            "4 epochs × 4 minibatches of 256, Adam lr 2.5e-4 → 0 linearly, clip 0.1, entropy "
            "0.01, value 0.5, gradient norm 0.5, GAE γ 0.99 λ 0.95, shared Nature CNN, seed "
            f"{SEED}. Preprocessing: frame skip 4 with a max-pool of the last two frames, up to "
            f"30 no-ops at a reset, 84×84 grey, 4 stacked frames, reward sign, sticky actions "
            f"{STICKY}. Env steps/s is per second of run time, updates included (compile and "
            "setup excluded). The final returns differ in kind: jaxrl's are greedy evaluation "
            "games, SB3's the last training games.",
            *notes,
            "jaxrl steps Pong through ALE's C++ `AtariVectorEnv` (frame skip, max-pool, resize "
            "and stack in C++ threads) behind a host callback, SB3 through its Python wrappers on "
            "`frameskip=1` Gymnasium envs stepped one after another.",
            load_note(load_before, load_after),
        ]
    )
    write_report(text + "\n", args.out)


if __name__ == "__main__":
    main()
