"""The search space: tunable flags, rule sets, repair, flags -> argv. Pure code."""

from tuner.space.argv import flags_argv, shell_line
from tuner.space.baselines import Baseline, baselines
from tuner.space.params import CATALOGUE, Param, param
from tuner.space.repair import Repaired, repair
from tuner.space.rules import DEFAULT_RULE_SET, RULE_SETS, Context, Rule, RuleSet, rule_set
from tuner.space.space import SearchSpace, build_space

__all__ = [
    "Baseline", "CATALOGUE", "Context", "DEFAULT_RULE_SET", "Param", "RULE_SETS", "Repaired",
    "Rule", "RuleSet", "SearchSpace", "baselines", "build_space", "flags_argv", "param",
    "repair", "rule_set", "shell_line",
]
