"""The gateway's Responses API (`POST /v1/responses`), called with the official `openai`
client: a tool-using session through it is recorded token for token as the same session
through chat completions, a stream carries the same reply, and what it cannot honour is
refused in words."""

from __future__ import annotations

import openai
import pytest
from test_gateway import Recorded, open_session, serving

from conftest import CHAT_MESSAGES
from toolgym.agents.engines.hf import HFEngine
from toolgym.envs.maze import MazeEnv

CHAT_TOOLS = MazeEnv().tool_schemas()
TOOLS = [{"type": "function", **tool["function"]} for tool in CHAT_TOOLS]
INSTRUCTIONS, QUESTION = CHAT_MESSAGES[0]["content"], CHAT_MESSAGES[1]["content"]


@pytest.fixture(scope="module")
def gateway(tool_calling_model_dir, loop_thread):
    yield from serving(Recorded(HFEngine(tool_calling_model_dir, max_batch_size=64)), loop_thread)


def test_a_responses_session_is_recorded_as_the_same_chat(gateway, loop_thread):
    session, client = open_session(gateway, loop_thread)
    first = client.responses.create(model="any", instructions=INSTRUCTIONS, input=QUESTION,
                                    tools=TOOLS)  # fmt: skip
    call = next(item for item in first.output if item.type == "function_call")
    assert call.name == "move" and first.status == "completed"
    # the input the OpenAI Agents SDK sends back: its items so far, the call's output
    items = [{"role": "user", "content": QUESTION}, *[i.model_dump() for i in first.output],
             {"type": "function_call_output", "call_id": call.call_id, "output": "A wall."}]  # fmt: skip
    second = client.responses.create(model="any", instructions=INSTRUCTIONS, input=items,
                                     tools=TOOLS)  # fmt: skip
    assert second.usage.output_tokens == len(session.trajectory.steps[1].logprobs)

    chat_session, chat = open_session(gateway, loop_thread)
    reply = chat.chat.completions.create(model="any", messages=CHAT_MESSAGES, tools=CHAT_TOOLS)
    message = reply.choices[0].message
    history = [*CHAT_MESSAGES, message.model_dump(exclude_none=True),
               {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": "A wall."}]  # fmt: skip
    chat.chat.completions.create(model="any", messages=history, tools=CHAT_TOOLS)

    through_responses, through_chat = session.trajectory, chat_session.trajectory
    assert through_responses.segment_starts == [] and len(through_responses.steps) == 2
    assert through_responses.token_ids == through_chat.token_ids
    assert [s.tool_calls for s in through_responses.steps] == [
        s.tool_calls for s in through_chat.steps
    ]
    assert through_responses.steps[0].observation[0]["name"] == "move"


def test_a_streamed_response_is_the_same_reply(gateway, loop_thread):
    session, client = open_session(gateway, loop_thread)
    events = list(client.responses.create(model="m", instructions=INSTRUCTIONS, input=QUESTION,
                                          tools=TOOLS, stream=True))  # fmt: skip
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    done = events[-1].response
    call = next(item for item in done.output if item.type == "function_call")
    assert call.name == "move"
    assert done.usage.output_tokens == len(session.trajectory.steps[0].logprobs)


def test_what_it_cannot_honour_is_refused_in_words(gateway, loop_thread):
    session, client = open_session(gateway, loop_thread)
    with pytest.raises(openai.BadRequestError, match="stores no responses"):
        client.responses.create(model="m", input=QUESTION, previous_response_id="resp_1")
    with pytest.raises(openai.BadRequestError, match="only function tools"):
        client.responses.create(model="m", input=QUESTION, tools=[{"type": "web_search"}])
    image = {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"}
    with pytest.raises(openai.BadRequestError, match="reads text parts, not 'input_image'"):
        client.responses.create(model="m", input=[{"role": "user", "content": [image]}])
    with pytest.raises(openai.BadRequestError, match="items of type 'computer_call_output'"):
        client.responses.create(model="m", input=[{"type": "computer_call_output"}])
    with pytest.raises(openai.BadRequestError, match=r"input\[0\]\.call_id"):
        client.responses.create(model="m", input=[{"type": "function_call_output", "output": ""}])
    with pytest.raises(openai.BadRequestError, match="nothing to answer"):
        client.responses.create(model="m", input=[])
    assert session.trajectory.steps == []  # nothing refused was sampled or recorded
    client.responses.create(model="m", input=QUESTION)
    assert len(session.trajectory.steps) == 1
