"""Does an agent harness learn when trained through the gateway, from the documented commands
alone? The example agent on the plain `openai` client (examples/agents/arithmetic_openai.py:
its own calculator, its answer checked by the Arithmetic env's answer tool) is warm-started
with `toolgym warm-start` (the example teacher, examples/agents/arithmetic_teacher.py, behind
the gateway; the solved episodes imitated), then trained by configs/harness_arithmetic.yaml
with GRPO from that one warm start for 3 seeds; held-out success (Arithmetic's eval split,
questions training never draws, by content) at the start and the end of each run, with 95%
intervals.

    python bench/harness_learns.py --out /tmp/harness-learns [--seeds 0 1 2] [--steps 30]

`--agent` and `--teacher` run another agent (a function or, with `--command`, a command
line) and teacher through the same commands: a second framework's own warm start.
`--teacher bench/sloppy_teacher.py:reply --keep all` measures what RL itself adds, from a
warm start that is right about half the time (tests/test_harness_learns.py asserts it).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from common import HeldOut

from toolgym.config import load_config
from toolgym.training.config import TrainConfig

ROOT = Path(__file__).resolve().parents[1]
AGENT = f"{ROOT / 'examples' / 'agents' / 'arithmetic_openai.py'}:solve"
TEACHER = f"{ROOT / 'examples' / 'agents' / 'arithmetic_teacher.py'}:reply"
SLOPPY_TEACHER = f"{ROOT / 'bench' / 'sloppy_teacher.py'}:reply"
CONFIG = ROOT / "configs" / "harness_arithmetic.yaml"
ENV_ARGS = {"n_operands": 2}


def toolgym(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "toolgym", *args], check=True)


def agent_overrides(
    agent: str | None, command: list[str] | None, worker: bool = False
) -> list[str]:
    if command:
        return ["harness.agent=null", f"harness.command={command}", f"harness.worker={worker}"]
    return [f"harness.agent={agent or AGENT}"]


def warm_start(
    out: Path, episodes: int, base: Path | None = None, teacher: str = TEACHER,
    agent: Sequence[str] = (), keep: str = "solved",
) -> Path:  # fmt: skip
    """`toolgym warm-start` from `base` (default: a tiny model pretrained here by `toolgym model
    pretrain`, as the test suite's shared base is: its copy circuit is what reading a
    question needs)."""
    if base is None:
        base = out / "base"
        toolgym("model", "pretrain", "--out", str(base), "--size", "tiny", "--steps", "700",
                "--copy-warmup-steps", "300", "--probes", "100")  # fmt: skip
    agent = list(agent) or agent_overrides(None, None)
    toolgym("warm-start", "--config", str(CONFIG), f"model={base}", f"env.kwargs={ENV_ARGS}",
            *agent, "--teacher", teacher, "--episodes", str(episodes), "--keep", keep,
            "--out", str(out / "sft"))  # fmt: skip
    return out / "sft"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--demos", type=int, default=1000)
    parser.add_argument("--keep", choices=["solved", "all"], default="solved")
    parser.add_argument("--eval-episodes", type=int, default=200)
    parser.add_argument("--agent", help="the agent function (default: the openai example)")
    parser.add_argument("--command", nargs="+", help="or the agent as a command line")
    parser.add_argument("--worker", action="store_true", help="the command as long-lived workers")
    parser.add_argument("--teacher", default=TEACHER)
    parser.add_argument("--sft", type=Path, help="a warm start already made (skips it)")
    parser.add_argument("--set", nargs="*", default=[], help="more config overrides")
    parser.add_argument("--base", type=Path, help="the model the warm start fine-tunes "
                        "(default: pretrain a tiny one, about four minutes)")  # fmt: skip
    args = parser.parse_args()
    agent = agent_overrides(args.agent, args.command, args.worker)
    start = args.sft or warm_start(args.out, args.demos, args.base, args.teacher, agent, args.keep)
    held_out = HeldOut("grpo")
    for seed in args.seeds:
        config = load_config(TrainConfig, CONFIG, [
            f"model={start}", f"run_dir={args.out / f'rl_seed{seed}'}", f"seed={seed}",
            f"steps={args.steps}", *agent, f"env.kwargs={ENV_ARGS}",
            f"eval.episodes={args.eval_episodes}", f"eval.every_steps={args.steps}",
            "eval.at_start=true", "eval.temperature=1.0", *args.set,
        ])  # fmt: skip
        held_out.train("grpo", config)
        print(f"seed {seed}: start {held_out.start[-1]['eval/success']:.1%}, "
              f"end {held_out.finals['grpo'][-1]['eval/success']:.1%}", flush=True)  # fmt: skip
    print(held_out.report())


if __name__ == "__main__":
    sys.exit(main())
