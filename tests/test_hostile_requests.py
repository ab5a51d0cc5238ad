"""Both servers as a hostile client meets them: every bad request is a 4xx in the server's
error shape (never a 500 or a text page), size and work are bounded before the expensive
part, and a client that goes away takes its work with it. Ends with a fuzz suite over
request bodies."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CHAT_MESSAGES, PROCESSES


def post(
    url: str, body: object = None, raw: bytes | None = None, timeout: float = 60
) -> tuple[int, dict]:
    data = raw if raw is not None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            if response.headers.get_content_type() == "text/event-stream":
                return response.status, {"events": response.read().decode()}
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        text = exc.read()
        try:
            return exc.code, json.loads(text)
        except json.JSONDecodeError:
            return exc.code, {"not json": text.decode(errors="replace")}


def rss_mb(url: str) -> float:
    status = Path(f"/proc/{PROCESSES[url].pid}/status").read_text()
    return (
        int(next(line for line in status.splitlines() if line.startswith("VmRSS")).split()[1])
        / 1024
    )


def goes_idle(url: str, within_s: float = 40.0, window_s: float = 2.0) -> bool:
    """Whether the server process stops using the CPU (under 20% of a core over a window)
    within `within_s`: the sign that no abandoned work is still running."""
    import os
    import time

    def cpu() -> float:
        fields = Path(f"/proc/{PROCESSES[url].pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        start = cpu()
        time.sleep(window_s)
        if cpu() - start < 0.2 * window_s:
            return True
    return False


def abandon(url: str, path: str, body: dict) -> None:
    """Send a request and hang up without reading the answer."""
    host, port = url.removeprefix("http://").split(":")
    data = json.dumps(body).encode()
    with socket.create_connection((host, int(port))) as s:
        s.sendall(
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n".encode()
            + data
        )


def openai_error(status: int, body: dict) -> None:
    assert 400 <= status < 500, (status, body)
    assert (
        set(body["error"]) == {"message", "type", "param", "code"}
        and body["error"]["code"] == status
    )


MODEL_CASES = {
    "10k-deep JSON": (None, b'{"model": "tiny", "prompt": ' + b"[" * 10_000 + b"]" * 10_000 + b"}"),
    "tool_calls not a list": ({"model": "tiny", "messages": [{"role": "assistant", "content": "x", "tool_calls": 5}]}, None),
    "tool_calls wrong items": ({"model": "tiny", "messages": [{"role": "assistant", "content": "x", "tool_calls": [{"id": 1}]}]}, None),
    "seed beyond 64 bits": ({"model": "tiny", "prompt": "x", "max_tokens": 2, "seed": 2**70}, None),
    "5,000-digit number": (None, b'{"model": "tiny", "prompt": "x", "max_tokens": ' + b"1" * 5000 + b"}"),
    "lone surrogate prompt": (None, b'{"model": "tiny", "prompt": "a\\ud800b", "max_tokens": 2}'),
    "lone surrogate message": (None, b'{"model": "tiny", "messages": [{"role": "user", "content": "\\udc00"}]}'),
    "10,000 prompts": ({"model": "tiny", "prompt": ["x"] * 10_000, "max_tokens": 1}, None),
    "n x prompts": ({"model": "tiny", "prompt": ["x"] * 20, "n": 16, "max_tokens": 1}, None),
    "image part": ({"model": "tiny", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, None),
    "messages not objects": ({"model": "tiny", "messages": [1, "x", None]}, None),
    "role a list": ({"model": "tiny", "messages": [{"role": [], "content": "x"}]}, None),
    "tools wrong shape": ({"model": "tiny", "messages": CHAT_MESSAGES, "tools": [{"type": "function"}]}, None),
    "max_tokens a string": ({"model": "tiny", "prompt": "x", "max_tokens": "many"}, None),
    "prompt ids out of range": ({"model": "tiny", "prompt": [-1, 10**12], "max_tokens": 1}, None),
}  # fmt: skip


@pytest.mark.parametrize("case", list(MODEL_CASES))
def test_bad_model_requests_are_4xx_in_vllms_shape(model_server, case):
    body, raw = MODEL_CASES[case]
    path = (
        "/v1/chat/completions"
        if (body and "messages" in body) or (raw and b"messages" in raw)
        else "/v1/completions"
    )
    openai_error(*post(model_server + path, body, raw))


def test_a_bad_adapter_config_is_a_400(model_server, tmp_path):
    (tmp_path / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": "eight"}))
    status, body = post(
        f"{model_server}/v1/load_lora_adapter", {"lora_name": "bad", "lora_path": str(tmp_path)}
    )
    openai_error(status, body)
    assert "could not load the LoRA adapter" in body["error"]["message"]


def test_content_parts_are_rendered_not_dropped(model_server):
    ask = {"model": "tiny", "max_tokens": 1, "return_token_ids": True}
    parts = [{"type": "text", "text": "Go"}, {"type": "text", "text": "north."}]
    status, as_parts = post(
        f"{model_server}/v1/chat/completions",
        {**ask, "messages": [{"role": "user", "content": parts}]},
    )
    status2, as_text = post(
        f"{model_server}/v1/chat/completions",
        {**ask, "messages": [{"role": "user", "content": "Go\nnorth."}]},
    )
    assert status == status2 == 200 and as_parts["prompt_token_ids"] == as_text["prompt_token_ids"]


def test_huge_prompts_are_refused_before_tokenizing_with_memory_bounded(model_server):
    before = rss_mb(model_server)
    status, body = post(
        f"{model_server}/v1/completions", {"model": "tiny", "prompt": "word " * 2_000_000}
    )
    openai_error(status, body)
    assert "more than fit the model's context" in body["error"]["message"]
    status, body = post(
        f"{model_server}/v1/completions",
        None,
        raw=b'{"model": "tiny", "prompt": "' + b"w" * (60 << 20) + b'"}',
    )
    assert status == 413
    with urllib.request.urlopen(f"{model_server}/health", timeout=10) as response:
        assert response.status == 200
    assert rss_mb(model_server) - before < 300  # MB, after a 10 MB and a 60 MB prompt


def test_a_client_that_hangs_up_cancels_its_generation(model_server):
    # near-uniform sampling: rows rarely end early, so 128 rows of up to 4,000 tokens would
    # keep the engine busy for minutes if nobody cancelled them
    heavy = {"model": "tiny", "prompt": "Map:", "max_tokens": 4000, "n": 16, "temperature": 2.0}
    for _ in range(8):
        abandon(model_server, "/v1/completions", heavy)
    assert goes_idle(model_server)
    status, body = post(
        f"{model_server}/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 2}
    )
    assert status == 200 and len(body["choices"]) == 1


SEARCH_CASES = {
    "10k-deep JSON": b'{"queries": ' + b"[" * 10_000 + b"]" * 10_000 + b"}",
    "lone surrogate": b'{"queries": ["\\ud800"]}',
    "not JSON": b"\xff\xfe",
    "5,000-digit number": b'{"queries": ["a"], "topk": ' + b"1" * 5000 + b"}",
    "5,000-digit seed": b'{"queries": ["a"], "seed": ' + b"1" * 5000 + b"}",
}


@pytest.mark.parametrize("case", list(SEARCH_CASES))
def test_bad_search_requests_are_400s(search_server, case):
    status, body = post(f"{search_server}/retrieve", None, raw=SEARCH_CASES[case])
    assert status == 400 and isinstance(body["error"], str), body


def test_abandoned_searches_do_not_hold_up_the_next(search_server):
    from toolgym.envs.search.world import World

    names = [d.title for d in World(0).documents()]
    queries = [" ".join(names[(i + k) % len(names)] for k in range(8)) for i in range(4000)]
    for _ in range(40):  # 160,000 long queries: most of a minute of work if all were served
        abandon(search_server, "/retrieve", {"queries": queries, "topk": 10})
    assert goes_idle(search_server, within_s=10)
    status, body = post(f"{search_server}/retrieve", {"queries": ["Trelix"]})
    assert status == 200 and len(body["result"]) == 1


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
COMPLETION_FIELDS = {
    "model": st.sampled_from(["tiny", "nope", ""]) | JSON_VALUES,
    "prompt": st.text(max_size=50) | st.lists(st.integers(-5, 2000), max_size=5) | JSON_VALUES,
    "max_tokens": st.integers(-3, 4) | JSON_VALUES,
    "n": st.integers(-1, 3) | JSON_VALUES,
    "temperature": st.floats(-1, 3) | JSON_VALUES,
    "top_p": st.floats(-1, 2) | JSON_VALUES,
    "stop": st.text(max_size=5) | JSON_VALUES,
    "seed": st.integers() | JSON_VALUES,
    "logprobs": st.integers(-1, 30) | JSON_VALUES,
    "stream": st.booleans(),
    "echo": st.booleans(),
}
CHAT_FIELDS = {
    **{k: v for k, v in COMPLETION_FIELDS.items() if k not in ("prompt", "echo", "logprobs")},
    "messages": st.lists(
        st.fixed_dictionaries(
            {"role": st.sampled_from(["user", "assistant", "tool", "system", "x"]) | JSON_VALUES},
            optional={"content": st.text(max_size=30) | JSON_VALUES, "tool_calls": JSON_VALUES,
                      "tool_call_id": JSON_VALUES},
        ),
        max_size=3,
    ) | JSON_VALUES,
    "tools": st.just([{"type": "function", "function": {"name": "move", "parameters": {}}}]) | JSON_VALUES,
    "tool_choice": st.sampled_from(["auto", "none", "required", {"type": "function", "function": {"name": "move"}}]) | JSON_VALUES,
    "logprobs": st.booleans() | JSON_VALUES,
}  # fmt: skip


def fuzzed(fields: dict) -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries({}, optional=fields)


FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


@FUZZ
@given(body=fuzzed(COMPLETION_FIELDS))
def test_fuzzed_completion_requests_never_500(model_server, body):
    status, answer = post(f"{model_server}/v1/completions", None, raw=json.dumps(body).encode())
    assert status < 500, answer
    if status >= 400:
        openai_error(status, answer)


@FUZZ
@given(body=fuzzed(CHAT_FIELDS))
def test_fuzzed_chat_requests_never_500(model_server, body):
    status, answer = post(
        f"{model_server}/v1/chat/completions", None, raw=json.dumps(body).encode()
    )
    assert status < 500, answer
    if status >= 400:
        openai_error(status, answer)


@FUZZ
@given(body=fuzzed({"queries": st.lists(st.text(max_size=30), max_size=5) | JSON_VALUES,
                    "topk": st.integers(-2, 200) | JSON_VALUES, "return_scores": JSON_VALUES}))  # fmt: skip
def test_fuzzed_search_requests_never_500(search_server, body):
    status, answer = post(f"{search_server}/retrieve", body)
    assert status < 500, answer
    assert ("result" in answer) if status == 200 else isinstance(answer["error"], str)
