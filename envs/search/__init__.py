"""Search environments and their pieces: answer scoring, a synthetic multi-hop world."""
