from toolgym.envs.reasoning_gym.env import ReasoningGymEnv
from toolgym.envs.reasoning_gym.tasks import ReasoningGymTasks

__all__ = ["ReasoningGymEnv", "ReasoningGymTasks"]
