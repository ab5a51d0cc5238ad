"""Self-play: one policy proposes verifiable tasks and solves them (proposer_rewards.py says
what a proposal earns)."""

from toolgym.training.selfplay.proposer_rewards import PROPOSER_REWARDS, proposer_reward

__all__ = ["PROPOSER_REWARDS", "proposer_reward"]
