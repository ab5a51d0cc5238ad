"""RUN_DIR/train.log: the run as a user reads it, kept with the run. When it started and on
what, a line per step (the console's), every warning toolgym logs while it trains (with the
advice of run/advice.py) and, when the run ends however it ends, its summary in words (the
figures are in summary.json, run/summary.py). A resumed run appends to the same file."""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from toolgym.envs.saved_settings import FILE as SAVED_SETTINGS
from toolgym.errors import EpisodesMasked, one_line
from toolgym.log import get_logger
from toolgym.training.run.advice import Advisor, Settings
from toolgym.training.run.files import RUN_LOG, read_metrics, read_summary
from toolgym.training.run.summary import run_summary, write_summary

if TYPE_CHECKING:  # the CLI's progress reads this module: no config, numpy or torch
    from toolgym.training.config import TrainConfig

log = get_logger(__name__)

STEP_FIELDS = (
    ("success", ("rollout/success",)),
    ("reward", ("rollout/reward",)),
    ("valid", ("rollout/valid_actions",)),
    ("loss", ("train/loss",)),
    ("kl", ("train/kl_ref", "train/approx_kl")),
    ("anchors", ("adv/anchor_coverage_after_first",)),
    ("held-out", ("held_out/success", "eval/success")),
)
"""What a training step's line shows, and the record keys it reads (the first present)."""
KL_NOISE = 1e-6
"""A KL below this is rounding, not movement: the update was measured against the very
weights that sampled (one pass over the batch), so the line leaves it out."""


def step_line(record: dict[str, Any], total: int, seconds: float, eta_s: float | None) -> str:
    """`step 3/40  success 0.438  ...  kl 0.00041  ...  9.8s  eta 6:12`: KL in plain decimals
    (to the start policy under loss.kl_coef, else the update's to the policy that sampled);
    an evaluation's held-out success (its sets pooled, as the summary gives it) with its 95%
    interval."""
    width = len(str(total))
    parts = [f"step {int(record['step']):>{width}}/{total}"]
    for name, keys in STEP_FIELDS:
        key = next((k for k in keys if isinstance(record.get(k), int | float)), None)
        value = None if key is None else record[key]
        if value is None or (name == "kl" and abs(value) < KL_NOISE):
            continue
        if name == "kl":
            parts.append(f"kl {value:.5f}" if value < 0.01 else f"kl {value:.3f}")
        elif name == "held-out" and isinstance(record.get(f"{key}_low"), int | float):
            low, high = record[f"{key}_low"], record.get(f"{key}_high")
            parts.append(f"eval {value:.3f} [{low:.2f}, {high:.2f}]")
        else:
            parts.append(f"{name} {value:.3f}")
    parts += [f"{seconds:.1f}s", f"eta {clock(eta_s)}"]
    return "  ".join(parts)


def clock(seconds: float | None) -> str:
    """`73.2` -> `1:13`; `None` (not yet known) -> `?`."""
    if seconds is None:
        return "?"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class RunLog:
    """Open for the run's length (`with RunLog(...) as report:`); `step(record)` after each
    step's record is logged. `start_step`: the steps an earlier process of this run did."""

    def __init__(self, run_dir: Path, config: TrainConfig, start_step: int = 0) -> None:
        self.run_dir, self.config, self.start_step = run_dir, config, start_step
        optim, rollout = config.optim, config.rollout
        warm_start = "toolgym warm-start" if config.harness else "toolgym sft"
        trained = (Path(str(config.model)) / SAVED_SETTINGS).is_file()  # a warm start saves them
        selfplay = config.selfplay is not None
        self.advisor = Advisor(Settings(config.steps, optim.lr, rollout.rollouts_per_task,
                                        str(run_dir), warm_start, trained, selfplay,
                                        config.advantage.centre_turns))  # fmt: skip
        for record in read_metrics(run_dir):  # a resumed run's earlier steps, told already
            if record["step"] <= start_step:
                self.advisor.read(record)
        earlier = read_summary(run_dir) if start_step else None
        self.earlier_s = float(earlier.get("wall_s", 0.0)) if earlier else 0.0
        self.started = self.previous = self.paced_from = time.perf_counter()
        """`paced_from`: where the steps' pace is timed from (after the start's evaluation)."""
        self.lock = threading.Lock()
        self.file = (run_dir / RUN_LOG).open("a", encoding="utf-8", errors="backslashreplace")
        self.handler = _Warnings(self)
        get_logger("toolgym").addHandler(self.handler)

    def __enter__(self) -> Self:
        c = self.config
        envs = ", ".join(e.id for e in c.mixture)
        doing = f"resuming after step {self.start_step}" if self.start_step else "training"
        self.write(f"{doing} {c.model} on {envs} for {c.steps} steps in {self.run_dir}")
        return self

    def step(self, record: dict[str, Any]) -> None:
        """The step's line, then any warning its record calls for (on the console too)."""
        now, step = time.perf_counter(), int(record["step"])
        done = step - self.start_step
        eta = (now - self.paced_from) / done * (self.config.steps - step) if done > 0 else None
        self.write(step_line(record, self.config.steps, now - self.previous, eta))
        self.previous = now
        if step == self.start_step:  # the start's evaluation: the steps' pace counts from here
            self.paced_from = now
        for warning in self.advisor.read(record):
            log.warning(warning)

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            records = read_metrics(self.run_dir)
            status = ending(self.config, records, exc)
            wall = self.earlier_s + time.perf_counter() - self.started
            lost = exc.reasons if isinstance(exc, EpisodesMasked) else None
            summary = run_summary(self.config, records, status, wall, lost)
            write_summary(self.run_dir, summary)
            for line in summary_lines(summary):
                self.write(line)
        finally:
            get_logger("toolgym").removeHandler(self.handler)
            self.file.close()

    def write(self, text: str) -> None:
        with self.lock:
            self.file.write(f"{datetime.now():%Y-%m-%d %H:%M:%S}  {text}\n")
            self.file.flush()


class _Warnings(logging.Handler):
    """toolgym's warnings and errors while the run trains, into its log."""

    def __init__(self, run_log: RunLog) -> None:
        super().__init__(logging.WARNING)
        self.run_log = run_log

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.run_log.write(f"{record.levelname.lower()}: {record.getMessage()}")
        except Exception:
            self.handleError(record)


def ending(config: TrainConfig, records: list[dict[str, Any]], exc: BaseException | None) -> str:
    """How the run ended, in the summary's words."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if exc is not None:
        return f"failed: {one_line(exc)}"
    last = max((r["step"] for r in records), default=0)
    if last < config.steps and config.max_env_steps is not None:
        return f"finished: max_env_steps ({config.max_env_steps:g}) spent"
    return "finished"


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The summary in words, a line per fact."""
    s = summary
    phases = ", ".join(f"{p} {clock(v)}" for p, v in s["time_s"].items() if v)
    lines = [
        f"{s['status']} {s['run_dir']} at step {s['steps']} of {s['steps_planned']} "
        f"({s['env_steps']:g} env steps) in {clock(s['wall_s'])}"
        + (f"; by phase: {phases}" if phases else "")
    ]
    pooled = s.get("held_out") or ["eval"]
    of = f" (pooled: {', '.join(pooled)})" if len(pooled) > 1 else ""
    for when in ("start", "end"):
        if s[when] is not None:
            lines.append(
                f"held-out success at the {when} (step {s[when]['step']}){of}: {_rate(s[when])}"
            )
    sets = s.get("sets") or {}
    if len(sets) > 1:  # each set's own, the transfer sets among them
        for name, figures in sets.items():
            start, end = figures["start"], figures["end"]
            said = [f"{when} {_rate(f)}" for when, f in (("start", start), ("end", end)) if f]
            if said:
                lines.append(f"eval set {name}: {'; '.join(said)}")
    first, last = s["rollout_success"]["first"], s["rollout_success"]["last"]
    if first is not None and last is not None:
        lines.append(f"rollout success: {first:.3f} at the first step, {last:.3f} at the last")
    masked = s["masked"]
    if masked["episodes"]:
        why = "; ".join(f"{n} x {reason}" for reason, n in list(masked["reasons"].items())[:5])
        lines.append(f"masked (left out of training and of every rate): {masked['episodes']} "
                     f"episodes: {why}")  # fmt: skip
    else:
        lines.append("masked: no episode")
    if s["untrained_groups"]:
        lines.append(f"groups played but kept out of the update: {s['untrained_groups']}")
    if s["no_signal_steps"]:
        lines.append(f"steps whose groups all carried no signal: {s['no_signal_steps']}")
    return lines


def _rate(part: dict[str, Any]) -> str:
    if part.get("low") is None or part.get("high") is None:
        return f"{part['success']:.3f}"
    items = f", {part['items']} items" if part.get("items") is not None else ""
    return f"{part['success']:.3f} (95% {part['low']:.3f} to {part['high']:.3f}{items})"
