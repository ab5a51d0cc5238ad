"""What the viewer reads from the run directories it was given, and nothing else: each run's
config, records, summary and kept rollouts, by run number and step number, never by a path
a client sends. A file whose real path lies outside its run directory (a symlink out) is
refused. Step files are parsed once per change and kept (a few at a time), so a step of a
thousand episodes opens in about a second and its pages come from memory."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolgym.agents.trajectory import Trajectory, read_jsonl
from toolgym.errors import ConfigError
from toolgym.http import BadRequest
from toolgym.training.run.files import (
    METRICS,
    RUN_LOG,
    SUMMARY,
    kept_steps,
    read_metrics,
    read_summary,
    rollouts_path,
)

STEPS_KEPT_PARSED = 8
"""Step files held parsed at once (the least recently opened goes first)."""
PIECE_CONTEXT = 8
"""Tokens decoded before each one to find its own text."""
PAGE_MAX = 500
"""The most episodes one page holds."""
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
"""Hosts only this machine reaches: the viewer binds to the first unless told otherwise."""


class NotFound(BadRequest):
    """What the client asked for is not in the runs served (a 404, said in words)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=404)


@dataclass
class StepFile:
    trajectories: list[Trajectory]
    skipped: list[str]


@dataclass
class Run:
    path: Path
    """Resolved: every file served lies under it."""
    name: str
    parsed: OrderedDict[tuple[int, float, int], StepFile] = field(default_factory=OrderedDict)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    metrics_seen: tuple[float, int] | None = None
    """The records as last read, and the file's (mtime, size) then."""
    tokenizer: Any = None
    tokenizer_problem: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Held while a step file is parsed or the tokenizer loads: pages opened together (each
    in a thread of its own) wait for one parse or load, not race it."""

    def inside(self, path: Path) -> Path:
        """`path` if its real path lies under the run, else NotFound (a symlink out)."""
        real = path.resolve()
        if not real.is_relative_to(self.path):
            raise NotFound(f"{path.name} lies outside the run directory {self.path}")
        return real

    def config(self) -> dict[str, Any]:
        path = self.path / "config.json"
        if not path.is_file():
            return {}
        try:
            data = json.loads(self.inside(path).read_text(errors="replace"))
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    def records(self, since: int = -1) -> list[dict[str, Any]]:
        """The records of steps after `since` (the viewer polls for new ones every few
        seconds: the file is read again only when it changed)."""
        path = self.path / METRICS
        if not path.exists():
            return []
        stat = self.inside(path).stat()
        if (stat.st_mtime, stat.st_size) != self.metrics_seen:
            try:
                self.metrics = read_metrics(self.path)
            except (ConfigError, RecursionError):  # a damaged line: no curves, no crash
                self.metrics = []
            self.metrics_seen = (stat.st_mtime, stat.st_size)
        return [r for r in self.metrics if r["step"] > since]

    def summary(self) -> dict[str, Any] | None:
        """The run's summary; None when it has none, it is unreadable, or it lies outside the
        run (the run is still listed, with its curves)."""
        if (self.path / SUMMARY).exists():
            try:
                self.inside(self.path / SUMMARY)
            except NotFound:
                return None
        try:
            return read_summary(self.path)
        except RecursionError:
            return None

    def log_tail(self, lines: int = 200) -> list[str]:
        path = self.path / RUN_LOG
        if not path.is_file():
            return []
        return self.inside(path).read_text(errors="replace").splitlines()[-lines:]

    def steps(self) -> list[int]:
        """The steps whose rollouts were kept, in order."""
        return list(kept_steps(self.path))

    def step_file(self, step: int) -> StepFile:
        path = rollouts_path(self.path, step)
        if not path.is_file():
            raise NotFound(f"run {self.name} kept no rollouts of step {step}")
        real = self.inside(path)
        stat = real.stat()
        key = (step, stat.st_mtime, stat.st_size)
        with self.lock:
            if key in self.parsed:
                self.parsed.move_to_end(key)
                return self.parsed[key]
            skipped: list[str] = []
            parsed = StepFile(read_jsonl(real, skipped), skipped)
            self.parsed[key] = parsed
            while len(self.parsed) > STEPS_KEPT_PARSED:
                self.parsed.popitem(last=False)
            return parsed

    def token_pieces(self, ids: list[int]) -> list[str] | None:
        """Each token's text (None: no tokenizer for this run could be loaded). A token's
        text is what it adds to the few before it (a character may span tokens), so a turn
        costs time in proportion to its length, not its square."""
        with self.lock:
            if self.tokenizer is None and self.tokenizer_problem is None:
                self.tokenizer = self._load_tokenizer()
        if self.tokenizer is None:
            return None
        pieces = []
        for k in range(len(ids)):
            start = max(0, k - PIECE_CONTEXT)
            before = self.tokenizer.decode(ids[start:k]) if k > start else ""
            text = self.tokenizer.decode(ids[start : k + 1])
            pieces.append(text[len(before) :] if text.startswith(before) else text)
        return pieces

    def _load_tokenizer(self) -> Any:
        """The run's own: its trained policy's, else the model it started from."""
        from transformers import AutoTokenizer

        for candidate in (self.path / "policy", Path(str(self.config().get("model", "")))):
            if (candidate / "tokenizer_config.json").is_file():
                try:
                    return AutoTokenizer.from_pretrained(candidate)
                except (OSError, ValueError) as exc:
                    self.tokenizer_problem = f"{candidate}: {exc}"
                    return None
        self.tokenizer_problem = "neither the run's policy nor its model holds a tokenizer"
        return None


def open_runs(paths: list[Path]) -> list[Run]:
    """The runs to serve: each path a run directory, or a folder of them (the quickstart's
    `runs/quickstart` holds its RL run beside its models), whose runs are served under
    `folder/run`. A path that is neither is a ConfigError up front."""
    runs = []
    for path in paths:
        if _is_run(path):
            runs.append(Run(path.resolve(), name=path.name or str(path)))
            continue
        inside = sorted(p for p in path.iterdir() if _has_run_records(p)) if path.is_dir() else []
        if not inside:
            raise ConfigError(
                f"{path} is not a run directory (no config.json or {METRICS}), nor a folder of runs"
            )
        runs += [Run(p.resolve(), name=f"{path.name}/{p.name}") for p in inside]
    return runs


def _is_run(path: Path) -> bool:
    return path.is_dir() and ((path / "config.json").is_file() or (path / METRICS).is_file())


def _has_run_records(path: Path) -> bool:
    """A run inside a folder: one that recorded something (a model's folder also holds a
    config.json)."""
    return path.is_dir() and any((path / name).is_file() for name in (METRICS, SUMMARY, RUN_LOG))
