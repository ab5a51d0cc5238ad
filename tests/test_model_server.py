"""`toolgym serve model` over real HTTP on loopback, with the official `openai` client."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import openai
import pytest

from conftest import CHAT_MESSAGES
from toolgym.envs.maze import MazeEnv

TOOLS = MazeEnv().tool_schemas()


@pytest.fixture(scope="module")
def client(model_server):
    return openai.OpenAI(base_url=f"{model_server}/v1", api_key="unused", max_retries=0)


def raw(url: str, body: bytes | None = None, method: str = "POST") -> tuple[int, str]:
    request = urllib.request.Request(
        url, data=body, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_models_and_health(client, model_server):
    assert [m.id for m in client.models.list().data] == ["tiny"]
    assert raw(f"{model_server}/health", method="GET") == (200, '{"status": "ok"}')


def test_completions_return_token_ids_and_logprobs(client, tool_calling_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tool_calling_model_dir)
    result = client.completions.create(
        model="tiny",
        prompt="Map:\n#@.#",
        max_tokens=6,
        n=2,
        seed=3,
        logprobs=1,
        extra_body={"return_token_ids": True},
    )
    assert len(result.choices) == 2 and result.usage.completion_tokens <= 12
    for choice in result.choices:
        extra = choice.model_extra
        assert extra["prompt_token_ids"] == tokenizer.encode("Map:\n#@.#", add_special_tokens=False)
        assert 0 < len(extra["token_ids"]) <= 6
        assert len(choice.logprobs.token_logprobs) == len(extra["token_ids"])
        assert all(lp <= 0 for lp in choice.logprobs.token_logprobs)
        assert len(choice.logprobs.top_logprobs[0]) >= 1
    by_ids = client.completions.create(
        model="tiny",
        prompt=[5, 6, 7],
        max_tokens=3,
        extra_body={"return_token_ids": True, "return_tokens_as_token_ids": True},
        logprobs=0,
    )
    assert by_ids.choices[0].model_extra["prompt_token_ids"] == [5, 6, 7]
    assert all(t.startswith("token_id:") for t in by_ids.choices[0].logprobs.tokens)


def test_seeded_completions_are_reproducible(client):
    ask = dict(model="tiny", prompt="Keys held: 0.", max_tokens=8, seed=11, temperature=1.0)
    assert (
        client.completions.create(**ask).choices[0].text
        == client.completions.create(**ask).choices[0].text
    )


def test_chat_with_tools_returns_tool_calls(client):
    result = client.chat.completions.create(
        model="tiny", messages=CHAT_MESSAGES, tools=TOOLS, temperature=0, max_tokens=40
    )
    choice = result.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "move"
    assert json.loads(call.function.arguments) == {"direction": "north"}
    plain = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "hello"}],
        max_tokens=5,
        logprobs=True,
        top_logprobs=2,
    )
    assert isinstance(plain.choices[0].message.content, str)
    assert len(plain.choices[0].logprobs.content) == plain.usage.completion_tokens


def test_the_responses_api_is_answered_as_the_same_chat(client):
    """What the OpenAI Agents SDK's default model calls: the same greedy reply as the chat,
    its tool call a function_call item, whole or streamed."""
    tools = [{"type": "function", **tool["function"]} for tool in TOOLS]
    chat = client.chat.completions.create(
        model="tiny", messages=CHAT_MESSAGES, tools=TOOLS, temperature=0, max_tokens=40
    )
    asked = {"model": "tiny", "instructions": CHAT_MESSAGES[0]["content"], "tools": tools,
             "input": CHAT_MESSAGES[1]["content"], "temperature": 0, "max_output_tokens": 40}  # fmt: skip
    whole = client.responses.create(**asked)
    [call] = [item for item in whole.output if item.type == "function_call"]
    assert (call.name, json.loads(call.arguments)) == ("move", {"direction": "north"})
    assert whole.usage.output_tokens == chat.usage.completion_tokens
    assert whole.usage.input_tokens == chat.usage.prompt_tokens
    events = list(client.responses.create(**asked, stream=True))
    assert events[-1].type == "response.completed"
    [streamed] = [i for i in events[-1].response.output if i.type == "function_call"]
    assert streamed.arguments == call.arguments


def test_bad_requests_get_openai_errors(client, model_server):
    with pytest.raises(openai.NotFoundError, match="The model `nope` does not exist"):
        client.completions.create(model="nope", prompt="x", max_tokens=2)
    with pytest.raises(
        openai.BadRequestError, match=r"messages\[0\]: message role 'robot' is not one of"
    ):
        client.chat.completions.create(
            model="tiny", messages=[{"role": "robot", "content": "x"}], max_tokens=2
        )
    with pytest.raises(openai.BadRequestError, match="max_tokens"):
        client.completions.create(model="tiny", prompt="x", max_tokens=0)
    with pytest.raises(openai.BadRequestError, match="temperature"):
        client.completions.create(model="tiny", prompt="x", max_tokens=2, temperature=7)
    with pytest.raises(openai.BadRequestError, match="stream=true with logprobs"):
        client.completions.create(model="tiny", prompt="x", max_tokens=2, stream=True, logprobs=1)
    with pytest.raises(openai.BadRequestError, match="exceeds the model's context"):
        client.completions.create(model="tiny", prompt=[1] * 4090, max_tokens=10)
    status, body = raw(f"{model_server}/v1/completions", b"{not json")
    assert status == 400 and json.loads(body)["error"]["message"].startswith(
        "the request body is not valid JSON"
    )
    status, body = raw(f"{model_server}/v1/nothing", b"{}")
    assert status == 404 and json.loads(body)["error"]["type"] == "NotFoundError"
    message = json.loads(body)["error"]["message"]  # it names what to call instead
    assert message.startswith("POST /v1/nothing: not served here (served: ")
    assert "POST /v1/completions" in message and "POST /v1/chat/completions" in message


def test_error_bodies_have_vllms_shape(model_server):
    """vLLM's ErrorResponse: {"error": {message, type, param, code}}, code the HTTP status."""
    status, body = raw(
        f"{model_server}/v1/completions", b'{"model": "tiny", "prompt": "x", "max_tokens": 0}'
    )
    error = json.loads(body)["error"]
    assert status == 400 and error["code"] == 400 and error["type"] == "BadRequestError"
    assert set(error) == {"message", "type", "param", "code"}
    status, body = raw(f"{model_server}/v1/completions", b'{"model": "nope", "prompt": "x"}')
    assert status == 404 and json.loads(body)["error"]["code"] == 404


def test_a_multi_turn_tool_conversation_through_the_official_client(client):
    """What every agent loop does: send the assistant's tool-call reply back as it came
    (content None, tool_calls set), then the tool's result, and ask again."""
    messages: list = list(CHAT_MESSAGES)
    first = client.chat.completions.create(
        model="tiny", messages=messages, tools=TOOLS, temperature=0, max_tokens=40
    )
    reply = first.choices[0].message
    assert reply.content is None and reply.tool_calls[0].function.name == "move"
    messages.append(reply)  # the client's own message object, as agent loops append it
    messages.append(
        {"role": "tool", "tool_call_id": reply.tool_calls[0].id, "content": "You moved north."}
    )
    second = client.chat.completions.create(
        model="tiny", messages=messages, tools=TOOLS, temperature=0, max_tokens=8
    )
    assert second.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert second.usage.prompt_tokens > first.usage.prompt_tokens
    # the same history as plain dicts, the way JSON clients send it, and a tool message
    # without tool_call_id (vLLM accepts it; Hermes templates do not use it)
    as_dicts = [
        *CHAT_MESSAGES,
        reply.model_dump(exclude_none=True),
        {"role": "tool", "content": "ok"},
    ]
    as_dicts[2]["content"] = None
    again = client.chat.completions.create(
        model="tiny", messages=as_dicts, tools=TOOLS, max_tokens=4
    )
    assert again.usage.prompt_tokens > first.usage.prompt_tokens


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        ({"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f"}}]},
         r"messages\[0\]\.tool_calls\[0\]\.function\.arguments: Field required"),
        ({"role": "user", "content": 5}, r"messages\[0\]\.content: Input should be a valid string"),
        ({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
         r"messages\[0\]\.content\[0\]: this server's model reads text parts, not 'image_url'"),
        ({"role": "user"}, r"messages\[0\]\.content: Field required"),
    ],
)  # fmt: skip
def test_messages_are_checked_against_openais_types(client, message, problem):
    with pytest.raises(openai.BadRequestError, match=problem):
        client.chat.completions.create(model="tiny", messages=[message], max_tokens=2)


def test_tool_choice_required_and_named_force_a_call(client, tool_calling_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tool_calling_model_dir)
    for choice in ("required", {"type": "function", "function": {"name": "move"}}):
        result = client.chat.completions.create(
            model="tiny", messages=CHAT_MESSAGES, tools=TOOLS, tool_choice=choice,
            temperature=0, max_tokens=40, extra_body={"return_token_ids": True},
        )  # fmt: skip
        call = result.choices[0].message.tool_calls[0]
        assert result.choices[0].finish_reason == "tool_calls"
        assert (call.function.name, json.loads(call.function.arguments)) == (
            "move", {"direction": "north"},
        )  # fmt: skip
    # the forced opening, the template's own start of a call (this template writes the JSON
    # on a line of its own), ends the prompt the model continued
    prompt = tokenizer.decode(result.model_extra["prompt_token_ids"])
    assert prompt.endswith('<|im_start|>assistant\n<tool_call>\n{"name": "move", "arguments":')
    plain = client.chat.completions.create(
        model="tiny", messages=CHAT_MESSAGES, tools=TOOLS, tool_choice="none", temperature=0,
        max_tokens=40,
    )  # fmt: skip
    assert (
        not plain.choices[0].message.tool_calls
        and "<tool_call>" in plain.choices[0].message.content
    )
    with pytest.raises(openai.BadRequestError, match="not among the tools"):
        client.chat.completions.create(
            model="tiny", messages=CHAT_MESSAGES, tools=TOOLS, max_tokens=4,
            tool_choice={"type": "function", "function": {"name": "fly"}},
        )  # fmt: skip
    with pytest.raises(openai.BadRequestError, match="needs `tools`"):
        client.chat.completions.create(
            model="tiny", messages=CHAT_MESSAGES, tool_choice="required", max_tokens=4
        )


def test_streamed_completions_and_chat_match_the_whole_answer(client):
    ask = dict(model="tiny", prompt="Keys held: 0.", max_tokens=12, seed=5, temperature=1.0)
    whole = client.completions.create(**ask)
    chunks = list(client.completions.create(**ask, stream=True))
    assert "".join(c.choices[0].text for c in chunks) == whole.choices[0].text
    assert chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason
    assert len(chunks) > 2  # token by token, not one block

    chat = dict(
        model="tiny", messages=[{"role": "user", "content": "hello"}], max_tokens=10, seed=2
    )
    whole_chat = client.chat.completions.create(**chat)
    stream = list(
        client.chat.completions.create(**chat, stream=True, stream_options={"include_usage": True})
    )
    assert stream[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == whole_chat.choices[0].message.content
    assert (
        stream[-1].choices == [] and stream[-1].usage.total_tokens == whole_chat.usage.total_tokens
    )


def test_streamed_tool_calls_arrive_as_tool_call_deltas(client):
    stream = client.chat.completions.create(
        model="tiny", messages=CHAT_MESSAGES, tools=TOOLS, temperature=0, max_tokens=40,
        stream=True,
    )  # fmt: skip
    content, calls, finish = "", {}, None
    for chunk in stream:
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for call in delta.tool_calls or []:
            entry = calls.setdefault(call.index, {"name": "", "arguments": ""})
            entry["name"] += call.function.name or ""
            entry["arguments"] += call.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert "<tool_call>" not in content and finish == "tool_calls"
    assert calls[0]["name"] == "move" and json.loads(calls[0]["arguments"]) == {
        "direction": "north"
    }


def test_lora_adapters_load_serve_and_unload(
    client, model_server, tool_calling_model_dir, tmp_path
):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(tool_calling_model_dir)
    lora = get_peft_model(
        base,
        LoraConfig(
            r=4, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False
        ),
    )
    lora.save_pretrained(tmp_path / "adapter")
    load = json.dumps({"lora_name": "maze-lora", "lora_path": str(tmp_path / "adapter")}).encode()
    assert raw(f"{model_server}/v1/load_lora_adapter", load) == (
        200,
        "Success: LoRA adapter 'maze-lora' added successfully.",
    )
    assert raw(f"{model_server}/v1/load_lora_adapter", load)[0] == 400  # already loaded
    assert {m.id for m in client.models.list().data} == {"tiny", "maze-lora"}
    ask = dict(
        prompt="Go north.",
        max_tokens=4,
        temperature=0,
        logprobs=0,
        extra_body={"return_token_ids": True},
    )
    base_out = client.completions.create(model="tiny", **ask).choices[0]
    lora_out = client.completions.create(model="maze-lora", **ask).choices[0]
    assert base_out.logprobs.token_logprobs != lora_out.logprobs.token_logprobs
    again = client.completions.create(model="tiny", **ask).choices[0]
    assert again.logprobs.token_logprobs == pytest.approx(
        base_out.logprobs.token_logprobs, abs=1e-5
    )  # base unaffected
    unload = json.dumps({"lora_name": "maze-lora"}).encode()
    assert raw(f"{model_server}/v1/unload_lora_adapter", unload)[0] == 200
    assert raw(f"{model_server}/v1/unload_lora_adapter", unload)[0] == 404
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="maze-lora", **ask)
    missing = json.dumps({"lora_name": "x", "lora_path": str(tmp_path / "none")}).encode()
    status, body = raw(f"{model_server}/v1/load_lora_adapter", missing)
    assert status == 400 and "adapter_config.json is missing" in body


@pytest.mark.parametrize(
    "text", ["plain words and numbers 12345", "naïve café, 東京 and 🙂🙃 emoji", "a\nb  c\tSTOP d"]
)
def test_streamed_text_decodes_token_by_token_to_the_whole_text(tiny_tokenizer, text):
    """Each token is decoded against only the chunk before it; the released pieces must still
    join to the full decode (cut at the stop), never split a character."""
    from toolgym.agents.serving.stream import ChoiceText

    ids = tiny_tokenizer.encode(text, add_special_tokens=False)
    whole = tiny_tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
    choice = ChoiceText(tiny_tokenizer, ["STOP"])
    pieces = [choice.push(token) for token in ids]
    assert all("\ufffd" not in piece for piece in pieces)
    assert "".join(pieces) + choice.finish(whole.split("STOP")[0]) == whole.split("STOP")[0]
    assert len([p for p in pieces if p]) > 3  # released as it went, not all at the end
