"""toolgym/Arithmetic-v0: arithmetic questions answered with a calculator and an answer tool."""

from toolgym.envs.arithmetic.env import ArithmeticEnv, generate_task

__all__ = ["ArithmeticEnv", "generate_task"]
