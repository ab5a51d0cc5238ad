"""`toolgym model pretrain`: the generated corpus, the probes and the command end to end."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from conftest import run_cli
from toolgym.agents.models.corpus import CorpusSpec, documents
from toolgym.agents.models.corpus.kinds import KINDS
from toolgym.agents.models.corpus.probes import PROBES
from toolgym.agents.models.corpus.repeats import periodic_row
from toolgym.agents.models.corpus.strings import Strings


def test_corpus_is_a_pure_function_of_its_seed():
    first = list(itertools.islice(documents(CorpusSpec(seed=3)), 12))
    again = list(itertools.islice(documents(CorpusSpec(seed=3)), 12))
    other = list(itertools.islice(documents(CorpusSpec(seed=4)), 12))
    assert first == again
    assert first != other


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_writes_about_the_length_asked(kind):
    text = KINDS[kind](Strings(random.Random(kind)), 2000)
    assert 2000 <= len(text) < 6000
    text.encode("utf-8")  # valid Unicode


def test_copy_documents_repeat_passages_word_for_word():
    text = KINDS["copy"](Strings(random.Random(1)), 4000)
    lines = text.split("\n")
    assert len(lines) - len(set(lines)) >= 5  # whole lines come back


def test_env_transcripts_are_rendered_chat_turns():
    spec = CorpusSpec(seed=0, weights={}, envs=["toolgym/Maze-v0"])
    text = next(documents(spec))
    assert text.startswith("<|im_start|>system\n")
    assert "<|im_start|>assistant\n<tool_call>" in text


def test_periodic_rows_repeat_with_their_period_and_mask_the_first():
    row, labels = periodic_row(random.Random(0), 128, 10, 1000)
    period = next(p for p in range(16, 65) if row[p:] == row[:-p])
    assert row[:period] != row[1 : period + 1]
    assert all(10 <= t < 1000 for t in row)
    assert labels == [-100] * period + row[period:]  # only the predictable part is learned


def test_periodic_rows_reach_far_back_over_small_alphabets():
    rng = random.Random(0)
    rows = [periodic_row(rng, 640, 10, 1000, max_period=632, min_alphabet=16) for _ in range(400)]
    periods = [labels.count(-100) for _, labels in rows]
    alphabets = [len(set(ids)) for ids, _ in rows]
    assert max(periods) > 550 and min(periods) >= 16
    assert min(alphabets) <= 24 and max(alphabets) > 300


@pytest.mark.parametrize("kind", sorted(PROBES))
def test_probes_ask_for_eight_tokens_from_the_distance_asked(kind):
    def encode(text):  # one id per character: lengths in tokens are exact
        return [ord(c) for c in text]

    context, target = PROBES[kind](Strings(random.Random(0)), encode, 500)
    assert len(target) == 8
    assert 495 <= len(context) <= 520
    if kind == "copy":
        cue = context[-2:]
        where = [i for i in range(len(context) - 2) if context[i : i + 2] == cue]
        assert len(where) == 1  # the cue occurs once before, at the span
        assert context[where[0] + 2 : where[0] + 10] == target


@pytest.fixture(scope="module")
def with_a_users_env(tmp_path_factory):
    """A short run of the command as a user runs it, with a user's env mixed into the corpus
    (copying is checked on conftest's `pretrained_base`)."""
    out = tmp_path_factory.mktemp("pretrained") / "tiny"
    run = run_cli("model", "pretrain", "--out", str(out), "--env", "kv_lookup_env:kv/Lookup-v0",
                  "--steps", "20", "--copy-warmup-steps", "10", "--probes", "2", timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return out


def test_pretrain_command_writes_an_ordinary_model_directory(with_a_users_env):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(with_a_users_env)
    tokenizer = AutoTokenizer.from_pretrained(with_a_users_env)
    assert tokenizer.chat_template and model.config.vocab_size == len(tokenizer)
    record = json.loads((with_a_users_env / "toolgym_pretrain.json").read_text())
    assert len(record["losses"]) == record["config"]["steps"] == 20
    assert record["config"]["envs"] == ["kv_lookup_env:kv/Lookup-v0"]
    assert {p["n"] for p in record["probes"]} == {2}
    # the tokenizer learned the user's env's text: its tool names are whole tokens
    assert all(tokenizer.tokenize(name) == [name] for name in ("find", "get", "answer"))


@pytest.mark.timeout(1300)
def test_pretrained_tiny_copies_a_span_from_500_tokens_back(pretrained_base):
    """Half the default tiny schedule (700 steps, 300 of them the warm-up). Measured over
    seeds 0, 1 and 2 (100 probes each, see docs/models.md): at least 85%, 87% and 81% at
    100, 250 and 500 tokens back; asserted: 80%, 80% and 75%."""
    record = json.loads((pretrained_base / "toolgym_pretrain.json").read_text())
    assert record["config"]["steps"] == 700 and record["config"]["size"] == "tiny"
    copy = {p["distance"]: p for p in record["probes"] if p["kind"] == "copy"}
    assert copy[500]["n"] == 100
    floors = {100: 0.8, 250: 0.8, 500: 0.75}
    assert all(copy[d]["accuracy"] >= floor for d, floor in floors.items()), record["probes"]


def test_pretrain_rejects_a_warmup_longer_than_the_run(tmp_path):
    run = run_cli("model", "pretrain", "--out", str(tmp_path / "m"), "--steps", "10",
                  "--copy-warmup-steps", "10")  # fmt: skip
    assert run.returncode != 0
    assert "copy_warmup_steps" in run.stdout + run.stderr
    assert "Traceback" not in run.stdout + run.stderr
