"""Scaling out on Ray: env pools and engines as actors, and what they report."""
