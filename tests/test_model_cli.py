"""`toolgym model init` makes loadable model directories; `toolgym eval --engine hf` uses one."""

from __future__ import annotations

import json

from toolgym.agents.trajectory import read_jsonl


def test_model_init_llama_is_a_normal_model_directory(cli, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    result = cli("model", "init", "--arch", "llama", "--size", "tiny", "--out", str(tmp_path / "m"))
    assert result.returncode == 0, result.stderr
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "m")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "m")
    assert type(model).__name__ == "LlamaForCausalLM"
    assert model.config.vocab_size == len(tokenizer)
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}, {"role": "tool", "content": "42"}],
        tools=[
            {
                "type": "function",
                "function": {"name": "f", "description": "d", "parameters": {"type": "object"}},
            }
        ],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert text.startswith("<|im_start|>system\n# Tools") and text.endswith(
        "<|im_start|>tool\n42<|im_end|>\n<|im_start|>assistant\n"
    )
    assert tokenizer.convert_ids_to_tokens(
        tokenizer.encode("<tool_call><|im_end|>", add_special_tokens=False)
    ) == ["<tool_call>", "<|im_end|>"]
    bad = cli("model", "init", "--arch", "gpt9", "--out", str(tmp_path / "x"))
    assert bad.returncode == 2 and "unknown arch 'gpt9'" in bad.stderr


def test_same_seed_same_model(tmp_path):
    from toolgym.agents.models.fresh import init_model

    a, b = init_model(tmp_path / "a", seed=3), init_model(tmp_path / "b", seed=3)
    assert (a / "tokenizer.json").read_bytes() == (b / "tokenizer.json").read_bytes()
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()


def test_eval_with_the_hf_engine(cli, tiny_model_dir, tmp_path):
    out = tmp_path / "e.jsonl"
    result = cli(
        "eval",
        "toolgym/Arithmetic-v0",
        "--model",
        str(tiny_model_dir),
        "-n",
        "3",
        "--max-tokens",
        "12",
        "--out",
        str(out),
        "--env-arg",
        "max_turns=2",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(read_jsonl(out)) == 3 and all(len(t.steps) <= 2 for t in read_jsonl(out))
    unknown = cli("eval", "toolgym/Nope-v0", "--model", str(tiny_model_dir))
    assert unknown.returncode == 2 and "not registered" in unknown.stderr


def test_eval_says_how_many_tasks_it_played_and_prints_the_interval(cli, tiny_model_dir, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    rows = [{"question": f"{a}+1?", "answer": a + 1} for a in range(3)]
    rows += [{"question": f"{a}*2?", "answer": 2 * a, "split": "eval"} for a in (4, 5)]
    tasks.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    result = cli("eval", "toolgym/Arithmetic-v0", "--model", str(tiny_model_dir), "-n", "5",
                 "--max-tokens", "8", "--env-arg", f"tasks={tasks}", "--env-arg", "max_turns=1",
                 "--out", str(tmp_path / "e.jsonl"))  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "holds 2 tasks: playing those 2, not 5" in result.stdout
    assert "distinct items" in result.stdout and "95% interval" in result.stdout
    row = next(line for line in result.stdout.splitlines() if line.startswith("│ 2 "))
    assert "0.0% to 65.8%" in row  # Wilson's for 0 of 2: two episodes say little


def test_eval_plays_each_task_several_times_and_keeps_the_interval_over_tasks(
    cli, tiny_model_dir, tmp_path
):
    tasks = tmp_path / "tasks.jsonl"
    rows = [{"question": "1+1?", "answer": 2}] + [
        {"question": f"{a}*2?", "answer": 2 * a, "split": "eval"} for a in (4, 5)
    ]
    tasks.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "e.jsonl"
    result = cli("eval", "toolgym/Arithmetic-v0", "--model", str(tiny_model_dir), "-n", "2",
                 "--plays", "3", "--temperature", "1", "--max-tokens", "8",
                 "--env-arg", f"tasks={tasks}", "--env-arg", "max_turns=1", "--out", str(out))  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    played = read_jsonl(out)
    assert len(played) == 6 and len({t.item for t in played}) == 2
    row = next(line for line in result.stdout.splitlines() if line.startswith("│ 6 "))
    # An untrained model fails every play: six plays of two tasks vouch for no more than two.
    assert "│ 2 " in row and "0.0% to 65.8%" in row
    # A count of plays that would hold millions of episodes in memory is refused, not played.
    huge = cli("eval", "toolgym/Arithmetic-v0", "--model", str(tiny_model_dir), "--plays", "65")
    assert huge.returncode == 2 and "less than or equal to 64" in huge.stderr
