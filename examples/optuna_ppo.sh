#!/usr/bin/env bash
# Optuna searches PPO's learning rate on CartPole-v1 through Hydra's Optuna sweeper, and each
# trial is itself a grid x seeds program: 3 clip ε x 4 seeds = 12 runs with one compile. A trial
# is worth its best clip ε's mean final eval return over the seeds (sweep_objective=final; `best`
# and `auc` are the others), which Optuna maximises. The study's best learning rate and value end
# in <sweep dir>/optimization_results.yaml, each trial's run in <sweep dir>/<trial number>/.
#
# Needs the optuna extra: pip install -e ".[optuna]". Arguments are more overrides; later ones
# win, e.g.  examples/optuna_ppo.sh hydra.sweeper.n_trials=5 budget.env_steps=5e4
set -euo pipefail
exec "${PYTHON:-python}" -m jaxrl.run -m \
  hydra/sweeper=optuna \
  hydra.sweeper.direction=maximize \
  hydra.sweeper.n_trials=20 \
  hydra.sweeper.sampler.seed=0 \
  'agent.learning_rate=tag(log,interval(1e-4,3e-3))' \
  agent=ppo \
  env=CartPole-v1 \
  'grid.agent.clip_eps=[0.1,0.2,0.3]' \
  num_seeds=4 \
  budget.env_steps=1e5 \
  sweep_objective=final \
  log.progress=false \
  "$@"
