"""Search environments and their pieces: answer scoring, a synthetic multi-hop world, and the
engine each env talks to."""

from toolgym.envs.search.env import SearchEnv, SearchR1Env
from toolgym.envs.search.propose import ProposeSearchEnv

__all__ = ["ProposeSearchEnv", "SearchEnv", "SearchR1Env"]
