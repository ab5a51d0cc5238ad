"""Self-play: one policy proposes verifiable tasks and solves them (proposer_rules.py says
what a proposal earns)."""

from toolgym.training.selfplay.proposer_rules import PROPOSER_RULES, proposer_rule

__all__ = ["PROPOSER_RULES", "proposer_rule"]
