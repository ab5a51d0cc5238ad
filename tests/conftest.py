"""Shared test set-up: fixture modules importable, helpers to run the CLI as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(FIXTURES))


def run_cli(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run `toolgym ARGS` in a fresh process (as a user would), capturing its output."""
    full_env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(FIXTURES), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "toolgym", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A tiny qwen2-architecture model with a locally trained tokenizer (built once)."""
    from toolgym.agents.modelinit import init_model

    return init_model(tmp_path_factory.mktemp("tiny-model"), "qwen2", "tiny", seed=0)


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)
