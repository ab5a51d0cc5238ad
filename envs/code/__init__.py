"""Code environments: HumanEval and user code tasks graded by hidden tests (toolgym/Code-v0),
and math problems solved by running code
(toolgym/MathCode-v0). Code runs in toolgym.sandbox's warm pools."""

from toolgym.envs.code.env import CodeEnv
from toolgym.envs.code.math_env import MathCodeEnv
from toolgym.envs.code.math_problems import generate_problem
from toolgym.envs.code.tasks import CodeTask

__all__ = ["CodeEnv", "CodeTask", "MathCodeEnv", "generate_problem"]
