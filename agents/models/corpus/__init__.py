"""Generated pretraining text for the built-in models: copying, key-value recall, tool-call
syntax and chat turns, mixed with named envs' scripted transcripts."""

from toolgym.agents.models.corpus.mix import CorpusSpec, documents, packed

__all__ = ["CorpusSpec", "documents", "packed"]
