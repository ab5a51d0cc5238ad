"""Policy losses and the one place where their normalisation lives (aggregate.py).

The names a config picks among live here and load nothing, so that checking a config loads
no torch: the loss code itself is imported from its own modules (ppo_clip.py, aggregate.py)."""

MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum")
"""How token losses make the batch loss (`loss.aggregation`; aggregate.py)."""

CORRECTIONS = {
    "on-policy": "toolgym.training.losses.behaviour:on_policy",
    "decoupled": "toolgym.training.losses.behaviour:decoupled",
    "truncated-is": "toolgym.training.losses.behaviour:truncated_is",
}
"""How samples of an older policy are weighted (`loss.mode`; behaviour.py): each name's
function, imported when the loss first runs."""

__all__ = ["CORRECTIONS", "MODES"]
