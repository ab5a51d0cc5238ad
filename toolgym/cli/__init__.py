"""The `toolgym` command. Each sub-command lives in its own module and imports the layers it
needs only when it runs, so `toolgym --version` stays instant."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from toolgym.version import __version__

EnvArgs = Annotated[list[str] | None, typer.Option(help="Env argument name=value (repeatable).")]
Plays = Annotated[
    int,
    typer.Option(
        min=1,
        max=64,
        help="Episodes of each task (with --temperature above 0): the success interval stays "
        "one over tasks, narrowed only by what the repeats add.",
    ),
]
ToolSchemas = Annotated[
    bool | None,
    typer.Option(
        "--tool-schemas/--no-tool-schemas",
        help="Render tool JSON schemas into prompts (default: as the model was fine-tuned by "
        "`toolgym sft`, else yes).",
    ),
]

app = typer.Typer(
    name="toolgym",
    help="Tool environments and step-level RL for tool-using LLM agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # help texts are plain: an extra such as 'toolgym[dist]' is text, not a markup tag
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"toolgym {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
    log_level: Annotated[
        str,
        typer.Option(
            envvar="TOOLGYM_LOG",
            help="Which of toolgym's log records to show: DEBUG, INFO, WARNING or ERROR.",
        ),
    ] = "INFO",
) -> None:
    """Tool environments and step-level RL for tool-using LLM agents."""
    from toolgym.log import setup_logging

    setup_logging(log_level)


@app.command("list")
def list_envs(
    filter: Annotated[
        str | None,
        typer.Option(
            "--filter", "-f", help="Only ids or descriptions holding this text (any case)."
        ),
    ] = None,
) -> None:
    """List the registered environments (a table on a terminal, one per line off one)."""
    from toolgym.cli.envs import list_command

    raise typer.Exit(list_command(filter))


@app.command("check")
def check(
    env_id: Annotated[
        str, typer.Argument(help="Env id, e.g. toolgym/Maze-v0 or mypkg.envs:my/Env-v0")
    ],
    seed: Annotated[int, typer.Option(help="Seed of the first checked episode.")] = 0,
    env_arg: EnvArgs = None,
) -> None:
    """Check that an environment honours the toolgym Env contract."""
    from toolgym.cli.envs import check_command
    from toolgym.cli.train import env_kwargs

    raise typer.Exit(check_command(env_id, seed, env_kwargs(env_arg or [])))


@app.command("doctor")
def doctor(
    overrides: Annotated[
        list[str] | None, typer.Argument(help="section.field=value overrides of --config.")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(help="A training config: exit 1 only if it needs what is missing here."),
    ] = None,
) -> None:
    """What this machine can run: sandboxes, Chromium, PostgreSQL, Ray, a GPU, vLLM, disk."""
    from toolgym.cli.doctor import doctor_command

    raise typer.Exit(doctor_command(config, overrides or []))


@app.command("init-env")
def init_env(
    name: Annotated[str, typer.Argument(help="The package name, e.g. word_games.")],
    out: Annotated[
        Path | None, typer.Option(help="Folder to write (default: ./NAME); must be new or empty.")
    ] = None,
    mcp: Annotated[
        bool,
        typer.Option(
            "--mcp",
            help="Serve the env's peek tool from an MCP server in the package "
            "(the installed MCP SDK's MCPServer), reached through MCPTools.",
        ),
    ] = False,
) -> None:
    """Write a new environment package (env, tasks, config, entry point, test) that installs
    as is."""
    from toolgym.cli.init_env import init_env_command

    raise typer.Exit(init_env_command(name, out, mcp))


@app.command("play")
def play(
    env_id: Annotated[str, typer.Argument(help="Env id, e.g. toolgym/Maze-v0")],
    seed: Annotated[
        int, typer.Option(help="Episode seed (the same seed gives the same task).")
    ] = 0,
    screenshot: Annotated[
        Path | None,
        typer.Option(help="Browser envs: keep a PNG of the page here, redrawn after every turn."),
    ] = None,
    env_arg: EnvArgs = None,
) -> None:
    """Play an episode in the terminal by typing tool calls."""
    from toolgym.cli.play import play_command
    from toolgym.cli.train import env_kwargs

    raise typer.Exit(play_command(env_id, seed, screenshot, env_kwargs(env_arg or [])))


@app.command("quickstart")
def quickstart(
    out: Annotated[
        Path, typer.Option(help="Folder for the models, the run and the curves.")
    ] = Path("runs/quickstart"),
    steps: Annotated[int, typer.Option(help="GiGPO steps.")] = 40,
    seed: Annotated[int, typer.Option(help="Seeds the model, the data and the sampling.")] = 0,
    engine: Annotated[
        str,
        typer.Option(
            help="hf, or vllm (vLLM's CPU build after `make vllm`; the model is then the mini "
            "size, the smallest whose attention heads vLLM's CPU kernels run)."
        ),
    ] = "hf",
    size: Annotated[
        str | None,
        typer.Option(help="The model's size (default: tiny on hf, mini on vllm)."),
    ] = None,
) -> None:
    """The main job: a tiny model trains on Maze on CPU (SFT, then GiGPO), scored on held-out mazes."""
    from toolgym.cli.quickstart import quickstart_command

    raise typer.Exit(quickstart_command(out, steps, seed, engine, size))


model_app = typer.Typer(help="Make models.", no_args_is_help=True)
serve_app = typer.Typer(help="Serve models and tools over HTTP.", no_args_is_help=True)
rollouts_app = typer.Typer(help="Inspect recorded trajectories.", no_args_is_help=True)
index_app = typer.Typer(help="Build search indexes.", no_args_is_help=True)
search_app = typer.Typer(
    help="A corpus to try search on, and simulated search engines.", no_args_is_help=True
)
sandbox_app = typer.Typer(help="Code sandboxes: build the image, run code.", no_args_is_help=True)
sql_app = typer.Typer(
    help="SQL databases: generate them, serve them from a throwaway PostgreSQL.",
    no_args_is_help=True,
)
app.add_typer(model_app, name="model")
app.add_typer(serve_app, name="serve")
app.add_typer(rollouts_app, name="rollouts")
app.add_typer(index_app, name="index")
app.add_typer(search_app, name="search")
app.add_typer(sandbox_app, name="sandbox")
textworld_app = typer.Typer(
    help="Text adventure games: generate them from specs or settings.", no_args_is_help=True
)
app.add_typer(sql_app, name="sql")
app.add_typer(textworld_app, name="textworld")


@model_app.command("init")
def model_init(
    out: Annotated[Path, typer.Option(help="Directory to write the model to.")],
    arch: Annotated[
        str, typer.Option(help="qwen2, llama or qwen2_vl (vision-language).")
    ] = "qwen2",
    size: Annotated[
        str, typer.Option(help="tiny (0.16M parameters), mini (0.9M) or small (4.2M).")
    ] = "tiny",
    seed: Annotated[int, typer.Option(help="Weight initialisation seed.")] = 0,
) -> None:
    """Build a small causal LM with a locally trained tokenizer (no downloads)."""
    from toolgym.cli.models import init_command

    raise typer.Exit(init_command(arch, size, out, seed))


@model_app.command("pretrain")
def model_pretrain(
    out: Annotated[Path, typer.Option(help="Directory to write the model to.")],
    size: Annotated[str, typer.Option(help="tiny, mini or small.")] = "tiny",
    arch: Annotated[
        str, typer.Option(help="qwen2, llama or qwen2_vl (vision-language).")
    ] = "qwen2",
    steps: Annotated[int, typer.Option(help="Optimizer steps, the copy warm-up included.")] = 1400,
    seq_len: Annotated[int, typer.Option(help="Tokens per training sequence.")] = 640,
    batch_size: Annotated[int, typer.Option(help="Sequences per step.")] = 8,
    lr: Annotated[
        float | None,
        typer.Option(
            help="Peak AdamW learning rate (by size if unset: tiny 3e-3, mini 1e-3, small 5e-4)."
        ),
    ] = None,
    copy_warmup_steps: Annotated[
        int, typer.Option(help="First steps on periodic random rows, so copying forms first.")
    ] = 400,
    periodic_share: Annotated[
        float,
        typer.Option(help="Share of periodic rows after the warm-up; the rest is corpus text."),
    ] = 1.0,
    seed: Annotated[int, typer.Option(help="Seeds the corpus, tokenizer and weights.")] = 0,
    env: Annotated[
        list[str] | None,
        typer.Option(help="Mix this env's scripted transcripts into the corpus (repeatable)."),
    ] = None,
    env_arg: EnvArgs = None,
    probes: Annotated[
        int, typer.Option(help="Probe contexts per kind and distance after training (0: none).")
    ] = 100,
) -> None:
    """Pretrain a built-in size on CPU on generated text that teaches copying and tool calls."""
    from toolgym.cli.models import pretrain_command
    from toolgym.cli.train import env_kwargs
    from toolgym.training.supervised.pretrain import PretrainConfig

    kwargs = env_kwargs(env_arg or [])
    config = PretrainConfig(
        size=size, arch=arch, steps=steps, seq_len=seq_len, batch_size=batch_size, lr=lr,
        copy_warmup_steps=copy_warmup_steps, periodic_share=periodic_share, seed=seed, envs=list(env or []), env_kwargs={e: kwargs for e in env or []},
    )  # fmt: skip
    raise typer.Exit(pretrain_command(out, config, [100, 250, 500], probes))


@model_app.command("probe")
def model_probe(
    model_dir: Annotated[Path, typer.Argument(help="Model directory.")],
    n: Annotated[int, typer.Option("-n", help="Contexts per kind and distance.")] = 100,
    distance: Annotated[
        list[int] | None, typer.Option(help="Tokens back (repeatable; default 100, 250, 500).")
    ] = None,
) -> None:
    """Measure copying and key-value recall at several distances back in the context."""
    from toolgym.cli.models import probe_command

    raise typer.Exit(probe_command(model_dir, distance or [100, 250, 500], n))


@serve_app.command("model")
def serve_model(
    model_dir: Annotated[
        Path, typer.Argument(help="A model directory (e.g. from `toolgym model init`).")
    ],
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    served_model_name: Annotated[
        str | None, typer.Option(help="Model name clients use (default: the path as given).")
    ] = None,
    max_body_mb: Annotated[int, typer.Option(help="Largest request body, in MiB.")] = 16,
    max_choices: Annotated[
        int, typer.Option(help="Most completions one request may ask for (prompts x n).")
    ] = 256,
    threads: Annotated[
        int,
        typer.Option(
            min=0, help="Threads for the model's compute (0: this process's share of the host)."
        ),
    ] = 0,
) -> None:
    """Serve a model over an OpenAI-compatible API (completions, chat, LoRA routes)."""
    from toolgym.cli.models import serve_command

    raise typer.Exit(
        serve_command(model_dir, host, port, served_model_name, max_body_mb, max_choices, threads)
    )


@app.command("eval")
def evaluate(
    env_id: Annotated[str, typer.Argument(help="Env id, e.g. toolgym/Maze-v0")],
    model: Annotated[str, typer.Option(help="Model directory (hf) or served model name (openai).")],
    engine: Annotated[str, typer.Option(help="hf, openai or vllm.")] = "hf",
    base_url: Annotated[str | None, typer.Option(help="Server URL for --engine openai.")] = None,
    tokenizer: Annotated[
        str | None, typer.Option(help="Tokenizer to render prompts with (default: --model).")
    ] = None,
    n: Annotated[int, typer.Option("-n", min=1, help="Tasks: the first n tasks of --split.")] = 50,
    plays: Plays = 1,
    seed: Annotated[int, typer.Option(min=0, help="Seeds the sampling.")] = 0,
    split: Annotated[
        str, typer.Option(help="Task split to play: eval (held out from training), train, test.")
    ] = "eval",
    max_tokens: Annotated[int, typer.Option(min=1, help="Tokens per model turn.")] = 256,
    temperature: Annotated[
        float,
        typer.Option(
            min=0.0,
            help="Sampling temperature: 0 is greedy, as the evaluation inside a training run "
            "(eval.temperature); 1 samples as training rollouts do.",
        ),
    ] = 0.0,
    max_turns: Annotated[
        int | None, typer.Option(min=1, help="Turn limit (default: the env's).")
    ] = None,
    max_context: Annotated[int, typer.Option(min=16, help="Token budget per episode.")] = 4096,
    concurrency: Annotated[int, typer.Option(min=1, help="Episodes at once.")] = 32,
    out: Annotated[
        Path | None, typer.Option(help="Trajectories JSONL (default runs/eval-ENV.jsonl).")
    ] = None,
    env_arg: EnvArgs = None,
    tool_schemas: ToolSchemas = None,
) -> None:
    """Evaluate a policy on an env: success, turns, tool-call validity, tokens."""
    from toolgym.cli.evaluate import eval_command

    raise typer.Exit(
        eval_command(
            env_id,
            engine,
            model,
            base_url,
            tokenizer,
            n,
            seed,
            max_tokens,
            temperature,
            max_turns,
            max_context,
            concurrency,
            out,
            env_arg or [],
            tool_schemas,
            split,
            plays,
        )
    )


@app.command("compare")
def compare(
    before: Annotated[
        Path, typer.Argument(help="Trajectories JSONL of one policy (toolgym eval --out).")
    ],
    after: Annotated[
        Path, typer.Argument(help="Trajectories JSONL of the other, on the same items.")
    ],
) -> None:
    """Paired difference in success between two evaluations, on the items both played."""
    from toolgym.cli.compare import compare_command

    raise typer.Exit(compare_command(before, after))


@app.command("sft")
def supervised(
    env_id: Annotated[str, typer.Argument(help="Env id whose scripted solver demonstrates.")],
    model: Annotated[Path, typer.Option(help="Model directory to start from.")],
    out: Annotated[Path, typer.Option(help="Where to save the fine-tuned model.")],
    episodes: Annotated[int, typer.Option(min=1, help="Demonstration episodes.")] = 200,
    epochs: Annotated[int, typer.Option(min=1, help="Passes over the demonstrations.")] = 3,
    lr: Annotated[float, typer.Option(help="AdamW learning rate.")] = 1e-3,
    batch_size: Annotated[int, typer.Option(min=1, help="Sequences per optimizer step.")] = 16,
    seed: Annotated[
        int, typer.Option(help="First training task demonstrated; also seeds the SFT.")
    ] = 0,
    env_arg: EnvArgs = None,
    tool_schemas: ToolSchemas = None,
    mistakes: Annotated[
        float,
        typer.Option(
            help="Share of turns that play the env's mistake_action instead of the solver's "
            "(kept in context, not imitated), so the model learns to recover from errors."
        ),
    ] = 0.0,
    with_env: Annotated[
        list[str] | None,
        typer.Option(
            help="Another env whose demonstrations are mixed in, as many episodes, with the "
            "same env args (repeatable): a self-play proposer beside its solver."
        ),
    ] = None,
) -> None:
    """Supervised warm start on an env's scripted demonstrations (learn the tool-call format)."""
    from toolgym.cli.train import sft_command

    code = sft_command(
        env_id, model, out, episodes, epochs, lr, batch_size, seed, env_arg or [], tool_schemas,
        mistakes, with_env or [],
    )  # fmt: skip
    raise typer.Exit(code)


@app.command("train")
def train(
    overrides: Annotated[
        list[str] | None, typer.Argument(help="section.field=value overrides, e.g. optim.lr=1e-5")
    ] = None,
    config: Annotated[Path | None, typer.Option(help="YAML config file.")] = None,
    resume: Annotated[
        Path | None, typer.Option(help="Continue the run in this directory from its checkpoint.")
    ] = None,
    overwrite: Annotated[
        bool, typer.Option(help="Start over in a run directory that holds a run (deletes it).")
    ] = False,
    ray_address: Annotated[
        str | None,
        typer.Option(
            help="Run the env pools (and ray.engine_actors) as Ray actors on this cluster: auto, "
            "HOST:PORT or local "
            "(sets ray.address; needs pip install 'toolgym[dist]')."
        ),
    ] = None,
) -> None:
    """Train a policy with GRPO / RLOO / GiGPO on an env (see training/config.py)."""
    from toolgym.cli.train import train_command

    given = [*(overrides or []), *([f"ray.address={ray_address}"] if ray_address else [])]
    raise typer.Exit(train_command(config, given, resume, overwrite, ray_address))


@app.command("plot")
def plot(
    run_dirs: Annotated[
        list[Path], typer.Argument(help="Run directories (each with metrics.jsonl).")
    ],
    out: Annotated[Path, typer.Option(help="PNG to write.")] = Path("curves.png"),
    metric: Annotated[list[str] | None, typer.Option(help="Metric to draw (repeatable).")] = None,
    x: Annotated[str, typer.Option(help="x axis: env_steps (cumulative) or step.")] = "env_steps",
) -> None:
    """Draw learning curves of runs side by side as a PNG."""
    from toolgym.cli.show import console
    from toolgym.training.run.plot import DEFAULT_METRICS, plot_runs

    path = plot_runs(run_dirs, out, metric or DEFAULT_METRICS, x)
    console.print(f"wrote {path}")


@rollouts_app.command("show")
def rollouts_show(
    path: Annotated[
        Path, typer.Argument(help="A trajectories JSONL file, or a training run's directory.")
    ],
    index: Annotated[
        int, typer.Option(help="Which trajectory (0-based; negative counts from the end).")
    ] = 0,
    step: Annotated[
        int | None,
        typer.Option(help="A run directory's step to show (default: its last kept step)."),
    ] = None,
) -> None:
    """Pretty-print one trajectory with coloured roles."""
    from toolgym.cli.rollouts import show_command

    raise typer.Exit(show_command(path, index, step))


@app.command("view")
def view(
    runs: Annotated[list[Path], typer.Argument(help="Training run directories to view.")],
    host: Annotated[
        str, typer.Option(help="Address to serve on; anything but loopback exposes the runs.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to serve on.")] = 8765,
    open_browser: Annotated[
        bool, typer.Option("--open/--no-open", help="Open the page in a browser.")
    ] = True,
) -> None:
    """See runs in a local web app: curves, each step's episodes, each turn's credit."""
    from toolgym.cli.view import view_command

    raise typer.Exit(view_command(runs, host, port, open_browser))


@rollouts_app.command("rescore")
def rollouts_rescore(
    path: Annotated[
        Path, typer.Argument(help="A trajectories JSONL file, or a training run's directory.")
    ],
    reward: Annotated[
        str,
        typer.Option(
            help="'replay' (the env's own check: each episode's actions replayed in a fresh "
            "env) or a reward source: format, length, function, ..."
        ),
    ],
    reward_arg: Annotated[
        list[str] | None,
        typer.Option(help="The reward source's argument as name=value (repeatable)."),
    ] = None,
    env_arg: Annotated[
        list[str] | None,
        typer.Option(help="For replay: an env argument as name=value, over the run's own."),
    ] = None,
    step: Annotated[
        int | None, typer.Option(help="A run directory's step (default: every kept step).")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Write each episode's scores (JSONL).")] = None,
) -> None:
    """Score stored episodes again and report how far the new score agrees with the stored."""
    from toolgym.cli.rollouts import rescore_command

    raise typer.Exit(rescore_command(path, reward, reward_arg or [], env_arg or [], step, out))


@rollouts_app.command("export")
def rollouts_export(
    path: Annotated[
        Path, typer.Argument(help="A trajectories JSONL file, or a training run's directory.")
    ],
    out: Annotated[Path, typer.Option(help="The Parquet file to write.")],
    step: Annotated[
        int | None, typer.Option(help="A run directory's step (default: every kept step).")
    ] = None,
) -> None:
    """Write stored episodes as a Parquet table, a row per episode."""
    from toolgym.cli.rollouts import export_command

    raise typer.Exit(export_command(path, out, step))


@rollouts_app.command("schema")
def rollouts_schema() -> None:
    """Print the rollout schema (a line of a trajectories file) as JSON Schema."""
    from toolgym.cli.rollouts import schema_command

    raise typer.Exit(schema_command())


@index_app.command("build")
def index_build(
    corpus: Annotated[Path, typer.Option(help='JSONL corpus, one {"id", "contents"} a line.')],
    out: Annotated[Path, typer.Option(help="Index directory to write.")],
    kind: Annotated[str, typer.Option(help="bm25, dense or hybrid (both, fused by RRF).")] = "bm25",
    faiss: Annotated[str, typer.Option(help="Dense index: flat, hnsw or ivfpq.")] = "flat",
    encoder: Annotated[
        str | None, typer.Option(help="Local sentence-transformers model directory.")
    ] = None,
    e5: Annotated[bool, typer.Option(help="Prefix 'query: ' / 'passage: ' (E5 models).")] = False,
    force: Annotated[bool, typer.Option(help="Replace OUT if it is not empty.")] = False,
) -> None:
    """Index a corpus for `toolgym serve search` and the search envs."""
    from toolgym.cli.search import index_command

    raise typer.Exit(index_command(corpus, out, kind, faiss, encoder, e5, force))


@serve_app.command("mcp")
def serve_mcp(
    env_id: Annotated[str, typer.Argument(help="A tool env's id, e.g. toolgym/SQL-v0.")],
    transport: Annotated[
        str, typer.Option(help="stdio (a client starts this command) or http (at /mcp).")
    ] = "stdio",
    port: Annotated[int, typer.Option(help="Port to listen on (http).")] = 8000,
    host: Annotated[str, typer.Option(help="Address to bind (http).")] = "127.0.0.1",
    seed: Annotated[
        int, typer.Option(min=0, help="Each session plays train task SEED of the env.")
    ] = 0,
    task: Annotated[
        str | None, typer.Option(help="A task to play instead, as JSON (the env's fields).")
    ] = None,
    max_sessions: Annotated[
        int, typer.Option(min=1, help="Most client sessions (envs) alive at once (http).")
    ] = 32,
    idle_timeout: Annotated[
        float,
        typer.Option(min=0, help="Close an http session idle this many seconds (0: never)."),
    ] = 600.0,
    episode_per_call: Annotated[
        bool,
        typer.Option(
            help="Play each call as an episode of its own, sessions or not: tools "
            "used as plain tools by many episodes (toolgym's calculator for MCP-v0)."
        ),
    ] = False,
    env_arg: EnvArgs = None,
) -> None:
    """Serve an env's tools as an MCP server, one episode per client session."""
    from toolgym.cli.mcp import serve_mcp_command
    from toolgym.cli.train import env_kwargs

    kwargs = env_kwargs(env_arg or [])
    raise typer.Exit(
        serve_mcp_command(
            env_id,
            kwargs,
            transport,
            host,
            port,
            seed,
            task,
            max_sessions,
            idle_timeout,
            episode_per_call,
        )
    )


@serve_app.command("env")
def serve_env(
    env_id: Annotated[str, typer.Argument(help="An env's id, e.g. toolgym/Arithmetic-v0.")],
    protocol: Annotated[str, typer.Option(help="The protocol to serve: openenv.")] = "openenv",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    max_sessions: Annotated[
        int, typer.Option(min=1, help="Most client sessions (envs) alive at once.")
    ] = 32,
    idle_timeout: Annotated[
        float, typer.Option(min=0, help="Close a session idle this many seconds (0: never).")
    ] = 600.0,
    allow_client_tasks: Annotated[
        bool,
        typer.Option(
            help="Let a client reset to a task of its own (checked by the env: plain data, "
            "never code, a file or a loopback address); by default clients play the env's "
            "own tasks by seed and split."
        ),
    ] = False,
    env_arg: EnvArgs = None,
) -> None:
    """Serve an env to another stack's clients (OpenEnv's), one env per session."""
    from toolgym.cli.openenv import serve_env_command
    from toolgym.cli.train import env_kwargs

    kwargs = env_kwargs(env_arg or [])
    raise typer.Exit(
        serve_env_command(
            env_id, kwargs, protocol, host, port, max_sessions, idle_timeout, allow_client_tasks
        )
    )


@serve_app.command("search")
def serve_search(
    index: Annotated[
        Path | None, typer.Option(help="Index directory from `toolgym index build`.")
    ] = None,
    simulator: Annotated[
        str | None,
        typer.Option(help="Model directory that writes the documents (a simulated engine)."),
    ] = None,
    simulator_url: Annotated[
        str | None,
        typer.Option(help="OpenAI-compatible server that writes the documents (e.g. vLLM)."),
    ] = None,
    simulator_model: Annotated[
        str | None, typer.Option(help="The model name to ask --simulator-url for.")
    ] = None,
    simulator_engine: Annotated[
        str,
        typer.Option(help="The engine --simulator writes with: hf, or vllm (`make vllm`)."),
    ] = "hf",
    noise: Annotated[
        tuple[float, float, float],
        typer.Option(help="Noise schedule p_start p_end base, read at a request's step."),
    ] = (0.0, 0.5, 4.0),
    total_steps: Annotated[
        int, typer.Option(help="Training steps the schedule spans, when a request gives none.")
    ] = 1,
    doc_tokens: Annotated[int, typer.Option(help="Most tokens per written document.")] = 96,
    temperature: Annotated[float, typer.Option(help="Sampling temperature of the writer.")] = 1.0,
    cache: Annotated[int, typer.Option(help="Seeded documents kept in memory.")] = 4096,
    max_documents: Annotated[
        int, typer.Option(help="Most documents one request may ask to be written (queries x topk).")
    ] = 8192,
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    topk: Annotated[int, typer.Option(help="Results per query when a request gives none.")] = 3,
    max_topk: Annotated[int, typer.Option(help="Largest topk a request may ask for.")] = 100,
    max_queries: Annotated[
        int, typer.Option(help="Most queries in one request (Search-R1 sends a whole batch's).")
    ] = 16384,
    max_body_mb: Annotated[int, typer.Option(help="Largest request body, in MiB.")] = 64,
    threads: Annotated[
        int,
        typer.Option(
            min=0,
            help="Threads for the encoder or writer model (0: this process's share of the host).",
        ),
    ] = 0,
) -> None:
    """Serve an index, or a model that writes the results, over Search-R1's retriever API
    (POST /retrieve, GET /health)."""
    from toolgym.cli.search import Simulator, serve_command

    sim = Simulator(simulator, simulator_url, simulator_model, noise, total_steps, doc_tokens,
                    temperature, cache, max_documents, simulator_engine)  # fmt: skip
    raise typer.Exit(
        serve_command(index, sim, host, port, topk, max_topk, max_queries, max_body_mb, threads)
    )


@serve_app.command("sandbox")
def serve_sandbox(
    backend: Annotated[
        str, typer.Option(help="bubblewrap, docker (or local: unisolated).")
    ] = "bubblewrap",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    pool_size: Annotated[int, typer.Option(help="Sandboxes kept warm.")] = 4,
    concurrency: Annotated[
        int | None, typer.Option(help="Runs at once (default: the pool size).")
    ] = None,
    max_timeout: Annotated[
        float, typer.Option(help="Largest run_timeout honoured, in seconds (more is cut to it).")
    ] = 30.0,
    memory_mb: Annotated[int, typer.Option(help="Memory limit of a run, in MiB.")] = 1024,
    max_body_mb: Annotated[int, typer.Option(help="Largest request body, in MiB.")] = 32,
) -> None:
    """Serve a warm sandbox pool over SandboxFusion's API (POST /run_code, GET /health)."""
    from toolgym.cli.sandbox import serve_command

    raise typer.Exit(serve_command(backend, host, port, pool_size, concurrency, max_timeout,
                                   memory_mb, max_body_mb))  # fmt: skip


@sandbox_app.command("build-image")
def sandbox_build_image(
    tag: Annotated[str, typer.Option(help="Image name to build.")] = "toolgym-sandbox:latest",
    suite: Annotated[
        str | None, typer.Option(help="Debian release for debootstrap (default: this host's).")
    ] = None,
    mirror: Annotated[str | None, typer.Option(help="Debian mirror for debootstrap.")] = None,
    base: Annotated[
        str | None,
        typer.Option(help="Build FROM this image instead (where a registry is reachable)."),
    ] = None,
) -> None:
    """Build the Docker backend's image locally (debootstrap + docker import; needs root)."""
    from toolgym.cli.sandbox import build_image_command

    raise typer.Exit(build_image_command(tag, suite, mirror, base))


@sandbox_app.command("run")
def sandbox_run(
    code: Annotated[str | None, typer.Argument(help="The code to run.")] = None,
    file: Annotated[Path | None, typer.Option(help="Run this file instead.")] = None,
    language: Annotated[str, typer.Option(help="python or bash.")] = "python",
    backend: Annotated[str, typer.Option(help="bubblewrap, docker or local.")] = "bubblewrap",
    timeout: Annotated[float, typer.Option(help="Wall-clock limit, in seconds.")] = 10.0,
    memory_mb: Annotated[int, typer.Option(help="Memory limit, in MiB.")] = 1024,
    stdin: Annotated[bool, typer.Option(help="Pass this command's stdin to the code.")] = False,
) -> None:
    """Run code once in a sandbox and exit with its exit code."""
    from toolgym.cli.sandbox import run_command

    raise typer.Exit(run_command(code, file, language, backend, timeout, memory_mb, stdin))


@sql_app.command("serve-postgres")
def sql_serve_postgres(
    dir: Annotated[
        Path, typer.Option("--dir", help="Folder for the server's data (made if missing).")
    ],
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1.")] = 5432,
    databases: Annotated[
        str | None,
        typer.Option(
            help="Generated database ids, comma-separated (e.g. shop_0,clinic_1; shop_wide_0 "
            "names made-up values)."
        ),
    ] = None,
    per_domain: Annotated[
        int, typer.Option(min=1, help="Without --databases: databases per domain.")
    ] = 2,
    detach: Annotated[bool, typer.Option(help="Leave the server running and return.")] = False,
) -> None:
    """Start a throwaway PostgreSQL on loopback with the generated databases and a read-only role."""
    from toolgym.cli.sql import serve_postgres_command

    raise typer.Exit(serve_postgres_command(dir, port, databases, per_domain, detach))


@sql_app.command("stop-postgres")
def sql_stop_postgres(
    dir: Annotated[Path, typer.Option("--dir", help="The folder given to serve-postgres.")],
) -> None:
    """Stop a server started with serve-postgres --detach."""
    from toolgym.cli.sql import stop_postgres_command

    raise typer.Exit(stop_postgres_command(dir))


@sql_app.command("generate")
def sql_generate(
    out: Annotated[Path, typer.Option(help="Folder for databases/ and questions.jsonl.")],
    questions: Annotated[int, typer.Option(help="Questions to write.")] = 100,
    databases: Annotated[
        str | None,
        typer.Option(
            help="Generated database ids, comma-separated (shop_wide_0 names made-up values)."
        ),
    ] = None,
    per_domain: Annotated[
        int, typer.Option(min=1, help="Without --databases: databases per domain.")
    ] = 2,
    templates: Annotated[
        str | None, typer.Option(help="Question templates, comma-separated (default: all).")
    ] = None,
) -> None:
    """Write the generated databases (SQLite) and questions (Spider-shaped JSONL)."""
    from toolgym.cli.sql import generate_command

    raise typer.Exit(generate_command(out, questions, databases, per_domain, templates))


TEXTWORLD_MAX_JOBS = 64
"""Game workers `textworld generate` runs at most: each is a forked game process of ~70 MB."""


@textworld_app.command("generate")
def textworld_generate(
    out: Annotated[Path, typer.Option(help="Folder for the games (.z8, .json) and tasks.jsonl.")],
    specs: Annotated[
        Path | None,
        typer.Option("--from", help="Game specs, one JSON object a line (docs: text games)."),
    ] = None,
    game: Annotated[
        str | None,
        typer.Option(help='Generation settings as JSON, e.g. \'{"family": "cooking", "go": 6}\'.'),
    ] = None,
    count: Annotated[int, typer.Option(help="With --game: how many games (seeds).")] = 10,
    first_seed: Annotated[int, typer.Option(help="With --game: the first seed.")] = 0,
    eval_count: Annotated[
        int, typer.Option("--eval", help="With --game: the last N games form the eval split.")
    ] = 0,
    jobs: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=TEXTWORLD_MAX_JOBS,
            help=f"With --game: games made at once (default: the CPUs, at most {TEXTWORLD_MAX_JOBS}).",
        ),
    ] = None,
) -> None:
    """Compile games into a folder with a tasks.jsonl for the env's tasks= setting."""
    from toolgym.cli.textworld import generate_command

    workers = jobs or min(os.cpu_count() or 1, TEXTWORLD_MAX_JOBS)
    raise typer.Exit(generate_command(out, specs, game, count, first_seed, eval_count, workers))


@search_app.command("world")
def search_world(
    corpus: Annotated[
        Path, typer.Option(help='JSONL corpus to write, one {"id", "contents"} a line.')
    ],
    questions: Annotated[
        Path | None,
        typer.Option(help='Also write questions, one {"question", "answers"} a line (tasks=).'),
    ] = None,
    seed: Annotated[int, typer.Option(help="Which synthetic world.")] = 0,
    size: Annotated[str, typer.Option(help="small, medium or large.")] = "small",
    n: Annotated[int, typer.Option("-n", min=1, help="Questions per hop count.")] = 200,
    hops: Annotated[
        list[int] | None, typer.Option(help="Hop counts to ask (repeatable; default 1 and 2).")
    ] = None,
) -> None:
    """Write the synthetic world's documents (a corpus to index) and questions about it."""
    from toolgym.cli.search import world_command

    raise typer.Exit(world_command(corpus, questions, seed, size, n, hops or [1, 2]))


@search_app.command("simulator-data")
def search_simulator_data(
    out: Annotated[Path, typer.Option(help="JSONL file to write the labelled results to.")],
    server_url: Annotated[
        str | None, typer.Option(help="A Search-R1 /retrieve server to play against.")
    ] = None,
    index: Annotated[Path | None, typer.Option(help="An index directory to play against.")] = None,
    world_seed: Annotated[int, typer.Option(help="The synthetic world the questions are on.")] = 0,
    world_size: Annotated[str, typer.Option(help="small, medium or large.")] = "small",
    questions: Annotated[int, typer.Option(help="Questions per hop count.")] = 200,
    hops: Annotated[
        list[int] | None, typer.Option(help="Hop counts to ask (repeatable; default 1 and 2).")
    ] = None,
    topk: Annotated[int, typer.Option(help="Real results kept per query.")] = 5,
) -> None:
    """Label a real engine's results for the world's questions: useful if it holds the answer."""
    from toolgym.cli.simulator import data_command

    raise typer.Exit(
        data_command(
            out, server_url, index, world_seed, world_size, questions, hops or [1, 2], topk
        )
    )


@search_app.command("simulator-sft")
def search_simulator_sft(
    data: Annotated[Path, typer.Option(help="Labelled results from `simulator-data`.")],
    model: Annotated[Path, typer.Option(help="Model directory to fine-tune.")],
    out: Annotated[Path, typer.Option(help="Directory to write the simulator to.")],
    epochs: Annotated[int, typer.Option(min=1, help="Passes over the documents.")] = 40,
    lr: Annotated[float, typer.Option(help="AdamW learning rate.")] = 1e-3,
    batch_size: Annotated[int, typer.Option(min=1, help="Documents per optimizer step.")] = 16,
    noisy_per_query: Annotated[
        int, typer.Option(help="Best-ranked noisy results kept per query.")
    ] = 1,
    seed: Annotated[int, typer.Option(help="Shuffling seed.")] = 0,
    samples: Annotated[
        int, typer.Option(help="Documents written per query and kind for the report (0: none).")
    ] = 2,
    doc_tokens: Annotated[int, typer.Option(help="Most tokens per document.")] = 128,
) -> None:
    """Fine-tune a model to write useful or noisy documents on demand (ZeroSearch)."""
    from toolgym.cli.simulator import sft_command

    raise typer.Exit(
        sft_command(
            data, model, out, epochs, lr, batch_size, noisy_per_query, seed, samples, doc_tokens
        )
    )


@search_app.command("simulator-report")
def search_simulator_report(
    data: Annotated[Path, typer.Option(help="Labelled results from `simulator-data`.")],
    simulator: Annotated[Path, typer.Option(help="Model directory that writes the documents.")],
    samples: Annotated[int, typer.Option(help="Documents written per query and kind.")] = 2,
    doc_tokens: Annotated[int, typer.Option(help="Most tokens per document.")] = 128,
) -> None:
    """How often a simulator's documents hold the answer, next to the real engine's."""
    from toolgym.cli.simulator import report_command

    raise typer.Exit(report_command(data, simulator, samples, doc_tokens))


def main() -> None:
    """Entry point: toolgym's own errors are one plain line on stderr, never a traceback."""
    from toolgym.cores import share_compute_threads
    from toolgym.errors import ToolgymError

    # Let `toolgym check my_envs:my/Env-v0` import my_envs.py from here, after every
    # installed package: a file of the user's named click.py or openai.py shadows nothing.
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    share_compute_threads()
    try:
        app()
    except ToolgymError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)
