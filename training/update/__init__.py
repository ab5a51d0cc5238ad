"""The update: batches, the learner's loss passes, the optimizer step, token fidelity, weight sync."""
