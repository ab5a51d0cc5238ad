"""ZeroSearch's simulator recipe from the command line: labelled results from the world's real
bm25 index, fine-tuning a real tiny model in the served prompt format, and the quality report."""

from __future__ import annotations

import json

from transformers import AutoTokenizer

from toolgym.agents.render import ChatRenderer
from toolgym.envs.search.simulator_data import holds, read_results
from toolgym.envs.search.world import World
from toolgym.tools.search.engines.simulated import NOISY, USEFUL
from toolgym.training.supervised.simulator_sft import demonstrations, examples


def test_holds_matches_whole_normalised_phrases():
    assert holds("Trelix Voss works for The Vell Company.", ["vell company"])
    assert holds("Founded in 924.", ["924"])
    assert not holds("Founded in 1924.", ["924"])  # not inside another token
    assert not holds("anything", [""])


def test_simulator_data_labels_the_worlds_real_results(cli, tmp_path):
    out = tmp_path / "sim.jsonl"
    result = cli("search", "simulator-data", "--out", str(out), "--questions", "40",
                 "--hops", "1", "--hops", "2", "--topk", "4")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "labelled results for 80 questions" in result.stdout
    rows = read_results(out)
    assert {r.split for r in rows} == {"train", "eval"}
    assert all(r.useful == holds(r.document.contents, r.gold) for r in rows)
    world = World(0)
    names = {e.name for e in world.entities.values()}
    entity_queries = [r for r in rows if r.query in names and r.rank == 0]
    # bm25 ranks an entity's own document first for its name, and it states the gold
    assert entity_queries and all(r.document.contents.startswith(r.query) for r in entity_queries)
    assert sum(r.useful for r in entity_queries) / len(entity_queries) > 0.9
    # an answer's query is asked once per gold, with every result kept
    assert len({(r.query, tuple(r.gold), r.rank) for r in rows}) == len(rows)


def test_examples_keep_every_useful_result_and_the_best_noisy_one(cli, tmp_path):
    out = tmp_path / "sim.jsonl"
    assert cli("search", "simulator-data", "--out", str(out), "--questions", "20",
               "--hops", "1").returncode == 0  # fmt: skip
    rows = read_results(out)
    kept = examples(rows, "train", noisy_per_query=1)
    useful = {(r.query, r.document.contents) for r in rows if r.split == "train" and r.useful}
    assert {(q, t) for k, q, t in kept if k == "useful"} == useful
    per_query: dict[str, int] = {}
    for kind, query, _ in kept:
        per_query[query] = per_query.get(query, 0) + (kind == "noisy")
    assert max(per_query.values()) == 1


def test_a_demonstration_is_the_served_prompt_then_the_document(tiny_model_dir, cli, tmp_path):
    out = tmp_path / "sim.jsonl"
    assert cli("search", "simulator-data", "--out", str(out), "--questions", "10",
               "--hops", "1").returncode == 0  # fmt: skip
    renderer = ChatRenderer(AutoTokenizer.from_pretrained(tiny_model_dir))
    demos = demonstrations(renderer, read_results(out), "train", max_tokens=16)
    for d in demos[:5]:
        t = d.trajectory
        text = renderer.tokenizer.decode(t.token_ids[: t.prompt_length])
        kind = t.steps[0].state_key
        assert (USEFUL if kind == "useful" else NOISY) in text and "Query: " in text
        response = t.token_ids[t.steps[0].response_start : t.steps[0].response_end]
        assert response[-len(renderer.closing_ids()) :] == renderer.closing_ids()
        assert len(response) <= 16 + len(renderer.closing_ids())


def test_simulator_sft_trains_saves_and_reports(tiny_model_dir, cli, tmp_path):
    data, out = tmp_path / "sim.jsonl", tmp_path / "simulator"
    assert cli("search", "simulator-data", "--out", str(data), "--questions", "30",
               "--hops", "1").returncode == 0  # fmt: skip
    result = cli("search", "simulator-sft", "--data", str(data), "--model", str(tiny_model_dir),
                 "--out", str(out), "--epochs", "2", "--doc-tokens", "24", "--samples", "1",
                 timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "held-out document NLL per token" in result.stdout
    report = json.loads((out / "simulator_quality.json").read_text())
    assert set(report) == {"train", "eval"}
    for q in report.values():
        assert q["queries"] > 0 and 0 <= q["useful"] <= 1 and 0 <= q["noisy"] <= 1
        assert 0 < q["real_top1"] <= q["real_any"] <= 1
    assert "written useful hold the answer" in result.stdout
    result = cli("search", "simulator-report", "--data", str(data), "--simulator", str(out),
                 "--samples", "1", "--doc-tokens", "8")  # fmt: skip
    assert result.returncode == 0 and "the real engine's first result" in result.stdout


def test_bad_inputs_are_one_line_errors(cli, tmp_path, tiny_model_dir):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query": "x"}\n')
    result = cli("search", "simulator-sft", "--data", str(bad), "--model", str(tiny_model_dir),
                 "--out", str(tmp_path / "o"))  # fmt: skip
    assert result.returncode == 2 and "bad.jsonl:1: not a simulator-data row" in result.stderr
    result = cli("search", "simulator-data", "--out", str(tmp_path / "d.jsonl"),
                 "--questions", "100000")  # fmt: skip
    assert result.returncode == 2 and "ask for fewer --questions" in result.stderr
    result = cli("search", "simulator-report", "--data", str(bad), "--simulator", str(tmp_path))
    assert result.returncode == 2 and "is not a model directory" in result.stderr
