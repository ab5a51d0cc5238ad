"""`toolgym model init`: a small causal LM built from a transformers config, with a byte-level
BPE tokenizer trained here on text from toolgym's own envs. Nothing is downloaded.

The directory it writes is an ordinary model directory (config.json, safetensors weights,
tokenizer.json with its chat template, generation_config.json), so `AutoModelForCausalLM`,
`AutoTokenizer` and vLLM load it as they would any hub checkpoint.

Special tokens cover our ChatML template and the markers of the Qwen and Llama-3 templates,
so the same tokenizer renders those families' templates with their control tokens intact.

`--arch qwen2_vl` builds a vision-language model of Qwen2-VL's architecture: the text model
of the chosen size, a one-block vision encoder, Qwen2-VL's image tokens added to the
tokenizer and its image processor saved beside the weights, with a pixel budget that keeps a
screenshot to a few dozen tokens.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHAT_TEMPLATE = (Path(__file__).parent / "chat_template.jinja").read_text()

SPECIAL_TOKENS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>",
    "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
    "<|eot_id|>", "<|eom_id|>", "<|python_tag|>",
]  # fmt: skip
# Markers that stay visible in decoded text (the model writes them as ordinary output).
MARKUP_TOKENS = [
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
]


@dataclass(frozen=True)
class ModelSize:
    vocab_size: int
    hidden_size: int
    layers: int
    heads: int
    kv_heads: int
    intermediate_size: int


SIZES = {
    "tiny": ModelSize(1024, 64, 2, 4, 2, 192),
    "mini": ModelSize(1024, 128, 4, 4, 2, 384),
    "small": ModelSize(4096, 256, 4, 8, 4, 768),
}
ARCHS = ("qwen2", "llama", "qwen2_vl")
VISION_TOKENS = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>"]
IMAGE_PIXELS = (28 * 28 * 4, 160 * 210 * 2)
"""The image processor's pixel budget (min, max): a MiniWoB page, 160x210, is 48 tokens."""


def corpus(n_episodes: int = 300) -> list[str]:
    """Text like what the model will read and write: our envs' prompts, maps, tool calls and
    results, played by their scripted solvers."""
    from toolgym.envs import ToolEnv, make
    from toolgym.version import __version__

    texts = []
    for env_id, seed in itertools.product(
        ("toolgym/Maze-v0", "toolgym/Arithmetic-v0"), range(n_episodes // 2)
    ):
        env = make(env_id)
        assert isinstance(env, ToolEnv)  # both envs above are
        obs, _ = env.reset(seed=seed)
        texts += [m["content"] for m in obs]
        for _ in range(30):
            action = env.scripted_action()
            if action is None:
                break
            texts.append(action)
            obs, _, terminated, truncated, _ = env.step(action)
            texts += [m["content"] for m in obs]
            if terminated or truncated:
                break
        texts.append(str(env.tool_schemas()))
        env.close()
    texts.append(f"toolgym {__version__} " + " ".join(str(i) for i in range(1000)))
    return texts


def build_tokenizer(vocab_size: int, texts: Iterable[str] | None = None) -> Any:
    """A byte-level BPE tokenizer (any text encodes) with our special tokens, trained on
    `texts` (default: the envs' own text, `corpus()`)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(corpus() if texts is None else texts, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        additional_special_tokens=SPECIAL_TOKENS[1:],
    )
    tokenizer.add_tokens(MARKUP_TOKENS)
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_model(arch: str, size: str, vocab_size: int, eos_id: int, pad_id: int, seed: int) -> Any:
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    s = SIZES[size]
    common: dict[str, Any] = dict(
        vocab_size=vocab_size,
        hidden_size=s.hidden_size,
        num_hidden_layers=s.layers,
        num_attention_heads=s.heads,
        num_key_value_heads=s.kv_heads,
        intermediate_size=s.intermediate_size,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    if arch == "qwen2_vl":
        return _vision_model(common)
    config = Qwen2Config(**common) if arch == "qwen2" else LlamaConfig(**common)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32)


def _vision_model(text: dict[str, Any]) -> Any:
    """Qwen2-VL with `text` as its language model; the image token ids follow the vocabulary's
    last three tokens (VISION_TOKENS, added last)."""
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

    start, end, image = (text["vocab_size"] - 3 + k for k in range(3))
    half_head = text["hidden_size"] // text["num_attention_heads"] // 2
    sections = [half_head - 2 * (half_head * 3 // 8), half_head * 3 // 8, half_head * 3 // 8]
    config = Qwen2VLConfig(
        text_config={
            **text,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": sections},
        },
        vision_config={
            "depth": 1, "embed_dim": 32, "num_heads": 2, "hidden_size": text["hidden_size"],
            "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
        },
        image_token_id=image, vision_start_token_id=start, vision_end_token_id=end,
        tie_word_embeddings=True,
    )  # fmt: skip
    return Qwen2VLForConditionalGeneration(config).float()


def init_model(out: str | Path, arch: str = "qwen2", size: str = "tiny", seed: int = 0) -> Path:
    """Write a fresh model directory to `out` and return its path."""
    from toolgym.errors import ConfigError, did_you_mean

    if arch not in ARCHS:
        raise ConfigError(
            f"unknown arch '{arch}'.{did_you_mean(arch, ARCHS)} Choose from: {', '.join(ARCHS)}"
        )
    if size not in SIZES:
        raise ConfigError(
            f"unknown size '{size}'.{did_you_mean(size, SIZES)} Choose from: {', '.join(SIZES)}"
        )
    tokenizer = build_tokenizer(SIZES[size].vocab_size)
    return save_model(new_model(tokenizer, arch, size, seed), tokenizer, out)


def new_model(tokenizer: Any, arch: str, size: str, seed: int) -> Any:
    """A randomly initialised model of `size` for `tokenizer`, stopping at its end tokens
    (for qwen2_vl, Qwen2-VL's image tokens are added to `tokenizer` first)."""
    if arch == "qwen2_vl":
        tokenizer.add_tokens(VISION_TOKENS, special_tokens=True)
    eos_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    model = build_model(arch, size, len(tokenizer), eos_id, tokenizer.pad_token_id, seed)
    model.generation_config.eos_token_id = [
        eos_id,
        tokenizer.convert_tokens_to_ids("<|endoftext|>"),
    ]
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def save_model(model: Any, tokenizer: Any, out: str | Path) -> Path:
    """Write an ordinary model directory (weights, config, tokenizer) and return its path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    if getattr(model.config, "vision_config", None) is not None:
        from transformers import Qwen2VLImageProcessorPil

        low, high = IMAGE_PIXELS
        Qwen2VLImageProcessorPil(min_pixels=low, max_pixels=high).save_pretrained(out)
    return out
