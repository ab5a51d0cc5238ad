"""Zero drift: after N turns the token sequence is exactly prompt + generated ids + delta ids,
its text is what the chat template renders for the whole conversation, and the loss mask
covers exactly the model's own tokens. Checked for our tiny template and for the templates
Qwen2.5, Qwen3 and Llama 3.1/3.2 ship (kept as test data in shared/chat_templates)."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolgym.agents.render import ChatRenderer
from toolgym.envs.maze import MazeEnv

TEMPLATES = Path(__file__).resolve().parent / "data" / "chat_templates"
CLOSING = {
    "tiny": "<|im_end|>",
    "qwen2_5": "<|im_end|>",
    "qwen3": "<|im_end|>",
    "llama3_1": "<|eot_id|>",
    "llama3_2": "<|eot_id|>",
}
TOOLS = MazeEnv().tool_schemas()
OPENING = [
    {"role": "system", "content": "You are in a maze."},
    {"role": "user", "content": "Map:\n#@.#\nFind G."},
]
CALL = '<tool_call>\n{"name": "move", "arguments": {"direction": "north"}}\n</tool_call>'
# (generation text, ends with the closing token?, the env's answer)
TURNS = [
    (CALL, True, [{"role": "tool", "tool_call_id": "c1", "name": "move", "content": "You moved north."}]),
    (f"Two at once.\n{CALL}\n{CALL}", True, [
        {"role": "tool", "tool_call_id": "c2", "name": "move", "content": "You moved north."},
        {"role": "tool", "tool_call_id": "c3", "name": "move", "content": "Blocked: a wall."},
    ]),
    ("I am not sure what to do", False, [{"role": "user", "content": "No tool call found."}]),  # cut at max_tokens
    (CALL, True, [{"role": "tool", "tool_call_id": "c4", "name": "move", "content": "Goal!"}]),
]  # fmt: skip


def renderer_for(name: str, tokenizer) -> ChatRenderer:
    template = None if name == "tiny" else (TEMPLATES / f"{name}.jinja").read_text()
    return ChatRenderer(tokenizer, template)


def generated_ids(tokenizer, text: str, closed: bool, closing: str) -> list[int]:
    """Ids as a sampler might produce them: one token per character, which is NOT how the
    tokenizer would encode this text, so any re-tokenization would change them."""
    ids = [i for ch in text for i in tokenizer.encode(ch, add_special_tokens=False)]
    return ids + ([tokenizer.convert_tokens_to_ids(closing)] if closed else [])


def play(renderer: ChatRenderer, tokenizer, closing: str):
    ids = renderer.prompt_ids(OPENING, TOOLS)
    mask = [0] * len(ids)
    spans, conversation = [], list(OPENING)
    for text, closed, answer in TURNS:
        gen = generated_ids(tokenizer, text, closed, closing)
        spans.append((len(ids), gen))
        ids, mask = ids + gen, mask + [1] * len(gen)
        delta = renderer.delta_ids(answer, gen, TOOLS)
        ids, mask = ids + delta, mask + [0] * len(delta)
        conversation += [{"role": "assistant", "content": text}, *answer]
    return ids, mask, spans, conversation


@pytest.mark.parametrize("name", ["tiny", "qwen2_5", "llama3_1", "llama3_2"])
def test_sequence_is_generated_plus_delta_and_matches_the_template(name, tiny_tokenizer):
    renderer = renderer_for(name, tiny_tokenizer)
    assert renderer.closing_tokens == [CLOSING[name]]
    ids, mask, spans, conversation = play(renderer, tiny_tokenizer, CLOSING[name])
    for start, gen in spans:  # the model's ids are kept exactly as generated
        assert ids[start : start + len(gen)] == gen
    model_positions = {start + k for start, gen in spans for k in range(len(gen))}
    assert [i for i, m in enumerate(mask) if m] == sorted(model_positions)
    expected = renderer.render_text(conversation, TOOLS, add_generation_prompt=True)
    assert (
        tiny_tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        == expected
    )
    # Re-tokenizing the same text gives other ids: that drift is what the bookkeeping avoids.
    assert renderer.encode(expected) != ids


def test_qwen3_reasoning_stays_in_the_sequence_although_the_template_drops_it(tiny_tokenizer):
    renderer = renderer_for("qwen3", tiny_tokenizer)
    ids = renderer.prompt_ids(OPENING, TOOLS)
    thought = "<think>\nThe wall is east, so go north.\n</think>\n\n" + CALL
    gen = generated_ids(tiny_tokenizer, thought, True, "<|im_end|>")
    answer = [{"role": "tool", "tool_call_id": "c1", "name": "move", "content": "You moved north."}]
    ids += gen + renderer.delta_ids(answer, gen, TOOLS)
    follow_up = [{"role": "user", "content": "Keep going."}]
    ids += renderer.delta_ids(follow_up, gen, TOOLS)  # a second env turn appended as a delta
    text = tiny_tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    assert "The wall is east, so go north." in text
    conversation = [*OPENING, {"role": "assistant", "content": thought}, *answer, *follow_up]
    rerendered = renderer.render_text(conversation, TOOLS, add_generation_prompt=True)
    assert "The wall is east" not in rerendered  # re-rendering would have rewritten history


def test_a_completion_cut_at_max_tokens_gets_the_closing_from_the_env(tiny_tokenizer):
    renderer = renderer_for("tiny", tiny_tokenizer)
    answer = [{"role": "user", "content": "Too long."}]
    cut = tiny_tokenizer.encode("I was saying", add_special_tokens=False)
    closed = cut + [tiny_tokenizer.convert_tokens_to_ids("<|im_end|>")]
    im_end = tiny_tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert renderer.delta_ids(answer, cut, None)[0] == im_end
    assert renderer.delta_ids(answer, closed, None)[0] != im_end
    assert renderer.delta_ids(answer, cut, None)[1:] == renderer.delta_ids(answer, closed, None)


def test_tool_schemas_can_be_left_out_of_prompts(tiny_tokenizer):
    full, short = ChatRenderer(tiny_tokenizer), ChatRenderer(tiny_tokenizer, tool_schemas=False)
    with_schemas, without = full.prompt_ids(OPENING, TOOLS), short.prompt_ids(OPENING, TOOLS)
    assert len(without) < len(with_schemas) - 100
    assert '"parameters"' in tiny_tokenizer.decode(with_schemas)
    assert '"parameters"' not in tiny_tokenizer.decode(without)
    answer = [{"role": "tool", "tool_call_id": "c", "name": "move", "content": "ok"}]
    assert short.delta_ids(answer, [], TOOLS) == full.delta_ids(answer, [], TOOLS)


TOOLS_BEFORE_EACH_TURN = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}{% if tools %}<|im_start|>system\n"
    "{% for t in tools %}{{ t['function']['name'] }} {% endfor %}<|im_end|>\n{% endif %}"
    "<|im_start|>assistant\n{% endif %}"
)


@pytest.mark.parametrize("name", ["tiny", "qwen2_5", "qwen3", "llama3_1", "llama3_2"])
def test_deltas_leave_tools_out_only_where_the_template_writes_them_before_the_turns(
    name, tiny_tokenizer
):
    renderer = renderer_for(name, tiny_tokenizer)
    answer = TURNS[0][2]
    closing = [tiny_tokenizer.convert_tokens_to_ids(CLOSING[name])]
    assert not renderer._tools_reach_the_tail
    assert renderer.delta_ids(answer, closing, TOOLS) == renderer.delta_ids(answer, closing, None)
    every_turn = ChatRenderer(tiny_tokenizer, TOOLS_BEFORE_EACH_TURN)
    assert every_turn._tools_reach_the_tail
    with_tools = tiny_tokenizer.decode(every_turn.delta_ids(answer, [], TOOLS))
    assert "pick_up" in with_tools and "pick_up" not in tiny_tokenizer.decode(
        every_turn.delta_ids(answer, [], None)
    )


def test_a_template_that_refuses_the_probe_keeps_tools_in_its_deltas(tiny_tokenizer):
    strict = TOOLS_BEFORE_EACH_TURN.replace(
        "{% for m in messages %}",
        "{% for m in messages %}{% if loop.index0 > 2 %}"
        "{{ raise_exception('one answer per turn, please') }}{% endif %}",
    )
    renderer = ChatRenderer(tiny_tokenizer, strict)
    assert renderer._tools_reach_the_tail
    delta = tiny_tokenizer.decode(renderer.delta_ids(TURNS[0][2], [], TOOLS))
    assert "pick_up" in delta


@pytest.mark.parametrize("name", list(CLOSING))
def test_a_library_user_s_lone_surrogate_renders_as_a_replacement_character(name, tiny_tokenizer):
    renderer = renderer_for(name, tiny_tokenizer)
    broken = [*OPENING[:1], {"role": "user", "content": "Map:\n#@\ud800#\nFind G."}]
    fixed = [*OPENING[:1], {"role": "user", "content": "Map:\n#@\ufffd#\nFind G."}]
    assert renderer.prompt_ids(broken, TOOLS) == renderer.prompt_ids(fixed, TOOLS)
    tool = [{"role": "tool", "tool_call_id": "c1", "name": "move", "content": "moved \udfff"}]
    assert renderer.delta_ids(tool, [1]) == renderer.delta_ids(
        [{**tool[0], "content": "moved \ufffd"}], [1]
    )
