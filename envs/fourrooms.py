"""The four-rooms gridworld of Sutton, Precup & Singh (1999) as Bacon, Harb & Precup (2017, "The
Option-Critic Architecture") ran it, JAX-native: `FourRooms-v0`.

Followed: github.com/jeanharb/option_critic, `fourrooms/fourrooms.py` (the env) and
`fourrooms/transfer.py` (the transfer experiment), commit 5d6c81a; the code here is ours.

* Layout: 13 x 13 with walls all round, 104 free cells (`LAYOUT`, `CELLS`), numbered row by row
  as the reference numbers them, so cell indices match its tabular states.
* Actions: 0 up, 1 down, 2 left, 3 right (`MOVES`). A move into a wall leaves the agent in place.
* Slips (`slip_prob`, 1/3). `slip_rule="other_direction"` (default) is the rule the paper and
  Sutton et al. state (and the reference's docstring): with probability `slip_prob` the action is
  replaced by one of the three other directions, uniformly (1/9 each at 1/3). The reference's
  `step` does something else, kept as `slip_rule="empty_neighbor"` for exact replication: the
  intended move is made; only if it did not hit a wall, with probability `slip_prob` the agent then
  moves on to a uniformly drawn free neighbour of the cell it reached (which may be the cell it
  came from). So one step may cover two cells, and a bump into a wall never slips.
* Goal: the east doorway, cell 62 = (7, 9) (`EAST_DOORWAY_GOAL`). Reward 1 on entering it, 0
  otherwise; the episode terminates there. Discounting (the paper's 0.99) is the agent's business.
* Start: uniform over every free cell but the current goal.
* Episode cap: 1000 steps, transfer.py's `--nsteps` (gym's registration said 20000, but the
  paper's runs used 1000); reaching it is a truncation, never a termination.
* Transfer (`goal_switch_episodes=N`, 0: never; the paper's N = 1000): episodes 0..N-1 of each
  env (counted per env, terminated and truncated alike, across auto-resets) have the east doorway
  as goal; from episode index N on the goal is that env's transfer goal, one cell of
  `TRANSFER_GOALS` drawn uniformly when the env batch is reset, from the env's own key. Like
  transfer.py's `possible_next_goals`, `TRANSFER_GOALS` is the lower-right room (`LOWER_RIGHT_ROOM`,
  20 cells) plus its west doorway (10, 6). Ours differs from the reference in one detail: starts
  avoid the goal in force (the reference keeps avoiding cell 62 after the switch). An env batch
  made afresh (an evaluation env, a resumed run's env) counts its episodes from 0 again.

Observations (`observation`): `"onehot"`, float32[104], the one-hot of the agent's cell (the
reference's tabular state; the goal is not observed), or `"grid"`, float32[13, 13, 3] (rows,
columns, channels): channel 0 the walls, 1 the agent, 2 the goal. `cell_from_obs` maps either
back to the cell index; a state's `core.cell` is that index.

Not `jaxrl.env.VectorEnv`: that replaces the whole core state at every reset, and the goal
switch needs an episode counter and a transfer goal per env that outlive resets. `FourRoomsEnv`
batches, truncates, auto-resets in the same step and counts episodes with VectorEnv's semantics,
every state leaf carrying the batch axis; its `core` (one env, goal at the east doorway) is what
videos run, drawn by `draw_grid`.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from envs import FOURROOMS, FOURROOMS_MAX_EPISODE_STEPS
from envs.configs import FourRoomsConfig
from jaxrl.datatypes import Array, Box, Discrete, EnvSpec, Key, TimeStep
from jaxrl.env import EnvCore, episode_info

NAME = FOURROOMS
# '#' wall, '.' free; Sutton, Precup & Singh (1999)'s layout, as the reference draws it.
LAYOUT = """\
#############
#.....#.....#
#.....#.....#
#...........#
#.....#.....#
#.....#.....#
##.####.....#
#.....###.###
#.....#.....#
#.....#.....#
#...........#
#.....#.....#
#############"""
WALLS: np.ndarray = np.array([[c == "#" for c in row] for row in LAYOUT.splitlines()])
HEIGHT, WIDTH = WALLS.shape
CELLS: np.ndarray = np.argwhere(~WALLS).astype(np.int32)  # int32[104, 2] (row, col), row-major
NUM_CELLS = len(CELLS)
# int32[13, 13]: the cell index at each (row, col), -1 on walls.
CELL_INDEX: np.ndarray = np.full(WALLS.shape, -1, np.int32)
CELL_INDEX[CELLS[:, 0], CELLS[:, 1]] = np.arange(NUM_CELLS, dtype=np.int32)

ACTIONS = ("up", "down", "left", "right")
MOVES: np.ndarray = np.array([(-1, 0), (1, 0), (0, -1), (0, 1)], np.int32)  # (d row, d col)


def _next_cells() -> np.ndarray:
    """int32[104, 4]: the cell each action leads to without a slip (the same cell at a wall)."""
    table = np.empty((NUM_CELLS, len(MOVES)), np.int32)
    for index, cell in enumerate(CELLS):
        for action, delta in enumerate(MOVES):
            row, col = cell + delta
            table[index, action] = index if WALLS[row, col] else CELL_INDEX[row, col]
    return table


NEXT_CELL: np.ndarray = _next_cells()

EAST_DOORWAY_GOAL = int(CELL_INDEX[7, 9])  # 62, the reference's `goal`
# The 20 cells of the lower-right room (rows 8-11, columns 7-11), doorways excluded.
LOWER_RIGHT_ROOM: np.ndarray = CELL_INDEX[8:12, 7:12].ravel()
# Where the goal moves in the transfer experiment: transfer.py's `possible_next_goals`, the room
# and its west doorway (10, 6): 68-72, 78-82, 88-93, 99-103.
TRANSFER_GOALS: np.ndarray = np.sort(np.append(LOWER_RIGHT_ROOM, CELL_INDEX[10, 6]))

RENDER_FPS = 10


def shortest_path_lengths(goal: int) -> np.ndarray:
    """int32[104]: the fewest moves from each cell to `goal` without slips (BFS over free cells);
    the yardstick for learned episode lengths and values."""
    if not 0 <= goal < NUM_CELLS:
        raise ValueError(f"goal={goal} is not a cell index in [0, {NUM_CELLS})")
    steps = np.full(NUM_CELLS, -1, np.int32)
    steps[goal] = 0
    queue = deque([goal])
    while queue:
        cell = queue.popleft()
        for neighbor in NEXT_CELL[cell]:  # moves are reversible: a neighbour's move leads here
            if steps[neighbor] < 0:
                steps[neighbor] = steps[cell] + 1
                queue.append(int(neighbor))
    return steps


# --- one env, pure functions ---------------------------------------------------------------------


def move(key: Key, cell: Array, action: Array, slip_prob: float, slip_rule: str) -> Array:
    """The cell after taking `action` in `cell`, slips included (see the module docstring)."""
    next_cell = jnp.asarray(NEXT_CELL)
    slip_draw, pick_draw = jax.random.uniform(key, (2,))
    slipped = slip_draw < slip_prob
    if slip_rule == "other_direction":
        other = (action + 1 + jnp.minimum(jnp.floor(pick_draw * 3), 2).astype(jnp.int32)) % 4
        return next_cell[cell, jnp.where(slipped, other, action)]
    reached = next_cell[cell, action]
    free = next_cell[reached] != reached  # bool[4]: the reached cell's free neighbours
    count = free.sum()
    pick = jnp.minimum(jnp.floor(pick_draw * count), count - 1).astype(jnp.int32)
    direction = jnp.argmax(free & (jnp.cumsum(free) - 1 == pick))
    slipped = slipped & (reached != cell)  # a bump into a wall never slips
    return jnp.where(slipped, next_cell[reached, direction], reached)


def start_cell(key: Key, goal: Array) -> Array:
    """A cell drawn uniformly from all but `goal`."""
    draw = jax.random.randint(key, (), 0, NUM_CELLS - 1)
    return draw + (draw >= goal)


def observe(cell: Array, goal: Array, observation: str) -> Array:
    """The observation of one env (see the module docstring for the layouts)."""
    if observation == "onehot":
        return jax.nn.one_hot(cell, NUM_CELLS, dtype=jnp.float32)
    index = jnp.asarray(CELL_INDEX)
    planes = (jnp.asarray(WALLS), index == cell, index == goal)
    return jnp.stack(planes, axis=-1).astype(jnp.float32)


def cell_from_obs(obs: Array) -> Array:
    """The agent's cell index from observations of either layout ([..., 104] or
    [..., 13, 13, 3]), as int32[...]."""
    obs = jnp.asarray(obs)
    if obs.shape[-1] == NUM_CELLS:
        return jnp.argmax(obs, axis=-1).astype(jnp.int32)
    agent = obs[..., 1].reshape(*obs.shape[:-3], HEIGHT * WIDTH)
    return jnp.asarray(CELL_INDEX).ravel()[jnp.argmax(agent, axis=-1)]


class FourRoomsCore(NamedTuple):
    cell: Array  # int32, the agent's cell index
    goal: Array  # int32, this episode's goal cell


class FourRoomsState(NamedTuple):
    core: FourRoomsCore  # batched
    transfer_goal: Array  # int32[B], the goal from episode `goal_switch_episodes` on
    episode: Array  # int32[B], 0-based index of the running episode (counts across resets)
    time: Array  # int32[B], steps since the episode began
    episode_return: Array  # float32[B]
    episode_length: Array  # int32[B]


@dataclasses.dataclass(frozen=True)
class FourRoomsEnv:
    """Four-rooms batched, time-limited, auto-resetting and counting episodes like `VectorEnv`,
    with a per-env episode counter that moves the goal (module docstring)."""

    cfg: FourRoomsConfig
    spec: EnvSpec

    def with_num_envs(self, num_envs: int) -> FourRoomsEnv:
        return dataclasses.replace(self, spec=dataclasses.replace(self.spec, num_envs=num_envs))

    def _move(self, key: Key, cell: Array, action: Array) -> Array:
        return move(key, cell, action, self.cfg.slip_prob, self.cfg.slip_rule)

    def _observe(self, cell: Array, goal: Array) -> Array:
        return jax.vmap(observe, (0, 0, None))(cell, goal, self.cfg.observation)

    def _goal_of(self, episode: Array, transfer_goal: Array) -> Array:
        if self.cfg.goal_switch_episodes == 0:
            return jnp.full_like(transfer_goal, EAST_DOORWAY_GOAL)
        switched = episode >= self.cfg.goal_switch_episodes
        return jnp.where(switched, transfer_goal, EAST_DOORWAY_GOAL)

    def reset(self, key: Key) -> tuple[FourRoomsState, TimeStep]:
        n = self.spec.num_envs
        start_keys, goal_keys = jax.random.split(key, (2, n))
        goals = jnp.asarray(TRANSFER_GOALS)
        transfer_goal = goals[
            jax.vmap(lambda k: jax.random.randint(k, (), 0, len(goals)))(goal_keys)
        ]
        zeros_i = jnp.zeros((n,), jnp.int32)
        goal = self._goal_of(zeros_i, transfer_goal)
        cell = jax.vmap(start_cell)(start_keys, goal)
        zeros_f, zeros_b = jnp.zeros((n,), jnp.float32), jnp.zeros((n,), bool)
        state = FourRoomsState(
            FourRoomsCore(cell, goal), transfer_goal, zeros_i, zeros_i, zeros_f, zeros_i
        )
        obs = self._observe(cell, goal)
        info = episode_info(zeros_f, zeros_i, zeros_b)
        return state, TimeStep(obs, zeros_f, zeros_b, zeros_b, obs, info)

    def step(
        self, state: FourRoomsState, action: Array, key: Key
    ) -> tuple[FourRoomsState, TimeStep]:
        n = self.spec.num_envs
        step_keys, reset_keys = jax.random.split(key, (2, n))
        core = state.core
        cell = jax.vmap(self._move)(step_keys, core.cell, action.astype(jnp.int32))
        terminated = cell == core.goal
        reward = terminated.astype(jnp.float32)
        time = state.time + 1
        truncated = (time >= self.spec.max_episode_steps) & ~terminated
        done = terminated | truncated
        episode_return = state.episode_return + reward
        episode_length = state.episode_length + 1

        episode = state.episode + done.astype(jnp.int32)
        goal = self._goal_of(episode, state.transfer_goal)
        cell_next = jnp.where(done, jax.vmap(start_cell)(reset_keys, goal), cell)
        next_state = FourRoomsState(
            core=FourRoomsCore(cell_next, goal),
            transfer_goal=state.transfer_goal,
            episode=episode,
            time=jnp.where(done, 0, time),
            episode_return=jnp.where(done, 0.0, episode_return),
            episode_length=jnp.where(done, 0, episode_length),
        )
        timestep = TimeStep(
            obs=self._observe(cell_next, goal),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            final_obs=self._observe(cell, core.goal),
            info=episode_info(episode_return, episode_length, done),
        )
        return next_state, timestep

    @property
    def core(self) -> EnvCore:
        """One env with the goal at the east doorway, no time limit: what videos run."""
        cfg = self.cfg

        def reset(key: Key) -> tuple[FourRoomsCore, Array]:
            goal = jnp.int32(EAST_DOORWAY_GOAL)
            cell = start_cell(key, goal)
            return FourRoomsCore(cell, goal), observe(cell, goal, cfg.observation)

        def step(key: Key, core: FourRoomsCore, action: Array) -> tuple[Any, ...]:
            cell = self._move(key, core.cell, jnp.asarray(action, jnp.int32))
            terminated = cell == core.goal
            obs = observe(cell, core.goal, cfg.observation)
            return core._replace(cell=cell), obs, terminated.astype(jnp.float32), terminated

        return EnvCore(reset, step)

    def make_state_renderer(self) -> GridRenderer:
        return GridRenderer()


def make_fourrooms(cfg: FourRoomsConfig, num_envs: int) -> FourRoomsEnv:
    """Four-rooms behind our batched functional `Env`."""
    if cfg.observation == "onehot":
        shape: tuple[int, ...] = (NUM_CELLS,)
    else:
        shape = (HEIGHT, WIDTH, 3)
    spec = EnvSpec(
        name=cfg.id,
        family="jax",
        observation_space=Box(np.zeros(shape, np.float32), np.ones(shape, np.float32), shape),
        action_space=Discrete(len(ACTIONS)),
        num_envs=num_envs,
        max_episode_steps=cfg.max_episode_steps or FOURROOMS_MAX_EPISODE_STEPS[cfg.id],
    )
    return FourRoomsEnv(cfg, spec)


# --- drawing ------------------------------------------------------------------------------------

WALL_RGB = (64, 64, 64)
FLOOR_RGB = (255, 255, 255)
LINE_RGB = (220, 220, 220)
AGENT_RGB = (214, 39, 40)
GOAL_RGB = (44, 160, 44)
# The heat map's ends: `vmin` in pale yellow, `vmax` in dark blue.
LOW_RGB = (255, 255, 217)
HIGH_RGB = (8, 29, 88)


def draw_grid(
    values: np.ndarray | None = None,
    *,
    agent: int | None = None,
    goal: int | None = None,
    scale: int = 16,
    vmin: float = 0.0,
    vmax: float = 1.0,
) -> np.ndarray:
    """uint8[13 * scale, 13 * scale, 3]: the layout, free cells coloured by `values` (float[104],
    one per cell, e.g. an option's termination probabilities; clipped to [vmin, vmax], NaN left
    white), the goal as a green square and the agent as a red disc."""
    image = np.empty((HEIGHT, WIDTH, 3), np.float64)
    image[WALLS] = WALL_RGB
    image[~WALLS] = FLOOR_RGB
    if values is not None:
        values = np.asarray(values, np.float64)
        if values.shape != (NUM_CELLS,):
            raise ValueError(f"draw_grid: values must be float[{NUM_CELLS}]; got {values.shape}")
        t = np.clip((values - vmin) / max(vmax - vmin, 1e-12), 0.0, 1.0)[:, None]
        colours = (1 - t) * np.asarray(LOW_RGB) + t * np.asarray(HIGH_RGB)
        known = ~np.isnan(values)
        image[CELLS[known, 0], CELLS[known, 1]] = colours[known]
    frame = np.repeat(np.repeat(image, scale, axis=0), scale, axis=1)
    if scale >= 4:  # cell borders on the floor, so that cells of equal value stay apart
        floor = np.repeat(np.repeat(~WALLS, scale, axis=0), scale, axis=1)
        border = np.zeros(frame.shape[:2], bool)
        border[::scale, :] = border[:, ::scale] = True
        frame[floor & border] = LINE_RGB
    y, x = np.mgrid[0:scale, 0:scale] + 0.5
    if goal is not None:
        row, col = CELLS[goal]
        inset = max(scale // 8, 1) if scale >= 4 else 0
        block = frame[row * scale : (row + 1) * scale, col * scale : (col + 1) * scale]
        block[inset : scale - inset, inset : scale - inset] = GOAL_RGB
    if agent is not None:
        row, col = CELLS[agent]
        disc = (y - scale / 2) ** 2 + (x - scale / 2) ** 2 <= (0.35 * scale) ** 2
        frame[row * scale : (row + 1) * scale, col * scale : (col + 1) * scale][disc] = AGENT_RGB
    return frame.round().astype(np.uint8)


class GridRenderer:
    """Draws single (unbatched) `FourRoomsCore` states for videos (`jaxrl.video.StateRenderer`)."""

    fps = RENDER_FPS

    def draw(self, state: FourRoomsCore) -> np.ndarray:
        return draw_grid(agent=int(state.cell), goal=int(state.goal))

    def close(self) -> None:
        pass
