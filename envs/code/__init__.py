"""Code environments: HumanEval and user code tasks graded by hidden tests (toolgym/Code-v0),
and math problems solved by running code
(toolgym/MathCode-v0), reasoning about small programs (toolgym/CodeReason-v0) and proposing
them for self-play (toolgym/ProposeCode-v0). Code runs in toolgym.sandbox's warm pools."""

from toolgym.envs.code.env import CodeEnv
from toolgym.envs.code.math_env import MathCodeEnv
from toolgym.envs.code.math_problems import generate_problem
from toolgym.envs.code.propose import ProposeCodeEnv
from toolgym.envs.code.reason import CodeReasonEnv
from toolgym.envs.code.tasks import CodeTask

__all__ = [
    "CodeEnv", "CodeReasonEnv", "CodeTask", "MathCodeEnv", "ProposeCodeEnv", "generate_problem",
]  # fmt: skip
