"""A chat completion's text as OpenAI's reply: the forced opening of a required or named tool
call, the assistant message with its `tool_calls` (Hermes `<tool_call>` blocks), and the
log-probabilities in the shapes the API gives them. Shared by the model server and the
gateway, so both answer a chat the same way.

A required or named tool call is forced by starting the reply with the chat template's own
opening of a tool call (`<tool_call>`; for a named function also `{"name": "f",
"arguments":`; whitespace at the end is left to the model), and the model writes the rest.
The arguments are the model's, not decoded under a grammar: a model that cannot write JSON
can still produce a call that does not parse (then the reply is text, as with "auto").
"""

from __future__ import annotations

import itertools
import json
import uuid
from typing import Any

from toolgym.agents.engines.base import Completion
from toolgym.agents.render import ChatRenderer
from toolgym.agents.serving.chat_request import ToolChoice
from toolgym.agents.serving.protocol import ApiError
from toolgym.tools.parsers import HermesParser
from toolgym.tools.parsers.base import parse_safely


class ChatReplies:
    def __init__(self, renderer: ChatRenderer, tokenizer: Any) -> None:
        self.renderer, self.tokenizer = renderer, tokenizer
        self.parser = HermesParser()
        vocabulary = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        self.max_token_chars = max(len(str(t)) for t in vocabulary)
        """A text longer than a context of n tokens x this cannot fit it, whatever it says."""

    def check_text_size(self, chars: int, context: int, what: str) -> None:
        """Refuse, before tokenizing, a text too long for `context` tokens whatever its
        tokens (a 400 naming `what`)."""
        if chars > context * self.max_token_chars:
            raise ApiError(
                400, f"the {what} has {chars:,} characters, more than fit the model's context "
                f"of {context} tokens", param=what,
            )  # fmt: skip

    def forced_opening(self, choice: ToolChoice, tools: list[dict[str, Any]]) -> str:
        """The start of the reply for a required or named call, cut from the chat template's
        own rendering of a call (so it is written the way this model was taught)."""
        if choice.mode not in ("required", "function"):
            return ""
        placeholder = "\u2063toolgym-tool\u2063"
        call = {"name": placeholder, "arguments": {}}
        turn = {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "id": "x", "function": call}],
        }
        lead = [{"role": "user", "content": "."}]
        opening = self.renderer.render_text(lead, tools, add_generation_prompt=True)
        written = self.renderer.render_text([*lead, turn], tools)
        at = written.find(placeholder)
        if not written.startswith(opening) or at < 0:
            raise ApiError(
                400, "this model's chat template does not write tool calls, so tool_choice "
                f"{choice.mode!r} cannot be honoured", param="tool_choice",
            )  # fmt: skip
        reply = written[len(opening) :]
        at -= len(opening)
        if choice.mode == "required":
            opening = reply[: reply.rfind("{", 0, at)]
        else:
            after = reply[at + len(placeholder) :]
            opening = reply[:at] + str(choice.name) + after[: after.find("{}")]
        # BPE tokenizers join whitespace to the word after it (" {"): leave it to the model
        return opening.rstrip()

    def written(self, content: str, calls: list[dict[str, Any]]) -> str:
        """An assistant turn (its text, its calls as name and arguments) as this model's chat
        template writes it, up to its closing token: what the model would have to write to
        give that reply (a teacher's reply, recorded as the policy's demonstration)."""
        lead = [{"role": "user", "content": "."}]
        tool_calls = [
            {"type": "function", "id": f"call_{k}",
             "function": {"name": c["name"], "arguments": c["arguments"]}}
            for k, c in enumerate(calls)
        ]  # fmt: skip
        turn = {"role": "assistant", "content": content, "tool_calls": tool_calls}
        opening = self.renderer.render_text(lead, None, add_generation_prompt=True)
        whole = self.renderer.render_text([*lead, turn], None)
        if not whole.startswith(opening):
            raise ValueError("this model's chat template does not write an assistant turn")
        reply = whole[len(opening) :]
        closing = self.renderer.closing_tokens
        return reply[: reply.rfind(closing[0])] if closing and closing[0] in reply else reply

    def assistant_message(
        self, text: str, finish: str, use_tools: bool
    ) -> tuple[dict[str, Any], str]:
        parsed = parse_safely(self.parser, text) if use_tools else None
        if not parsed or not parsed.calls:
            return {"role": "assistant", "content": text, "tool_calls": []}, finish
        calls = [
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": json.dumps(c.arguments, ensure_ascii=False),
                },
            }
            for c in parsed.calls
        ]
        return {
            "role": "assistant",
            "content": parsed.text or None,
            "tool_calls": calls,
        }, "tool_calls"

    def token_text(self, token_id: int, as_ids: bool = False) -> str:
        return (
            f"token_id:{token_id}"
            if as_ids
            else self.tokenizer.decode([token_id], skip_special_tokens=False)
        )

    def completion_logprobs(self, c: Completion, as_ids: bool) -> dict[str, Any]:
        tokens = [self.token_text(t, as_ids) for t in c.token_ids]
        offsets = [0, *itertools.accumulate(len(t) for t in tokens)][: len(tokens)]
        tops = (
            [{self.token_text(t, as_ids): lp for t, lp in top.items()} for top in c.top_logprobs]
            if c.top_logprobs
            else None
        )
        return {
            "tokens": tokens,
            "token_logprobs": c.logprobs,
            "top_logprobs": tops,
            "text_offset": offsets,
        }

    def chat_logprobs(self, c: Completion) -> dict[str, Any]:
        def entry(token_id: int, logprob: float) -> dict[str, Any]:
            text = self.token_text(token_id)
            return {"token": text, "logprob": logprob, "bytes": list(text.encode())}

        content = []
        for i, (t, lp) in enumerate(zip(c.token_ids, c.logprobs, strict=True)):
            top = [entry(k, v) for k, v in c.top_logprobs[i].items()] if c.top_logprobs else []
            content.append({**entry(t, lp), "top_logprobs": top})
        return {"content": content}
