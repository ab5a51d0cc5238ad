"""Agents: chat rendering with exact token bookkeeping, generation engines, the rollout loop
and collector, trajectories, and the OpenAI-compatible model server.

Heavy parts (torch, transformers) load only when their modules are imported.
"""
