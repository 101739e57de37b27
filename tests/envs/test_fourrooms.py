"""Four-rooms (`FourRooms-v0`, envs/fourrooms.py): the layout, shortest paths and a trajectory
walked by hand, the slip rules' frequencies, the goal switch at episode N, observations, drawing,
the config's range checks and the CLI's one-line refusal. Every env program here is a few
hundred operations: the file compiles in seconds."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cli_helpers import QUICK_PPO, cli, error_lines

import envs
from envs.configs import FourRoomsConfig
from envs.fourrooms import (
    AGENT_RGB,
    CELL_INDEX,
    CELLS,
    EAST_DOORWAY_GOAL,
    GOAL_RGB,
    HIGH_RGB,
    LOW_RGB,
    LOWER_RIGHT_ROOM,
    NUM_CELLS,
    TRANSFER_GOALS,
    WALL_RGB,
    WALLS,
    FourRoomsEnv,
    FourRoomsState,
    GridRenderer,
    cell_from_obs,
    draw_grid,
    make_fourrooms,
    move,
    shortest_path_lengths,
)
from jaxrl.cli import compose
from jaxrl.config import ConfigError, EnvConfig
from jaxrl.datatypes import Discrete, TimeStep

UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3


def cell(row: int, col: int) -> int:
    index = int(CELL_INDEX[row, col])
    assert index >= 0, (row, col)
    return index


def placed(state: FourRoomsState, cells: list[int]) -> FourRoomsState:
    """`state` with the agents moved to `cells` (a fixed start for hand-walked tests)."""
    return state._replace(core=state.core._replace(cell=jnp.asarray(cells, jnp.int32)))


def run(env: FourRoomsEnv, state: FourRoomsState, actions: np.ndarray, key: jax.Array):
    """Step `env` through `actions` [T, B]; the states after each step and the TimeSteps, stacked
    on a leading time axis."""

    def body(s, inputs):
        action, k = inputs
        s, ts = env.step(s, action, k)
        return s, (s, ts)

    keys = jax.random.split(key, len(actions))
    _, (states, steps) = jax.jit(lambda s: jax.lax.scan(body, s, (jnp.asarray(actions), keys)))(
        state
    )
    return jax.tree.map(np.asarray, states), jax.tree.map(np.asarray, steps)


def goal_of(grid_obs: np.ndarray) -> np.ndarray:
    """The goal cell shown in grid observations [..., 13, 13, 3]."""
    flat = grid_obs[..., 2].reshape(*grid_obs.shape[:-3], -1)
    return CELL_INDEX.ravel()[flat.argmax(-1)]


# --- layout and shortest paths -------------------------------------------------------------------


def test_layout_has_104_free_cells_numbered_as_the_reference_numbers_them():
    assert WALLS.shape == (13, 13) and (~WALLS).sum() == 104 == NUM_CELLS
    assert WALLS[0].all() and WALLS[-1].all() and WALLS[:, 0].all() and WALLS[:, -1].all()
    # Rooms of 25 (NW), 30 (NE), 25 (SW) and 20 (SE) cells and the four doorways.
    rooms = [(~WALLS[1:6, 1:6]).sum(), (~WALLS[1:7, 7:12]).sum()]
    rooms += [(~WALLS[7:12, 1:6]).sum(), (~WALLS[8:12, 7:12]).sum()]
    assert rooms == [25, 30, 25, 20]
    doorways = [(3, 6), (6, 2), (7, 9), (10, 6)]
    assert all(not WALLS[r, c] for r, c in doorways) and sum(rooms) + len(doorways) == 104
    assert CELLS.shape == (104, 2) and CELLS.dtype == np.int32
    assert CELLS[0].tolist() == [1, 1] and CELLS[5].tolist() == [1, 7]  # row-major, walls skipped
    assert CELLS[103].tolist() == [11, 11]
    assert EAST_DOORWAY_GOAL == 62 and CELLS[62].tolist() == [7, 9]
    assert all(CELL_INDEX[r, c] == i for i, (r, c) in enumerate(CELLS))
    room = [68, 69, 70, 71, 72, 78, 79, 80, 81, 82, 89, 90, 91, 92, 93, 99, 100, 101, 102, 103]
    assert LOWER_RIGHT_ROOM.tolist() == room
    assert all(8 <= CELLS[c][0] <= 11 and 7 <= CELLS[c][1] <= 11 for c in room)
    # transfer.py's possible_next_goals: the room and its west doorway, 88 = (10, 6).
    expected = [68, 69, 70, 71, 72, 78, 79, 80, 81, 82, 88, 89, 90, 91, 92, 93]
    expected += [99, 100, 101, 102, 103]
    assert TRANSFER_GOALS.tolist() == expected


def test_shortest_paths_by_hand():
    steps = shortest_path_lengths(EAST_DOORWAY_GOAL)
    assert steps.shape == (104,) and (steps >= 0).all()  # one connected map
    assert steps[62] == 0
    assert steps[cell(8, 9)] == 1 and steps[cell(6, 9)] == 1  # the doorway's two neighbours
    assert steps[cell(4, 11)] == 5  # down, down, left, left, down
    # (1, 1): 7 to the north doorway (3, 6), 6 more to (6, 9), 1 into the goal.
    assert steps[cell(1, 1)] == 14
    # (11, 1): 6 to the south doorway (10, 6), 5 to (8, 9), 1 up (the north way is 20).
    assert steps[cell(11, 1)] == 12
    # Across a wall: Manhattan distance 2, but the way round is through (3, 6).
    assert shortest_path_lengths(cell(4, 5))[cell(4, 7)] == 4
    with pytest.raises(ValueError, match="goal=104"):
        shortest_path_lengths(104)


# --- dynamics, end flags and episode statistics --------------------------------------------------


def test_a_walk_without_slips_reaches_the_goal_and_terminates_on_entering_it():
    env = make_fourrooms(FourRoomsConfig(slip_prob=0.0, max_episode_steps=7), num_envs=1)
    state, _ = env.reset(jax.random.PRNGKey(0))
    state = placed(state, [cell(4, 11)])
    actions = [RIGHT, DOWN, DOWN, DOWN, LEFT, LEFT, DOWN]  # a wall, 2 moves, a wall, 3 moves
    path = [(4, 11), (5, 11), (6, 11), (6, 11), (6, 10), (6, 9), (7, 9)]
    states, ts = run(env, state, np.array(actions)[:, None], jax.random.PRNGKey(1))
    cells = cell_from_obs(ts.final_obs)[:, 0].tolist()  # final_obs: the cell each step reached
    assert cells == [cell(r, c) for r, c in path]
    assert ts.reward[:, 0].tolist() == [0, 0, 0, 0, 0, 0, 1]
    assert ts.terminated[:, 0].tolist() == [False] * 6 + [True]
    # The goal is entered on the 7th step, the cap: terminated, so not truncated.
    assert not ts.truncated.any()
    assert ts.info["episode_done"][:, 0].tolist() == [False] * 6 + [True]
    assert ts.info["episode_return"][-1, 0] == 1.0 and ts.info["episode_length"][-1, 0] == 7
    # Auto-reset in the same step: obs starts the next episode, which never starts on the goal.
    assert (ts.obs[:-1] == ts.final_obs[:-1]).all()
    assert cell_from_obs(ts.obs[-1])[0] != EAST_DOORWAY_GOAL
    assert states.episode[:, 0].tolist() == [0] * 6 + [1]
    assert states.time[-1, 0] == 0 and states.episode_return[-1, 0] == 0.0


def test_truncated_only_at_the_cap():
    env = make_fourrooms(FourRoomsConfig(slip_prob=0.0, max_episode_steps=5), num_envs=1)
    state, _ = env.reset(jax.random.PRNGKey(0))
    state = placed(state, [cell(1, 1)])
    states, ts = run(env, state, np.full((6, 1), UP), jax.random.PRNGKey(1))  # into the wall
    assert cell_from_obs(ts.final_obs)[:5, 0].tolist() == [cell(1, 1)] * 5
    assert ts.truncated[:, 0].tolist() == [False] * 4 + [True, False]
    assert not ts.terminated.any() and not ts.reward.any()
    assert ts.info["episode_length"][4, 0] == 5 and ts.info["episode_return"][4, 0] == 0.0
    assert states.time[:, 0].tolist() == [1, 2, 3, 4, 0, 1]


def test_slips_go_to_each_other_direction_one_time_in_nine():
    """The env's own steps: agents whose four neighbours are all free, told to go right."""
    env = make_fourrooms(FourRoomsConfig(), num_envs=40_000)
    state, ts = env.reset(jax.random.PRNGKey(3))
    _, ts = jax.jit(env.step)(state, jnp.full((40_000,), RIGHT), jax.random.PRNGKey(4))
    before = np.asarray(state.core.cell)
    after = np.asarray(cell_from_obs(ts.final_obs))
    rows, cols = CELLS[before, 0], CELLS[before, 1]
    inside = ~(WALLS[rows - 1, cols] | WALLS[rows + 1, cols] | WALLS[rows, cols - 1])
    inside &= ~WALLS[rows, cols + 1]
    assert inside.sum() > 15_000  # about 43% of the cells
    delta = (CELLS[after] - CELLS[before])[inside]
    share = {
        name: np.mean((delta == d).all(1))
        for name, d in {"right": (0, 1), "up": (-1, 0), "down": (1, 0), "left": (0, -1)}.items()
    }
    assert abs(share["right"] - 2 / 3) < 0.02, share  # 5.5 standard errors (8 for the 1/9s)
    assert all(abs(share[d] - 1 / 9) < 0.02 for d in ("up", "down", "left")), share


def outcomes(start: int, action: int, slip_prob: float, rule: str, n: int = 30_000) -> dict:
    """Where `move` takes an agent from `start`, as shares of `n` draws."""
    keys = jax.random.split(jax.random.PRNGKey(7), n)
    to = jax.jit(jax.vmap(lambda k: move(k, jnp.int32(start), jnp.int32(action), slip_prob, rule)))
    cells, counts = np.unique(np.asarray(to(keys)), return_counts=True)
    return {tuple(CELLS[c].tolist()): k / n for c, k in zip(cells, counts, strict=True)}


def test_the_other_direction_rule_at_a_wall_and_always_slipping():
    # From the corner (1, 1), "up" hits the wall: staying put is 2/3 + the slip to the left 1/9.
    share = outcomes(cell(1, 1), UP, 1 / 3, "other_direction")
    assert set(share) == {(1, 1), (2, 1), (1, 2)}
    assert abs(share[(1, 1)] - 7 / 9) < 0.02 and abs(share[(2, 1)] - 1 / 9) < 0.02
    share = outcomes(cell(4, 3), RIGHT, 1.0, "other_direction")
    assert set(share) == {(3, 3), (5, 3), (4, 2)}  # never the intended cell
    assert all(abs(s - 1 / 3) < 0.02 for s in share.values())


def test_the_reference_codes_rule_moves_then_slips_to_a_free_neighbour():
    # Right from (4, 3) reaches (4, 4); a slip (1/3) then goes on to one of its 4 free neighbours.
    share = outcomes(cell(4, 3), RIGHT, 1 / 3, "empty_neighbor")
    assert set(share) == {(4, 4), (3, 4), (5, 4), (4, 3), (4, 5)}
    assert abs(share[(4, 4)] - 2 / 3) < 0.02
    assert all(abs(share[c] - 1 / 12) < 0.015 for c in [(3, 4), (5, 4), (4, 3), (4, 5)])
    # A doorway has two free neighbours: right into (3, 6), then a slip back or on, 1/6 each.
    share = outcomes(cell(3, 5), RIGHT, 1 / 3, "empty_neighbor")
    assert set(share) == {(3, 6), (3, 5), (3, 7)}
    assert abs(share[(3, 5)] - 1 / 6) < 0.015 and abs(share[(3, 7)] - 1 / 6) < 0.015
    # A bump into a wall never slips.
    assert outcomes(cell(1, 1), UP, 1 / 3, "empty_neighbor") == {(1, 1): 1.0}


# --- the goal switch -----------------------------------------------------------------------------


def test_the_goal_moves_exactly_at_episode_n_of_each_env():
    n_envs, switch = 16, 3
    cfg = FourRoomsConfig(observation="grid", goal_switch_episodes=switch, max_episode_steps=2)
    env = make_fourrooms(cfg, n_envs)
    state, first = env.reset(jax.random.PRNGKey(5))
    actions = jax.random.randint(jax.random.PRNGKey(6), (14, n_envs), 0, 4)
    states, ts = run(env, state, np.asarray(actions), jax.random.PRNGKey(7))
    transfer = np.asarray(state.transfer_goal)
    assert np.isin(transfer, TRANSFER_GOALS).all() and len(set(transfer.tolist())) > 1
    assert (goal_of(np.asarray(first.obs)) == EAST_DOORWAY_GOAL).all()
    done = ts.terminated | ts.truncated
    episode = np.cumsum(done, axis=0)  # by hand: the index of the episode each obs belongs to
    assert (states.episode == episode).all() and (episode[-1] >= switch + 2).all()
    expected = np.where(episode >= switch, transfer, EAST_DOORWAY_GOAL)
    assert (goal_of(ts.obs) == expected).all()  # the first obs of episode `switch` has the new one
    assert (states.core.goal == expected).all()
    # final_obs shows the goal of the episode it ends, which terminates only on that goal.
    ended_goal = np.where(episode - done >= switch, transfer, EAST_DOORWAY_GOAL)
    assert (goal_of(ts.final_obs) == ended_goal).all()
    assert (ts.terminated == (cell_from_obs(ts.final_obs) == ended_goal)).all()
    assert (np.asarray(cell_from_obs(ts.obs))[done] != expected[done]).all()  # starts avoid it


def test_without_a_switch_the_goal_stays_in_the_east_doorway():
    env = make_fourrooms(FourRoomsConfig(max_episode_steps=1), 4)
    state, _ = env.reset(jax.random.PRNGKey(0))
    states, _ = run(env, state, np.zeros((3, 4), np.int32), jax.random.PRNGKey(1))
    assert (states.episode[-1] == 3).all() and (states.core.goal == EAST_DOORWAY_GOAL).all()


# --- observations --------------------------------------------------------------------------------


def test_onehot_and_grid_observations():
    onehot = make_fourrooms(FourRoomsConfig(), 4096)
    assert onehot.spec.observation_space.shape == (104,)
    assert onehot.spec.action_space == Discrete(4) and onehot.spec.max_episode_steps == 1000
    state, ts = onehot.reset(jax.random.PRNGKey(0))
    obs, cells = np.asarray(ts.obs), np.asarray(state.core.cell)
    assert obs.shape == (4096, 104) and obs.dtype == np.float32
    assert (obs.sum(1) == 1).all() and (obs.argmax(1) == cells).all()
    # Starts: every cell but the goal, uniformly (about 40 each).
    counts = np.bincount(cells, minlength=104)
    assert counts[EAST_DOORWAY_GOAL] == 0 and (np.delete(counts, EAST_DOORWAY_GOAL) > 10).all()

    grid = make_fourrooms(FourRoomsConfig(observation="grid"), 4)
    assert grid.spec.observation_space.shape == (13, 13, 3)
    state, ts = grid.reset(jax.random.PRNGKey(0))
    obs = np.asarray(ts.obs)
    assert obs.shape == (4, 13, 13, 3) and obs.dtype == np.float32
    for b, c in enumerate(np.asarray(state.core.cell)):
        assert (obs[b, :, :, 0] == WALLS).all()
        assert obs[b, :, :, 1].sum() == 1 and obs[b, CELLS[c][0], CELLS[c][1], 1] == 1
        assert obs[b, :, :, 2].sum() == 1 and obs[b, 7, 9, 2] == 1
    assert (np.asarray(cell_from_obs(ts.obs)) == np.asarray(state.core.cell)).all()


# --- drawing -------------------------------------------------------------------------------------


def test_draw_grid_draws_walls_goal_agent_and_a_heat_map():
    values = np.full(104, np.nan)
    values[cell(1, 1)], values[cell(1, 2)] = 0.0, 1.0
    image = draw_grid(values, agent=cell(4, 4), goal=EAST_DOORWAY_GOAL, scale=10)
    assert image.shape == (130, 130, 3) and image.dtype == np.uint8

    def centre(row: int, col: int) -> list[int]:
        return image[row * 10 + 5, col * 10 + 5].tolist()

    assert centre(0, 0) == list(WALL_RGB) and centre(7, 9) == list(GOAL_RGB)
    assert centre(4, 4) == list(AGENT_RGB)
    assert centre(1, 1) == list(LOW_RGB) and centre(1, 2) == list(HIGH_RGB)
    assert centre(2, 2) == [255, 255, 255]  # NaN: no value
    frame = GridRenderer().draw(jax.tree.map(lambda x: x[0], onehot_state()))
    assert frame.shape == (208, 208, 3) and frame.dtype == np.uint8


def onehot_state():
    env = make_fourrooms(FourRoomsConfig(), 1)
    return env.reset(jax.random.PRNGKey(0))[0].core


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # ffmpeg: a fork straight into exec
def test_a_video_has_a_frame_per_step_plus_the_first(tmp_path: Path):
    imageio = pytest.importorskip("imageio.v2")
    pytest.importorskip("imageio_ffmpeg")
    from jaxrl.video import record_videos

    env = envs.make(FourRoomsConfig(max_episode_steps=12))
    act = lambda state, obs, key: jnp.full(obs.shape[:1], UP, jnp.int32)
    videos = record_videos(env, act, jnp.zeros((1,)), [("seed_0", 0)], tmp_path)
    assert videos.warning is None
    with imageio.get_reader(videos.paths[0]) as reader:
        frames = np.stack(list(reader.iter_data()))
    assert frames.shape == (videos.lengths[0] + 1, 208, 208, 3)


# --- configuration and the CLI -------------------------------------------------------------------


def test_the_name_is_listed_and_its_options_compose():
    assert "FourRooms-v0" in envs.registered()
    assert envs.config_for("FourRooms-v0") == FourRoomsConfig()
    cfg = compose(["env=FourRooms-v0", "env.observation=grid", "env.goal_switch_episodes=1000"]).env
    assert isinstance(cfg, FourRoomsConfig)
    assert (cfg.observation, cfg.goal_switch_episodes, cfg.slip_prob) == ("grid", 1000, 1 / 3)
    # A plain EnvConfig of the name gets the family's defaults.
    env = envs.make(EnvConfig(id="FourRooms-v0", max_episode_steps=9), 2)
    assert isinstance(env, FourRoomsEnv) and env.cfg.slip_prob == 1 / 3
    assert (env.spec.num_envs, env.spec.max_episode_steps) == (2, 9)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("env.slip_prob=2", r"env\.slip_prob=2\.0 must be a probability in \[0, 1\]"),
        ("env.slip_prob=-0.1", r"env\.slip_prob=-0\.1 must be a probability"),
        ("env.observation=pixels", r"env\.observation='pixels'.*valid: onehot, grid"),
        ("env.slip_rule=sticky", r"env\.slip_rule='sticky'.*other_direction, empty_neighbor"),
        ("env.goal_switch_episodes=-1", r"env\.goal_switch_episodes=-1 must be >= 0"),
    ],
)
def test_bad_options_are_config_errors_naming_the_key(override: str, message: str):
    with pytest.raises(ConfigError, match=message):
        compose(["env=FourRooms-v0", override])


def test_the_cli_refuses_a_bad_slip_prob_in_one_line_with_status_2(tmp_path: Path):
    result = cli("agent=ppo", "env=FourRooms-v0", "env.slip_prob=2", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert error_lines(result.stderr) == [
        "error: env.slip_prob=2.0 must be a probability in [0, 1]"
    ]
    assert result.stdout == "" and not (tmp_path / "runs").exists()


def test_ppo_trains_on_it_from_the_cli_with_the_goal_switch(tmp_path: Path):
    run_dir = tmp_path / "run"
    args = ("env=FourRooms-v0", "env.goal_switch_episodes=2", "budget.env_steps=256")
    result = cli(*QUICK_PPO, *args, "log.progress=false", f"log.dir={run_dir}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_steps"] == 256
    assert json.loads((run_dir / "env_spec.json").read_text())["name"] == "FourRooms-v0"


def test_every_state_leaf_has_the_batch_axis():
    """Every state leaf has the batch axis (learners shard the batch and step envs one by one)."""
    env = make_fourrooms(FourRoomsConfig(), 3)
    state, ts = env.reset(jax.random.PRNGKey(0))
    assert all(leaf.shape[0] == 3 for leaf in jax.tree.leaves(state))
    assert isinstance(ts, TimeStep) and ts.reward.shape == (3,)
