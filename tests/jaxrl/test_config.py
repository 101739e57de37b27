"""`jaxrl.config`'s helpers for refusing bad input."""

from __future__ import annotations

from jaxrl.config import did_you_mean, suggest


def test_did_you_mean_names_near_misses_best_first_and_nothing_else() -> None:
    # difflib's ratio 2·M/T: 'ppo2' against 'ppo' 6/7 ≈ 0.86, against 'ppoc' 6/8 = 0.75 (the
    # cutoff, kept); 'dqn' and 'es' share nothing with it.
    assert did_you_mean("ppo2", ["es", "ppo", "ppoc", "dqn"]) == "did you mean ppo or ppoc? "
    assert did_you_mean("env_step", ["env_steps", "target_return"]) == "did you mean env_steps? "
    # 'foo' against 'ppo': one 'o' in common, 2/6: no hint rather than a wild guess.
    assert did_you_mean("foo", ["es", "ppo"]) == ""
    # At most three, tied scores (8/10 each) in difflib's order.
    hint = did_you_mean("abcd1", ["abcd2", "abcd3", "abcd4", "abcd5", "xyz"])
    assert hint == "did you mean abcd5, abcd4 or abcd3? "


def test_suggest_lists_names_with_or_before_the_last() -> None:
    assert suggest([]) == ""
    assert suggest(["env.num_envs"]) == "did you mean env.num_envs? "
    assert suggest(["a", "b"]) == "did you mean a or b? "
    assert suggest(["a", "b", "c"]) == "did you mean a, b or c? "
