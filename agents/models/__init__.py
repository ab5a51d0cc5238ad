"""Making models: a fresh one of a named size, its pretraining corpus, loading, and where it runs."""
