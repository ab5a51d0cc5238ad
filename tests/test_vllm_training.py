"""The trainer generating with vLLM (engine.kind=vllm, vLLM's CPU build here): GiGPO on Maze
with full-weight syncs, an asynchronous run with partial rollouts, a LoRA run, and the
gateway in front of vLLM. Token fidelity is what proves each sync landed: in float32 the
engine's log-probabilities of its own samples match the learner's to rounding at every step,
and a run whose syncs are dropped is measured far off."""

from __future__ import annotations

import pytest
from test_gateway import Recorded, play_a_tool_using_session
from test_search_server import post
from transformers import AutoTokenizer

from conftest import LoopThread, built_once, serve, teach_tool_call
from toolgym.agents.engines import make_engine
from toolgym.agents.gateway.server import Gateway
from toolgym.agents.render import ChatRenderer
from toolgym.config import load_config
from toolgym.training.config import TrainConfig
from toolgym.training.trainer import Trainer

SYNCED_GAP = 1e-3
"""The largest gap between the engine's and the learner's log-probability of a trained token
when the engine holds the weights being trained (float32 both; measured about 1e-6)."""
STALE_GAP = 1e-2
"""The largest gap at least, once the engine has missed a weight update (measured 0.1-0.6
with optim.lr=1e-2)."""


@pytest.fixture(scope="module")
def mini_tool_calling_model_dir(mini_model_dir, tmp_path_factory):
    """The mini model taught to answer CHAT_MESSAGES with CHAT_TOOL_CALL (as conftest's
    tool_calling_model_dir for the tiny one)."""
    return built_once(
        tmp_path_factory,
        "mini-tool-calling-model",
        lambda out: teach_tool_call(mini_model_dir, out),
    )


def vllm_run(model, run_dir, *extra):
    return load_config(
        TrainConfig, None,
        [f"model={model}", f"run_dir={run_dir}", "engine.kind=vllm", "tensorboard=false",
         "env.kwargs={size: 3, max_turns: 3}", "advantage.estimator=gigpo",
         "rollout.tasks_per_step=2", "rollout.rollouts_per_task=3", "rollout.max_tokens=16",
         "optim.micro_batch_size=6", "optim.lr=1e-2", "eval.every_steps=100", "eval.episodes=2",
         # the entropy term moves the weights even in a step whose advantages are all 0
         "loss.entropy_coef=0.01",
         *extra],
    )  # fmt: skip


def gaps(metrics):
    return [m["train/fidelity_gap_max"] for m in metrics]


def test_gigpo_on_vllm_syncs_full_weights_every_step(mini_model_dir, tmp_path):
    metrics = Trainer(vllm_run(mini_model_dir, tmp_path, "steps=3")).run()
    assert [m["step"] for m in metrics] == [1, 2, 3]
    assert all(m["train/tokens"] > 0 and m["train/grad_norm"] > 0 for m in metrics)
    assert max(gaps(metrics)) < SYNCED_GAP, gaps(metrics)
    assert all(m["train/fidelity_over"] == 0 for m in metrics)


class DroppedSyncs(Trainer):
    """The trainer with its weight syncs dropped: the engine keeps the start weights."""

    async def send_weights(self):
        return None


def test_a_dropped_sync_is_seen_in_token_fidelity(mini_model_dir, tmp_path):
    metrics = DroppedSyncs(vllm_run(mini_model_dir, tmp_path, "steps=2")).run()
    assert gaps(metrics)[0] < SYNCED_GAP  # nothing trained yet: the same weights
    assert gaps(metrics)[1] > STALE_GAP, gaps(metrics)


def test_async_on_vllm_stays_within_the_staleness_bound(mini_model_dir, tmp_path):
    config = vllm_run(
        mini_model_dir, tmp_path, "steps=3", "mode=async", "async_training.max_staleness=1"
    )
    metrics = Trainer(config).run()  # a sample past the bound fails the run before it trains
    assert [m["step"] for m in metrics] == [1, 2, 3]
    assert all(m["async/staleness_over"] == 0 and m["train/grad_norm"] > 0 for m in metrics)


def test_partial_rollouts_on_vllm_train_with_the_behaviour_correction(
    mini_tool_calling_model_dir, tmp_path
):
    """An asynchronous run with partial rollouts end to end on vLLM (a weight sync landing
    inside an episode, turn by turn, is test_vllm_engine.py's)."""
    config = vllm_run(
        mini_tool_calling_model_dir, tmp_path, "steps=3", "mode=async",
        "async_training.max_staleness=1", "async_training.partial_rollouts=true",
        "async_training.extra_groups=2", "loss.mode=truncated-is",
    )  # fmt: skip
    metrics = Trainer(config).run()
    assert [m["step"] for m in metrics] == [1, 2, 3]
    for m in metrics:
        assert "async/partial_share" in m and m["train/behaviour_weight_max"] > 0
        assert m["train/fidelity_gap_mean"] >= 0


def test_a_lora_run_on_vllm_samples_under_each_synced_adapter(mini_model_dir, tmp_path):
    config = vllm_run(
        mini_model_dir, tmp_path, "steps=3", "lora.enabled=true", "lora.r=8", "optim.lr=3e-2"
    )
    metrics = Trainer(config).run()
    assert all(m["train/grad_norm"] > 0 for m in metrics)  # the adapter moved each step
    assert max(gaps(metrics)) < SYNCED_GAP, gaps(metrics)
    assert sorted(p.name for p in (tmp_path / "adapters").iterdir())[-1] == "policy-3"


def test_the_gateway_in_front_of_vllm_records_the_engine_s_own_tokens(mini_tool_calling_model_dir):
    loop = LoopThread()
    tokenizer = AutoTokenizer.from_pretrained(mini_tool_calling_model_dir)

    async def start():
        engine = Recorded(
            make_engine("vllm", model=str(mini_tool_calling_model_dir), dtype="float32")
        )
        gateway = Gateway(engine, ChatRenderer(tokenizer), tokenizer)
        await gateway.start()
        return gateway

    gateway = loop.call(start(), timeout=300)
    try:
        play_a_tool_using_session(gateway, loop)
        assert gateway.engine.calls[1][1].cached_tokens > 0  # the second call reused the first
    finally:
        loop.call(gateway.aclose())
        loop.call(gateway.engine.aclose())
        loop.close()


def test_the_simulated_search_engine_writes_its_documents_with_vllm(mini_model_dir):
    """`toolgym serve search --simulator-engine vllm`: Search-R1's /retrieve answered with
    documents vLLM wrote; a seed decides them."""
    server = serve(
        ["serve", "search", "--simulator", str(mini_model_dir), "--simulator-engine", "vllm",
         "--doc-tokens", "8"],
        "simulated search server on vLLM",
    )  # fmt: skip
    url = next(server)
    try:
        body = {"queries": ["who built the Vell bridge"], "topk": 3, "seed": 7, "noise": 0.5}
        status, first = post(f"{url}/retrieve", body)
        assert status == 200 and len(first["result"][0]) == 3
        assert all(hit["contents"].strip() for hit in first["result"][0])
        others = [post(f"{url}/retrieve", {**body, "seed": s})[1]["result"][0] for s in (8, 9, 10)]
        assert any(row != first["result"][0] for row in others)
    finally:
        server.close()
