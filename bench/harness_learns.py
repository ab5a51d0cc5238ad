"""Does an agent harness learn when trained through the gateway? The example agent on the
plain `openai` client (examples/agents/arithmetic_openai.py: its own calculator, its answer
checked by the Arithmetic env's answer tool) is warm-started on demonstrations recorded
through the gateway itself, then trained with GRPO from that one warm start for 3 seeds;
held-out success (Arithmetic's eval split, questions training never draws, by content) at
the start and the end of each run, with 95% intervals.

    python bench/harness_learns.py --out /tmp/harness-learns [--seeds 0 1 2] [--steps 20]

The demonstrator is an engine behind the gateway that writes what the agent should: a
calculator call with the question's expression, then the calculator's answer. It slips
(`--slips`, a share of its episodes): it copies one operand wrongly, so its student leaves RL
something to correct.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

from common import HeldOut

from toolgym.agents.collector import GroupRequest
from toolgym.agents.demonstrations import Demonstration
from toolgym.agents.engines.base import Capabilities, Completion, SamplingParams
from toolgym.agents.gateway.collector import HarnessCollector
from toolgym.agents.gateway.harness import CallableHarness
from toolgym.agents.gateway.result_check import result_check
from toolgym.agents.gateway.server import Gateway
from toolgym.agents.gateway.session import SessionSettings
from toolgym.agents.models.loading import load_model, load_tokenizer
from toolgym.agents.render import ChatRenderer
from toolgym.agents.runtime import Runtime
from toolgym.config import load_config
from toolgym.envs.ref import EnvRef
from toolgym.imports import load_callable
from toolgym.training.config import TrainConfig
from toolgym.training.supervised.sft import SFTConfig, sft

ROOT = Path(__file__).resolve().parents[1]
AGENT = f"{ROOT / 'examples' / 'agents' / 'arithmetic_openai.py'}:solve"
CONFIG = ROOT / "configs" / "harness_arithmetic.yaml"
ENV_ARGS = {"n_operands": 2}
ARITHMETIC = EnvRef("Arithmetic-v0", "toolgym/Arithmetic-v0", ENV_ARGS)


class Demonstrator:
    """Writes the example agent's turns from the prompt's own text: a calculator call with
    the question's expression (in `slips` of the episodes, one operand copied wrongly), and
    after the calculator's answer, that answer."""

    capabilities: ClassVar[Capabilities] = Capabilities("shared")

    def __init__(self, tokenizer: Any, renderer: ChatRenderer, slips: float, seed: int) -> None:
        self.tokenizer, self.renderer = tokenizer, renderer
        self.slips, self.rng = slips, random.Random(seed)

    async def generate(
        self, prompt_ids: list[int], sampling: SamplingParams, adapter: str | None = None
    ) -> Completion:
        text = self.tokenizer.decode(prompt_ids)
        last = text.rsplit("<|im_start|>", 2)[-2]
        if last.startswith("tool\n"):
            reply = last.removeprefix("tool\n").removesuffix("<|im_end|>\n")
        else:
            expression = re.findall(r"What is (.+?)\?", text)[-1]
            if self.rng.random() < self.slips:
                numbers = re.findall(r"\d+", expression)
                wrong = str(int(numbers[0]) + self.rng.choice([-10, -1, 1, 10]))
                expression = expression.replace(numbers[0], wrong, 1)
            call = {"name": "calculator", "arguments": {"expression": expression}}
            reply = f"<tool_call>\n{json.dumps(call)}\n</tool_call>"
        ids = self.renderer.encode_plain(reply) + self.renderer.closing_ids()
        return Completion(ids, [0.0] * len(ids), reply, "stop", prompt_tokens=len(prompt_ids))

    async def aclose(self) -> None:
        pass


def demonstrations(model_dir: Path, episodes: int, slips: float) -> list[Demonstration]:
    """The agent's episodes on the first `episodes` train tasks, played by the demonstrator
    through the gateway: recorded exactly as the policy's would be."""
    tokenizer = load_tokenizer(model_dir)
    renderer = ChatRenderer(tokenizer)
    runtime = Runtime()

    async def play() -> list[Any]:
        gateway = Gateway(Demonstrator(tokenizer, renderer, slips, 0), renderer, tokenizer)
        await gateway.start()
        pool = runtime.pool_for(ARITHMETIC)
        env = await pool.acquire()
        draws = env.unwrapped.task_source().head("train", episodes)
        pool.release(env)
        collector = HarnessCollector(
            gateway, CallableHarness(load_callable(AGENT, "agent")), result_check("env"),
            SessionSettings(SamplingParams(max_tokens=64), max_calls=4), runtime.pool_for,
        )  # fmt: skip
        groups = await collector.collect([GroupRequest(ARITHMETIC, d, 1) for d in draws])
        await gateway.aclose()
        return [t for g in groups for t in g.trajectories]

    try:
        played = runtime.run(play())
    finally:
        runtime.close()
    masked = [t for t in played if t.masked]
    if masked:
        raise SystemExit(f"{len(masked)} demonstrations failed: {masked[0].infra_error}")
    solved = sum(t.success for t in played) / len(played)
    print(f"{len(played)} demonstrations, {solved:.0%} solved (the demonstrator slips)")
    return [Demonstration(t, [True] * len(t.steps)) for t in played]


def warm_start(
    out: Path, episodes: int, epochs: int, slips: float, base: Path | None = None
) -> Path:
    """SFT on the demonstrations, from `base` (default: a tiny model pretrained here, as the
    test suite's shared base is: its copy circuit is what reading a question needs)."""
    if base is None:
        base = out / "base"
        subprocess.run([sys.executable, "-m", "toolgym", "model", "pretrain", "--out", str(base),
                        "--size", "tiny", "--steps", "700", "--copy-warmup-steps", "300",
                        "--probes", "100"], check=True)  # fmt: skip
    demos = demonstrations(base, episodes, slips)
    model, tokenizer = load_model(base), load_tokenizer(base)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    losses = sft(model, demos, pad, SFTConfig(epochs=epochs, lr=3e-3, batch_size=8))
    print("SFT loss by epoch:", ", ".join(f"{x:.3f}" for x in losses))
    model.save_pretrained(out / "sft")
    tokenizer.save_pretrained(out / "sft")
    return out / "sft"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--demos", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--slips", type=float, default=0.5)
    parser.add_argument("--eval-episodes", type=int, default=200)
    parser.add_argument("--sft", type=Path, help="a warm start already made (skips SFT)")
    parser.add_argument("--set", nargs="*", default=[], help="more config overrides")
    parser.add_argument("--base", type=Path, help="the model SFT starts from (default: "
                        "pretrain a tiny one, about four minutes)")  # fmt: skip
    args = parser.parse_args()
    start = args.sft or warm_start(args.out, args.demos, args.epochs, args.slips, args.base)
    held_out = HeldOut("grpo")
    for seed in args.seeds:
        config = load_config(TrainConfig, CONFIG, [
            f"model={start}", f"run_dir={args.out / f'rl_seed{seed}'}", f"seed={seed}",
            f"steps={args.steps}", f"harness.agent={AGENT}", f"env.kwargs={ENV_ARGS}",
            f"eval.episodes={args.eval_episodes}", f"eval.every_steps={args.steps}",
            "eval.at_start=true", "eval.temperature=1.0", *args.set,
        ])  # fmt: skip
        held_out.train("grpo", config)
        print(f"seed {seed}: start {held_out.start[-1]['eval/success']:.1%}, "
              f"end {held_out.finals['grpo'][-1]['eval/success']:.1%}", flush=True)  # fmt: skip
    print(held_out.report())


if __name__ == "__main__":
    sys.exit(main())
