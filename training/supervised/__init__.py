"""Supervised training: pretraining, SFT on demonstrations (the warm start), the search simulator's SFT."""
