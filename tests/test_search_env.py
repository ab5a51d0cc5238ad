"""The search envs: an oracle that reads only its observations reaches >= 95% EM through the
env and a real `/retrieve` server; rewards, state keys, truncation and a dead server."""

from __future__ import annotations

import re

import pytest

import toolgym
from conftest import free_port
from toolgym.envs.search.world import RELATIONS, World
from toolgym.errors import ConfigError
from toolgym.tools.records import ToolCall

RESULT = re.compile(
    r"^Doc \d+ \[id (?P<id>[^\]]+)\] \(Title: (?P<title>[^)]*)\) (?P<body>.*)$", re.M
)


def follow(relation: str, subject: str, body: str) -> str | None:
    """The object of `relation` for `subject`, read from a document's text."""
    pattern = re.escape(RELATIONS[relation].sentence.format(s=subject, o="\0")).replace(
        "\\\x00", "\0"
    )
    match = re.search(pattern.replace("\0", r"(.+?)"), body)
    return match.group(1) if match else None


def oracle_episode(env, task: dict, search, answer) -> float:
    """Search the start entity, read the relation's object from the result whose title is the
    entity, search that, ... and answer what the last document says. Returns the reward."""
    env.reset(options={"task": task})
    entity = task["hops"][0]["entity"]
    total = 0.0
    for relation in task["relations"]:
        obs, reward, terminated, truncated, info = env.step(search(entity))
        total += reward
        assert info["infra_error"] is None and not terminated
        text = obs[0]["content"].removeprefix("<information>").removesuffix("</information>")
        found = {m["title"]: m["body"] for m in RESULT.finditer(text)}
        value = follow(relation, entity, found.get(entity, ""))
        if value is None:
            return total  # retrieval failed this question
        entity = value
    obs, reward, terminated, truncated, info = env.step(answer(entity))
    assert terminated
    return total + reward


def questions(n: int) -> list[dict]:
    world = World(0)
    return [q.to_task() for hops in (1, 2, 3) for q in world.questions(n, hops=hops, seed=7)]


def test_an_oracle_reaches_95_percent_em_through_the_env_and_the_server(search_server):
    env = toolgym.make("toolgym/Search-v0", server_url=search_server)
    hermes = env.parser

    def search(q):
        return hermes.render([ToolCall("search", {"query": q})])

    def answer(a):
        return hermes.render([ToolCall("answer", {"text": a})])

    tasks = questions(40)
    rewards = [oracle_episode(env, t, search, answer) for t in tasks]
    env.close()
    assert sum(rewards) / len(rewards) >= 0.95, sum(rewards) / len(rewards)


def test_the_same_oracle_in_search_r1_tags(search_server):
    env = toolgym.make("toolgym/SearchR1-v0", server_url=search_server)
    tasks = questions(20)
    rewards = [
        oracle_episode(
            env,
            t,
            lambda q: f"<think>look up {q}</think><search>{q}</search>",
            lambda a: f"<answer> {a} </answer>",
        )
        for t in tasks
    ]
    env.close()
    assert sum(rewards) / len(rewards) >= 0.95


def test_search_r1_observations_and_prompt():
    env = toolgym.make("toolgym/SearchR1-v0")
    obs, info = env.reset(seed=0)
    assert "<search> your query </search>" in obs[0]["content"] and obs[1]["content"].startswith(
        "Question: "
    )
    assert info["state_key"] == frozenset()
    question = obs[1]["content"].removeprefix("Question: ")
    obs, reward, terminated, truncated, info = env.step(f"<search>{question}</search>")
    assert obs[0]["content"].startswith("<information>Doc 1 [id ") and obs[0]["content"].endswith(
        "</information>"
    )
    assert len(info["state_key"]) == 3 and info["valid_action"]
    obs, reward, *_, info = env.step("<search>unclosed")
    assert not info["valid_action"] and "<search> is not closed" in obs[-1]["content"]


def test_state_key_is_the_set_of_retrieved_documents():
    a, b = toolgym.make("toolgym/Search-v0"), toolgym.make("toolgym/Search-v0")
    keys = []
    for env, query in ((a, "Born"), (b, "born?")):
        env.reset(seed=1)
        _, _, _, _, info = env.step(env.parser.render([ToolCall("search", {"query": query})]))
        keys.append(info["state_key"])
    assert keys[0] == keys[1] and len(keys[0]) == 3
    _, _, _, _, info = a.step(a.parser.render([ToolCall("search", {"query": "born", "top_k": 5})]))
    assert info["state_key"] > keys[0]


def test_open_reads_a_document_in_full_and_results_are_cut():
    env = toolgym.make("toolgym/Search-v0", doc_chars=20)
    env.reset(seed=0)
    obs, *_ = env.step(env.parser.render([ToolCall("search", {"query": "born", "top_k": 1})]))
    doc_id = RESULT.search(obs[0]["content"])["id"]
    assert (
        obs[0]["content"].endswith(" ...") and len(RESULT.search(obs[0]["content"])["body"]) <= 24
    )
    obs, *_, info = env.step(env.parser.render([ToolCall("open", {"doc_id": doc_id})]))
    assert len(obs[0]["content"]) > 40 and not obs[0]["content"].endswith(" ...")
    obs, *_, info = env.step(env.parser.render([ToolCall("open", {"doc_id": "per-9999"})]))
    assert "not among your search results" in obs[0]["content"]
    obs, *_, info = env.step(env.parser.render([ToolCall("search", {"query": "x", "top_k": 50})]))
    assert not info["valid_action"] and "less than or equal to 10" in obs[0]["content"]


@pytest.mark.parametrize(
    ("reward", "format_reward", "text", "expected"),
    [
        ("em", 0.0, "The Trelix", 1.0),  # SQuAD normalisation drops the article
        ("em", 0.1, "Trelix City", 0.1),  # wrong, but a well-formed answer
        ("f1", 0.0, "Trelix City", pytest.approx(2 / 3)),
    ],
)
def test_answer_rewards(reward, format_reward, text, expected):
    env = toolgym.make("toolgym/Search-v0", reward=reward, format_reward=format_reward)
    env.reset(options={"task": {"question": "Where?", "golden_answers": ["Trelix"]}})
    _, r, terminated, _, _ = env.step(env.parser.render([ToolCall("answer", {"text": text})]))
    assert terminated and r == expected


def test_tasks_from_a_file_and_bad_tasks(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"question": "Who?", "answers": "Ada"}\n')
    env = toolgym.make("toolgym/Search-v0", tasks=str(path))
    obs, _ = env.reset(seed=5)
    assert obs[-1]["content"] == "Question: Who?"
    with pytest.raises(ConfigError, match="needs 'answers'"):
        env.reset(options={"task": {"question": "no answers"}})
    with pytest.raises(ConfigError, match="reward 'bleu': choose em or f1"):
        toolgym.make("toolgym/Search-v0", reward="bleu")
    with pytest.raises(ConfigError, match="not both"):
        toolgym.make("toolgym/Search-v0", server_url="http://127.0.0.1:1", index=str(tmp_path))


def test_a_dead_server_is_an_infra_error_not_a_zero():
    env = toolgym.make("toolgym/Search-v0", server_url=f"http://127.0.0.1:{free_port()}")
    env.reset(seed=0)
    env.engine.backoff_s = 0.01
    obs, reward, terminated, truncated, info = env.step(
        env.parser.render([ToolCall("search", {"query": "Trelix"})])
    )
    assert info["infra_error"] is not None and "unavailable" in info["infra_error"]
    assert info["valid_action"] and reward == 0.0 and not terminated
    env.close()


def test_bm25_returns_no_document_that_shares_no_term_with_the_query():
    """A query of a word the corpus lacks finds nothing; it used to return topk documents
    that scored 0 (unrelated ones, shown as results)."""
    env = toolgym.make("toolgym/SearchR1-v0")
    env.reset(seed=0)
    obs, *_, info = env.step("<search>Trelix</search>")
    assert obs[0]["content"] == "<information>No documents found.</information>"
    assert info["valid_action"]
    env.close()


def test_a_wrong_task_row_stops_the_env_when_it_is_made(tmp_path):
    from toolgym.errors import ConfigError

    rows = tmp_path / "tasks.jsonl"
    rows.write_text(
        '{"question": "Who?", "answers": ["Ada"]}\n{"question": "When?", "answer": "1815"}\n'
    )
    with pytest.raises(ConfigError, match=r"tasks.jsonl row 2 .*'answers' \(or 'golden_answers'\)"):
        toolgym.make("toolgym/Search-v0", tasks=str(rows))
    with pytest.raises(ConfigError, match="a string or a list of strings, got int"):
        toolgym.make("toolgym/Search-v0", tasks=[{"question": "Who?", "answers": 3}])
    env = toolgym.make(
        "toolgym/Search-v0", tasks=[{"question": "Who?", "golden_answers": "Ada"}] * 2
    )
    env.close()
