"""`toolgym serve search --simulator`: a real tiny model writes the results behind Search-R1's
`/retrieve`, as a real process on loopback. Search-R1's requests get the documented shapes;
the noisy share asked for (per request, or by the server's schedule at a request's step) is
what is served over a thousand requests; a seed makes results repeatable and cached; the env
trains against it; bad controls get a 400; and the documents can come from any
OpenAI-compatible server instead of an in-process model."""

from __future__ import annotations

import concurrent.futures
import json
import math
import urllib.request

import pytest
from test_hostile_requests import abandon, goes_idle
from test_search_server import BAD_REQUESTS, passages_to_string, post

import toolgym
from conftest import serve
from toolgym.tools.records import ToolCall


def health(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/health", timeout=30) as response:
        return json.loads(response.read())


@pytest.fixture(scope="module")
def simulated_server(tiny_model_dir):
    yield from serve(
        ["serve", "search", "--simulator", str(tiny_model_dir), "--doc-tokens", "6",
         "--noise", "0.1", "0.9", "4", "--total-steps", "10"],
        "simulated search server",
    )  # fmt: skip


def test_search_r1_requests_get_written_documents_in_its_shape(simulated_server):
    url = f"{simulated_server}/retrieve"
    status, body = post(url, {"queries": ["who founded Trelix", "Zoumar capital"], "topk": 3,
                              "return_scores": True})  # fmt: skip
    assert status == 200 and len(body["result"]) == 2
    for row in body["result"]:
        assert len(row) == 3 and [h["score"] for h in row] == sorted(
            (h["score"] for h in row), reverse=True
        )
        assert all(h["document"]["id"].startswith("sim-") for h in row)
        text = passages_to_string(row)  # what Search-R1's rollout does with them
        assert text.startswith("Doc 1(Title: ") and "Doc 3(Title: " in text
    status, body = post(url, {"queries": ["Trelix"]})  # bare documents, the default topk 3
    assert status == 200 and len(body["result"][0]) == 3 and "contents" in body["result"][0][0]
    assert post(url, {"queries": []}) == (200, {"result": []})
    h = health(simulated_server)
    assert h["status"] == "ok" and h["engine"] == "simulated" and h["noise"] == pytest.approx(0.1)


def _served(server: str, bodies: list[dict]) -> dict[str, int]:
    """Post `bodies` from 32 concurrent clients; the documents written meanwhile, by kind."""
    before = health(server)["written"]
    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(lambda b: post(f"{server}/retrieve", b), bodies))
    assert all(status == 200 and len(body["result"][0]) == 1 for status, body in answers)
    after = health(server)["written"]
    return {kind: after[kind] - before[kind] for kind in after}


def _within(noisy: int, n: int, p: float) -> bool:
    return abs(noisy / n - p) <= 4 * math.sqrt(max(p * (1 - p), 1e-9) / n)


@pytest.mark.parametrize("share", [0.0, 0.3, 1.0])
def test_the_noisy_share_asked_per_request_is_served(simulated_server, share):
    n = 1000
    bodies = [{"queries": [f"capital of place {i}"], "topk": 1, "noise": share} for i in range(n)]
    written = _served(simulated_server, bodies)
    assert written["useful"] + written["noisy"] == n  # one document each, none wasted
    assert _within(written["noisy"], n, share), (written, share)


def test_the_server_schedule_is_read_at_each_requests_step(simulated_server):
    n = 600
    for step, p in ((0, 0.1), (5, 0.1 + (2 - 1) / 3 * 0.8), (10, 0.9)):  # 4 ** 0.5 = 2
        bodies = [{"queries": [f"river {i}"], "topk": 1, "step": step} for i in range(n)]
        written = _served(simulated_server, bodies)
        assert _within(written["noisy"], n, p), (step, written, p)
    # a request's own total overrides the server's: step 5 of 5 is the schedule's end
    written = _served(simulated_server, [{"queries": ["x"], "topk": 1, "step": 5,
                                          "total_steps": 5}] * 200)  # fmt: skip
    assert written["noisy"] >= 200 * 0.9 - 4 * math.sqrt(0.09 / 200) * 200


def test_a_seed_makes_the_results_repeatable_and_the_repeat_is_cached(simulated_server):
    url = f"{simulated_server}/retrieve"
    body = {"queries": ["who built the Vell bridge"], "topk": 3, "seed": 7, "noise": 0.5}
    first = post(url, body)
    hits = health(simulated_server)["cache"]["hits"]
    assert post(url, body) == first
    assert health(simulated_server)["cache"]["hits"] == hits + 3
    others = [post(url, {**body, "seed": s})[1]["result"][0] for s in range(8, 16)]
    assert any(row != first[1]["result"][0] for row in others)  # the seed decides them


@pytest.mark.parametrize(("body", "message"), BAD_REQUESTS)
def test_the_index_servers_bad_requests_get_the_same_400s(simulated_server, body, message):
    status, answer = post(f"{simulated_server}/retrieve", body)
    assert status == 400 and message in answer["error"]


def test_search_r1s_whole_training_batch_in_one_request(simulated_server):
    """One turn's searches for 512 prompts x 5 rollouts, as Search-R1's trainer sends them
    (top 1 here: each result is a document to write, and the 2,560 queries are the point)."""
    queries = [f"entity {i % 97}" for i in range(2560)]
    status, body = post(f"{simulated_server}/retrieve", {"queries": queries, "topk": 1,
                                                         "return_scores": True})  # fmt: skip
    assert status == 200 and len(body["result"]) == 2560
    assert all(len(row) == 1 and passages_to_string(row) for row in body["result"])


def test_a_query_too_long_for_the_writer_is_a_400_before_any_writing(simulated_server):
    before = health(simulated_server)["written"]
    long = "".join(chr(0x4E00 + i % 3000) for i in range(4096))  # past the 4,096-token context
    status, body = post(f"{simulated_server}/retrieve", {"queries": ["fine", long], "topk": 1})
    assert status == 400 and "queries.1" in body["error"] and "context" in body["error"], body
    assert health(simulated_server)["written"] == before


def test_a_request_for_too_many_documents_is_a_400_before_any_writing(simulated_server):
    before = health(simulated_server)["written"]
    status, body = post(f"{simulated_server}/retrieve", {"queries": ["q"] * 16384, "topk": 100})
    assert status == 400 and "1638400 documents" in body["error"], body
    assert health(simulated_server)["written"] == before


def test_abandoned_requests_stop_their_writing(simulated_server):
    """Three clients ask for 8,192 documents each and hang up: minutes of writing if it went
    on; the server stops, goes idle, and answers the next request at once."""
    before = health(simulated_server)["written"]
    queries = [f"entity number {i}" for i in range(4096)]
    for _ in range(3):
        abandon(simulated_server, "/retrieve", {"queries": queries, "topk": 2, "noise": 0.5})
    assert goes_idle(simulated_server, within_s=20)
    after = health(simulated_server)["written"]
    assert sum(after.values()) - sum(before.values()) < 3 * 8192
    status, body = post(f"{simulated_server}/retrieve", {"queries": ["Trelix"], "topk": 1})
    assert status == 200 and len(body["result"]) == 1


@pytest.fixture(scope="module")
def searching_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model taught, by a few hundred steps on a few search episodes' turns, to
    answer with a search call: a real policy that searches whatever it is asked."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from toolgym.agents.render import ChatRenderer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    renderer = ChatRenderer(tokenizer)
    env = toolgym.make("toolgym/Search-v0", hops=1, max_turns=2)
    call = env.unwrapped.parser.render([ToolCall("search", {"query": "Trelix"})])
    answer = renderer.encode(call) + renderer.closing_ids()
    rows = []
    for seed in range(6):  # both turns of six episodes
        messages, _ = env.reset(seed=seed)
        messages = list(messages)
        for _ in range(2):
            prompt = renderer.prompt_ids(messages, env.unwrapped.tool_schemas())
            rows.append(
                (torch.tensor([prompt + answer]), torch.tensor([[-100] * len(prompt) + answer]))
            )
            obs, *_ = env.step(call)
            messages += [{"role": "assistant", "content": call}, *obs]
    env.close()
    torch.manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(600):
        ids, labels = rows[step % len(rows)]
        loss = model(input_ids=ids, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    out = tmp_path_factory.mktemp("searching-model")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def test_a_short_training_run_against_it(simulated_server, searching_model_dir, tmp_path):
    from toolgym.config import load_config
    from toolgym.training.config import TrainConfig
    from toolgym.training.trainer import Trainer

    before = sum(health(simulated_server)["written"].values())
    config = load_config(TrainConfig, None, [
        f"model={searching_model_dir}", f"run_dir={tmp_path}", "steps=2",
        "env.id=toolgym/Search-v0", f"env.kwargs.server_url={simulated_server}",
        "env.kwargs.hops=1", "env.kwargs.max_turns=2", "rollout.tasks_per_step=2",
        "rollout.rollouts_per_task=2", "rollout.max_tokens=32", "optim.micro_batch_size=4",
        "eval.every_steps=100",
    ])  # fmt: skip
    metrics = Trainer(config).run()
    assert [m["step"] for m in metrics] == [1, 2]
    assert all(m["rollout/valid_actions"] > 0.25 and m["rollout/masked"] == 0 for m in metrics)
    assert all(m["train/tokens"] > 0 for m in metrics)
    # the rollouts' searches reached the simulated server (of 2 steps x 4 episodes x 2 turns x 3)
    assert sum(health(simulated_server)["written"].values()) - before >= 0.3 * 2 * 4 * 2 * 3


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"noise": 1.5}, "noise"),
        ({"noise": -0.1}, "noise"),
        ({"noise": "0.3"}, "noise"),
        ({"noise": None, "step": -1}, "step"),
        ({"step": 3, "total_steps": 0}, "total_steps"),
        ({"seed": -1}, "seed"),
        ({"seed": 2**70}, "seed"),
        ({"seed": 1.5}, "seed"),
    ],
)
def test_bad_controls_get_a_400_that_names_them(simulated_server, change, message):
    status, body = post(f"{simulated_server}/retrieve", {"queries": ["a"], **change})
    assert status == 400 and body["error"].startswith(message), body


def test_non_finite_noise_is_refused(simulated_server):
    raw = b'{"queries": ["a"], "noise": NaN}'
    status, body = post(f"{simulated_server}/retrieve", None, raw=raw)
    assert status == 400 and "noise" in body["error"], body


def test_the_search_env_trains_against_it_and_sends_the_trainer_step(simulated_server):
    env = toolgym.make("toolgym/Search-v0", server_url=simulated_server, topk=10)
    noisy = {}
    for step in (0, 10):  # the schedule's start (p = 0.1) and end (p = 0.9)
        before = health(simulated_server)["written"]
        env.unwrapped.resources.clock.at(step, 10)  # as the runtime moves it
        env.reset(seed=0)
        for _ in range(3):
            call = ToolCall("search", {"query": "Trelix founder"})
            obs, *_ = env.step(env.parser.render([call]))
            assert obs[0]["content"].startswith("Doc 1 [id sim-")
        after = health(simulated_server)["written"]
        assert sum(after.values()) - sum(before.values()) == 30
        noisy[step] = after["noisy"] - before["noisy"]
    assert noisy[0] <= 10 and noisy[10] >= 20, noisy
    env.close()


def test_an_openai_compatible_server_can_write_the_documents(model_server):
    gen = serve(
        ["serve", "search", "--simulator-url", f"{model_server}/v1", "--simulator-model", "tiny",
         "--doc-tokens", "6"],
        "simulated search server over HTTP",
    )  # fmt: skip
    url = next(gen)
    try:
        body = {"queries": ["Trelix"], "topk": 2, "seed": 3}
        status, first = post(f"{url}/retrieve", body)
        assert status == 200 and len(first["result"][0]) == 2
        assert health(url)["written"]["useful"] + health(url)["written"]["noisy"] == 2
        assert post(f"{url}/retrieve", body) == (200, first)
    finally:
        gen.close()


def test_the_server_needs_one_source_of_documents(cli, tiny_model_dir, world_bm25_index):
    result = cli("serve", "search")
    assert result.returncode == 2 and "give an --index to serve, or a --simulator" in result.stderr
    result = cli("serve", "search", "--index", str(world_bm25_index), "--simulator",
                 str(tiny_model_dir))  # fmt: skip
    assert result.returncode == 2 and "one of them" in result.stderr
    result = cli("serve", "search", "--simulator-url", "http://127.0.0.1:1/v1")
    assert result.returncode == 2 and "needs --simulator-model" in result.stderr
    result = cli("serve", "search", "--simulator", str(tiny_model_dir), "--noise", "0", "2", "4")
    assert result.returncode == 2 and "noise probabilities must be in [0, 1]" in result.stderr
