"""Agents: chat rendering with exact token bookkeeping, the rollout loop, generation engines.

(Arrives with the rollouts work; the package exists so the layout and the namespace are fixed.)
"""
