"""Agents never import each other: a piece two agents share lives in `jaxrl/`. Each imports its
settings from `agents/configs.py`, which is no agent and imports none. Agents do not import
`envs` either (they see an env through `jaxrl.env.Env` and its spec), but for one piece of env
knowledge named in `ENV_IMPORTS`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

AGENTS = Path(__file__).resolve().parents[2] / "agents"
AGENT_MODULES = sorted(p.name for p in AGENTS.glob("*.py") if p.name != "__init__.py")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def within(package: str, modules: set[str]) -> set[str]:
    """The modules of `modules` that are `package` or inside it."""
    return {m for m in modules if m == package or m.startswith(f"{package}.")}


@pytest.mark.parametrize("module", AGENT_MODULES)
def test_agent_module_imports_no_other_agent(module: str) -> None:
    imports = imported_modules(AGENTS / module) - {"agents.configs"}
    assert not within("agents", imports), imports


# P-DQN's `agent.parameter_prior`: Goal's hand-made parameter policy (MP-DQN's), looked up by the
# env's name, so that a policy loaded from its run's spec alone (`jaxrl.policy`) finds it too.
ENV_IMPORTS = {"pdqn.py": {"envs.hybrid"}}


@pytest.mark.parametrize("module", AGENT_MODULES)
def test_agent_module_imports_no_env_module_but_the_named_ones(module: str) -> None:
    env_imports = within("envs", imported_modules(AGENTS / module))
    assert env_imports <= ENV_IMPORTS.get(module, set()), env_imports


def test_the_check_sees_an_agent_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from agents.td3 import TD3Config\nimport agents.ppo\n")
    assert imported_modules(bad) == {"agents.td3", "agents.ppo"}
