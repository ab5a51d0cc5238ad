"""Two ways credit goes wrong that a run says as they happen, read from the steps' records.

A valid-call collapse: the share of valid tool calls falls far below where it just was. Its
cause is in the records of the updates since: malformed turns paid more than valid ones
(adv/invalid_turns above adv/valid_turns: a reward that prefers them), valid turns pushed
down as a whole (adv/valid_turns below PUSHED: every failure's negative advantage lands on
the call format every action shares), or an update that moved the policy far
(train/approx_kl, and train/approx_kl_after: where the last step left it).

A gamed reward: a proxy (any reward that is not the verified outcome; its agreement with
that outcome is logged each step, rewards/agreement.py) rises while success falls, each by
more than twice its standard error, over the last steps against the steps of highest
success before them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from toolgym.intervals import Z95

FALL = 0.3
"""A collapse: the valid-call rate this far (in share of calls) below its best of the last
RECENT steps. A step of 64 episodes holds hundreds of calls, so its rate's noise is a few
points."""
RECENT = 5
PUSHED = -0.2
"""Valid turns whose mean advantage is below this (a fifth of a group-normalised unit) were
pushed down as a whole; GiGPO's usual step has them a little below 0, as failures run longer."""
FAR = 0.05
"""An update whose approx KL from the policy that played is above this moved far."""
SURE = 2.0
"""A rise or fall counts when it is this many standard errors."""
LEAST_FALL = 0.05
"""...and success fell by at least this much."""


def number(record: dict[str, Any], key: str) -> float | None:
    value = record.get(key)
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


@dataclass
class CallCollapse:
    """Warns once a collapse, again only after the rate came back."""

    lr: float
    centred: bool = False
    """The run's turns are centred already (`advantage.centre_turns`): not advised again."""
    records: list[dict[str, Any]] = field(default_factory=list)
    """The last RECENT steps' records."""
    fallen_from: float | None = None
    """The rate a collapse under way fell from: no warning again until it comes back near it."""
    told: bool = False
    """A collapse was warned of in this run."""

    def read(self, record: dict[str, Any]) -> str | None:
        rate = number(record, "rollout/valid_actions")
        if rate is None:
            return None
        recent, self.records = self.records, [*self.records[-(RECENT - 1) :], record]
        if self.fallen_from is not None:
            if rate >= self.fallen_from - FALL / 2:
                self.fallen_from = None
            return None
        if not recent:
            return None
        best = max(recent, key=lambda r: number(r, "rollout/valid_actions") or 0.0)
        top = number(best, "rollout/valid_actions") or 0.0
        if rate > top - FALL:
            return None
        self.fallen_from, self.told = top, True
        updates = [r for r in recent if r["step"] >= best["step"]]
        return (
            f"step {record['step']}: valid calls collapsed from {top:.0%} (step {best['step']}) "
            f"to {rate:.0%}. {self.cause(updates)}"
        )

    def cause(self, updates: Sequence[dict[str, Any]]) -> str:
        """What the updates since the best step did to calls, from their records: each kind
        of harm at the first update that shows it."""
        paid = paid_malformed(updates)
        found = [finding for finding in (paid, pushed_down(updates), moved_far(updates)) if finding]
        if not found:
            return (
                "No cause shows in the records: the updates since neither paid malformed calls "
                "over valid ones nor pushed valid calls down, and none moved the policy far. "
                "Read the collapsed step's calls (`toolgym rollouts show`)."
            )
        return "What the updates since did: " + "; ".join(found) + f". {self.remedy(paid)}"

    def remedy(self, paid: str | None) -> str:
        """What to try: `paid`, the finding that a reward paid malformed calls, if any."""
        if paid:
            return "Fix what the reward that prefers malformed calls pays, or take it out."
        if self.centred:
            return (
                f"Turns are centred already: try a lower optim.lr (now {self.lr:g}); "
                "docs/which-method.md has what optim.target_kl did."
            )
        return (
            "Try advantage.centre_turns (the call format every turn shares then gets no net "
            f"push) or a lower optim.lr (now {self.lr:g}); docs/which-method.md has what each "
            "did, and what optim.target_kl did."
        )


def paid_malformed(updates: Sequence[dict[str, Any]]) -> str | None:
    for r in updates:
        paid, valid = number(r, "adv/invalid_turns"), number(r, "adv/valid_turns")
        if paid is not None and valid is not None and paid > valid:
            proxies = sorted({k.split("/")[1] for k in r if k.startswith("proxy/")})
            named = f", and the run has rewards besides the verified outcome: {', '.join(proxies)}"
            return (
                f"step {r['step']}'s update paid malformed calls more than valid ones (their turns' "
                f"mean advantage {paid:+.2f} against {valid:+.2f}){named if proxies else ''}"
            )
    return None


def pushed_down(updates: Sequence[dict[str, Any]]) -> str | None:
    for r in updates:
        valid = number(r, "adv/valid_turns")
        if valid is not None and valid < PUSHED:
            success = number(r, "rollout/success")
            failed = f"; {1 - success:.0%} of its episodes failed" if success is not None else ""
            return (
                f"step {r['step']}'s update pushed valid calls down as a whole (their turns' mean "
                f"advantage {valid:+.2f}{failed}: each failure's negative advantage lands on the "
                "call format that every action shares)"
            )
    return None


def moved_far(updates: Sequence[dict[str, Any]]) -> str | None:
    """An update that left the policy far from the one that played: its mini-batches' mean
    KL, their largest (under optim.target_kl, the held mini-batch's, which measured what the
    steps before it did), or the KL after its last step."""
    for r in updates:
        keys = ("train/approx_kl", "train/approx_kl_max", "train/approx_kl_after")
        kls = [v for key in keys if (v := number(r, key))]
        kl = max(kls, default=None)
        if kl is not None and kl > FAR:
            return (
                f"step {r['step']}'s update moved the policy far (approx KL {kl:.3f}, above {FAR})"
            )
    return None


@dataclass
class GamedReward:
    """Warns once per proxy reward whose score rose while success fell: the last `window`
    steps against the `window` steps before them where success was highest, each change
    more than SURE standard errors (success's over the windows' episodes, the proxy's from
    each step's interval over its episodes), so a change inside one step shows too."""

    window: int
    warned: set[str] = field(default_factory=set)
    records: list[dict[str, Any]] = field(default_factory=list)
    """The last 2 * window steps' records."""
    best: list[dict[str, Any]] | None = None
    """The `window` steps of highest success among those before the last `window`."""

    def read(self, record: dict[str, Any]) -> list[str]:
        if number(record, "rollout/success") is None:
            return []
        w = self.window
        self.records = [*self.records[-(2 * w - 1) :], record]
        if len(self.records) < 2 * w:
            return []
        before, after = self.records[:w], self.records[w:]
        if self.best is None or success(before)[0] > success(self.best)[0]:
            self.best = before
        before = self.best
        (was, was_error), (now, now_error) = success(before), success(after)
        fall = was - now
        if fall < LEAST_FALL or fall < SURE * math.hypot(was_error, now_error):
            return []
        out = []
        for name in sorted({k.split("/")[1] for k in record if k.startswith("proxy/")}):
            (old, old_error), (new, new_error) = score(before, name), score(after, name)
            rose = new - old  # nan where either window logged no score: never a rise
            if name in self.warned or not rose > SURE * math.hypot(old_error, new_error):
                continue
            self.warned.add(name)
            out.append(
                f"step {record['step']}: reward '{name}' rose from {old:.3f} to {new:.3f} while "
                f"success fell from {was:.1%} to {now:.1%} (steps {span(before)} against "
                f"{span(after)}): the policy may be gaming it.{agreement(name, before, after)} "
                "Read the failed episodes it pays most, then fix what it pays or lower its "
                "weight."
            )
        return out


def span(records: Sequence[dict[str, Any]]) -> str:
    return f"{records[0]['step']}-{records[-1]['step']}"


def success(records: Sequence[dict[str, Any]]) -> tuple[float, float]:
    """Rollout success over the records' episodes, and its standard error."""
    played = [(min(max(number(r, "rollout/success") or 0.0, 0.0), 1.0),
               max(number(r, "rollout/episodes") or 1.0, 1.0)) for r in records]  # fmt: skip
    episodes = sum(n for _, n in played)  # a damaged record counts as one episode
    rate = sum(p * n for p, n in played) / episodes
    return rate, math.sqrt(rate * (1 - rate) / episodes)


def score(records: Sequence[dict[str, Any]], name: str) -> tuple[float, float]:
    """A proxy's mean score over the records' steps, and its standard error (from each step's
    95% interval over its episodes; a step without one counts as exact)."""
    key = f"proxy/{name}/score"
    means, errors = [], []
    for r in records:
        value, low, high = (number(r, key + end) for end in ("", "_low", "_high"))
        if value is not None:
            means.append(value)
            errors.append((high - low) / (2 * Z95) if low is not None and high is not None else 0.0)
    if not means:
        return math.nan, math.inf
    return statistics.fmean(means), math.sqrt(sum(e * e for e in errors)) / len(means)


def agreement(name: str, before: Sequence[dict], after: Sequence[dict]) -> str:
    """The proxy's last logged agreement with the verified outcome, in words."""
    key = f"proxy/{name}/agreement"
    said = [r for r in (*before, *after) if number(r, key) is not None]
    if not said:
        return ""
    r = said[-1]
    return (
        " Its agreement with the verified outcome (the chance a solved episode scores above a "
        f"failed one) was {r[key]:.2f} (95% {r[key + '_low']:.2f} to {r[key + '_high']:.2f}) at "
        f"step {r['step']}."
    )
