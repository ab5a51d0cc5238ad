"""A run's record: its directory, checkpoint, metrics, log, summary, advice and plots, and rescoring."""
