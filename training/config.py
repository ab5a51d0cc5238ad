"""The trainer's typed configuration (YAML plus `section.field=value` overrides).

Batch names state their unit. One optimizer step consumes tasks_per_step x
rollouts_per_task trajectories, split into micro-batches of micro_batch_size sequences.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from toolgym.config import Choices, ConfigModel, validate
from toolgym.envs.ref import EnvRef
from toolgym.errors import ConfigError, did_you_mean
from toolgym.training.lora import LoraSection
from toolgym.training.selfplay.proposer_rules import proposer_rule


class EnvSection(ConfigModel):
    id: str = "toolgym/Maze-v0"
    """Registered env id to train on."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """Arguments for the env (e.g. size, max_turns)."""
    name: str | None = None
    """What metrics (rollout/NAME/...) and group ids call this env; default: the id's last
    part (Maze-v0). Two entries of one mixture need different names."""
    weight: float = Field(1.0, gt=0)
    """Share of each step's tasks in a mixture (weights are normalized)."""
    role: str = "policy"
    """The part the policy plays on this env, recorded in every trajectory."""

    @property
    def label(self) -> str:
        return self.name or self.id.rpartition(":")[2].rpartition("/")[2]

    @property
    def ref(self) -> EnvRef:
        """The env as requests name it."""
        return EnvRef(self.label, self.id, self.kwargs)


class EvalSetSection(EnvSection):
    """A set evaluated beside the run's own held-out split (eval.sets)."""

    split: Literal["eval", "test"] = "eval"
    """The split of this env the set plays: eval, or test, the other split training never
    draws (the run's own env on its test split holds out more items where a space is small;
    nothing chooses on it, so it stays a clean measure)."""
    episodes: int | None = Field(None, ge=1)
    """Episodes of this set (default: eval.episodes)."""
    plays: int | None = Field(None, ge=1, le=64)
    """Episodes of each of its items (default: the evaluation's, eval.plays)."""


class RewardSection(ConfigModel):
    source: Annotated[str, Choices("toolgym.training.rewards:SOURCES")]
    """A reward source from training/rewards; what it scores and its kwargs are checked as
    the config loads."""
    name: str | None = None
    """The component's name in Step.rewards and in reward/NAME metrics (default: source)."""
    weight: float = 1.0
    """Its weight in the per-step reward the advantages read."""
    scores: Literal["outcome", "process"] = "outcome"
    """outcome: summed into the returns the estimator normalises; process: a per-step
    score that joins the advantage as advantage.step_combine says (added, or moving credit
    between an episode's turns), weighted by advantage.step_alpha."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """The source's arguments (format: invalid, cut_off; length: per_token, budget;
    function: path="package.module:function"; implicit_prm, mc_values and judge: see their
    own tables below)."""

    @property
    def label(self) -> str:
        return self.name or self.source

    @model_validator(mode="before")
    @classmethod
    def _scores_not_role(cls, data: Any) -> Any:
        if isinstance(data, dict) and "role" in data:  # `role` is the part the policy plays
            raise ConfigError(f"rewards: `role: {data['role']}` is now `scores: {data['role']}`")
        return data

    @model_validator(mode="after")
    def _source_takes_these(self) -> RewardSection:
        """What it scores and its kwargs are checked as the config loads, not once the model
        has."""
        from toolgym.training.rewards import check_source

        check_source(self.source, self.scores, self.kwargs)
        return self


class RolloutSection(ConfigModel):
    tasks_per_step: int = Field(8, ge=1)
    """Distinct tasks (seeds) per optimizer step."""
    rollouts_per_task: int = Field(4, ge=1)
    """Trajectories per task: the group that advantages compare within."""
    max_tokens: int = Field(64, ge=1)
    """Tokens per model turn."""
    temperature: float = Field(1.0, ge=0)
    """Sampling temperature of training rollouts."""
    max_turns: int | None = Field(None, ge=1)
    """Rollout turn limit (None: the env's own)."""
    max_context_tokens: int = Field(4096, ge=16)
    """Token budget of one episode (prompt, every turn and every observation); an episode
    that would pass it ends (`context_limit`)."""
    concurrency: int = Field(64, ge=1)
    """Episodes played at once (the engine batches their turns)."""
    episode_timeout_s: float = Field(600.0, gt=0)
    """Wall-clock limit of one episode; one that passes it is masked, not scored."""
    tool_schemas_in_prompt: bool = True
    """Render the tools' JSON schemas into the prompt (False: shorter prompts for small
    models; the env's system message still lists its tools). SFT must use the same."""


RETIRED = {"std_normalize", "step_std_normalize"}
"""Estimator settings advantage.scale replaced."""


REDISTRIBUTED_ALPHA = 0.5
"""The largest weight at which redistributed process rewards keep every turn's sign."""
ADDED_ALPHA = 1.0
"""Added process rewards' weight unless given: their normalised term on a par with the
outcome's."""


class AdvantageSection(ConfigModel):
    """Beside the fields below, `advantage.NAME` holds the settings of estimator NAME (its
    own table below): each estimator's are kept, so switching `estimator` keeps the others'
    for later."""

    model_config = ConfigDict(extra="allow")

    estimator: Annotated[str, Choices("toolgym.training.advantages:ESTIMATORS")] = "gigpo"
    """How rewards become advantages: GRPO (group-normalized returns), RLOO (leave-one-out
    baseline) or GiGPO (GRPO plus step-level groups of identical states)."""
    scale: Literal["group", "none", "floor", "batch"] = "group"
    """How every estimator divides its centred advantages, the step anchors' included: by the
    comparison group's standard deviation (`group`), by nothing (`none`, Dr. GRPO), by that
    standard deviation or `std_floor`, whichever is larger (`floor`: a group whose returns
    barely differ stays small), or by the standard deviation of the whole step's advantages
    (`batch`). docs/which-method.md has what each did."""
    std_floor: float = Field(0.5, gt=0)
    """The `floor` scale's least divisor, in units of the reward: 0.5 is the spread of a group
    half of whose episodes earned 1."""
    centre_turns: bool = False
    """Every trained turn's advantage less the mean over the step's turns, so the tokens
    every call shares get no net push (training/advantages/base.py: turns_centred); where
    failures run longer than successes, that mean is below 0, and a run's updates push the
    call format itself down."""
    step_alpha: float = Field(REDISTRIBUTED_ALPHA, ge=0)
    """Weight of the process rewards' part (rewards with scores: process): redistributed, 0.5
    unless given and at most 0.5 (above it a turn's sign could flip); added, 1 unless given."""
    step_combine: Literal["redistribute", "add"] = "redistribute"
    """How process rewards join the advantage: the estimator's credit moved between each
    episode's turns as they rank them, its sum and every turn's sign kept (`redistribute`;
    training/advantages/step_term.py), or their normalised step term added (`add`, able to
    outweigh the verified outcome: added, the implicit PRM came to pay malformed calls in one
    far-goal seed of three, so a process reward that learns from the run's own episodes is
    refused with it). docs/which-method.md has what each did."""
    anchor_similarity: float | None = Field(None, gt=0, le=1)
    """GiGPO's anchor groups (and adv/anchor_coverage): None joins steps whose env state_key
    is equal; a number s in (0, 1] also joins steps whose observations acted on share at
    least s of their words (Jaccard), for envs whose states rarely repeat exactly
    (training/advantages/anchors.py)."""

    @model_validator(mode="after")
    def _signs_kept(self) -> AdvantageSection:
        """Redistributed process rewards keep every turn's sign: a step_alpha above 0.5 is
        refused rather than quietly letting a process reward pay a turn the outcome blamed.
        Added, their weight is 1 unless given (OPRL's)."""
        if self.step_combine == "add" and "step_alpha" not in self.model_fields_set:
            self.step_alpha = ADDED_ALPHA
        if self.step_combine == "redistribute" and self.step_alpha > REDISTRIBUTED_ALPHA:
            raise ConfigError(
                f"advantage.step_alpha: {self.step_alpha} with step_combine: redistribute "
                f"could flip the sign of a turn's credit; give at most "
                f"{REDISTRIBUTED_ALPHA} (the measured one), or step_combine: add"
            )
        return self

    @model_validator(mode="after")
    def _estimator_settings(self) -> AdvantageSection:
        """Each `advantage.NAME` read into estimator NAME's settings, as the config loads."""
        from toolgym.training.advantages import ESTIMATORS

        extra = self.__pydantic_extra__ if self.__pydantic_extra__ is not None else {}
        for name, value in list(extra.items()):
            if isinstance(value, dict):
                value = extra[name] = self._without_retired(name, value)
            settings = ESTIMATORS[name].settings if name in ESTIMATORS else None
            if settings is None and name in ESTIMATORS and value == {}:  # GRPO's old switch
                del extra[name]
                continue
            if settings is None:
                raise ConfigError(_not_an_estimator(name, ESTIMATORS))
            if isinstance(value, settings):  # an already checked config, copied or assigned
                continue
            if not isinstance(value, dict):
                raise ConfigError(f"advantage.{name}: give the {name} estimator's settings as a "
                                  f"mapping, not {type(value).__name__}")  # fmt: skip
            extra[name] = validate(settings, value)
        for name, kind in ESTIMATORS.items():  # every estimator's, so a saved config shows all
            if kind.settings is not None and name not in extra:
                extra[name] = kind.settings()
        return self

    def _without_retired(self, name: str, value: dict[str, Any]) -> dict[str, Any]:
        """An estimator's settings less the std switches `scale` replaced: a saved run's
        config that agrees with its scale (true under group, false under none) still loads,
        and one that does not is refused in words."""
        kept = dict(value)
        for key in RETIRED & kept.keys():
            divided = kept.pop(key)
            if (divided, self.scale) not in ((True, "group"), (False, "none")):
                raise ConfigError(
                    f"advantage.{name}.{key}: every estimator now divides as advantage.scale "
                    f"says (group, none, floor, batch); {key}: {str(divided).lower()} is "
                    f"advantage.scale: {'group' if divided else 'none'}"
                )
        return kept

    def settings(self) -> ConfigModel | None:
        """The chosen estimator's settings (None: it takes none)."""
        settings: ConfigModel | None = (self.__pydantic_extra__ or {}).get(self.estimator)
        return settings

    def options(self) -> dict[str, Any]:
        """The chosen estimator's keyword arguments, its scale's included."""
        from toolgym.training.advantages import Scale

        settings = self.settings()
        scale = Scale(self.scale, self.std_floor)
        return {"scale": scale, **(settings.model_dump() if settings is not None else {})}


def _not_an_estimator(name: str, estimators: dict[str, Any]) -> str:
    homes = [f"advantage.{e}.{name}" for e, kind in estimators.items()
             if kind.settings is not None and name in kind.settings.model_fields]  # fmt: skip
    if name in estimators:
        return f"advantage.{name}: the {name} estimator takes no settings"
    hint = f" Did you mean {' or '.join(homes)}?" if homes else did_you_mean(name, estimators)
    return (
        f"advantage.{name}: unknown setting (an estimator's settings go under "
        f"advantage.NAME).{hint}"
    )


class OptimSection(ConfigModel):
    lr: float = Field(1e-4, gt=0)
    """AdamW's peak learning rate."""
    weight_decay: float = Field(0.0, ge=0)
    """AdamW's decoupled weight decay."""
    grad_clip: float = Field(1.0, gt=0)
    """Largest global gradient norm; larger gradients are scaled down to it."""
    micro_batch_size: int = Field(8, ge=1)
    """Sequences per forward/backward pass (gradients accumulate over the step). Left unset,
    a run smaller than the default takes one mini-batch's trajectories, so shrinking
    rollout.tasks_per_step alone is enough."""
    ppo_epochs: int = Field(1, ge=1)
    """Passes over each step's trajectories."""
    minibatches: int = Field(1, ge=1)
    """Optimizer steps per pass: the step's trajectories are split, in collection order,
    into this many mini-batches (PPO's minibatches), each with its own loss normalization.
    More steps per collected batch learn more from it; clipping keeps the later ones near
    the behaviour policy."""
    target_kl: float | None = Field(None, gt=0)
    """A bound on how far one update moves the policy (PPO's early stop): a mini-batch after
    the first whose approx KL from the policy that played, measured before its step, is
    above this takes no step, and the update ends there (train/held). None: every mini-batch
    steps. docs/which-method.md has what it did to valid calls."""
    schedule: Annotated[str, Choices("toolgym.training.schedule:DECAYS")] = "constant"
    """How the learning rate moves after warm-up, over the run's steps (to lr x min_lr_ratio)."""
    warmup_steps: int = Field(0, ge=0)
    """Training steps of linear warm-up from 0 to lr."""
    min_lr_ratio: float = Field(0.0, ge=0, le=1)
    """Where linear and cosine decay end, as a share of lr."""
    on_nonfinite: Literal["stop", "skip"] = "stop"
    """What a non-finite loss or gradient does: stop the run with an error (the checkpoint
    keeps the last good state), or skip that update and count it in train/skipped."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass: less memory for longer sequences, at about
    a third more compute."""


class LossSection(ConfigModel):
    clip_low: float = Field(0.2, ge=0)
    """PPO's clip below 1: the importance ratio is cut at 1 - clip_low."""
    clip_high: float = Field(0.28, ge=0)
    """PPO's clip above 1 (1 + clip_high; higher than clip_low, as DAPO's clip-higher)."""
    clip_dual: float = Field(3.0, gt=1)
    """Dual clip: a token with a negative advantage loses at most clip_dual x |A|, so one
    whose ratio has run far above 1 cannot dominate an update (Ye et al., 2020)."""
    kl_coef: float = Field(0.0, ge=0)
    """Weight of the k3 KL to the frozen start policy (> 0 keeps a reference copy: the base
    model with its adapter switched off under LoRA, else a second copy of the weights)."""
    entropy_coef: float = Field(0.0, ge=0)
    """Weight of an entropy bonus on the generated tokens (0: none)."""
    aggregation: Annotated[str, Choices("toolgym.training.losses:MODES")] = "token-mean"
    """How token losses make the batch loss: a mean over all tokens, a mean of each
    sequence's token mean, or a mean of each sequence's token sum."""
    mode: Annotated[str, Choices("toolgym.training.losses:CORRECTIONS")] = "on-policy"
    """How samples from an older policy than the trained one are corrected
    (losses/behaviour.py): on-policy takes PPO's ratio against the engine's log-probabilities;
    decoupled (decoupled PPO) and truncated-is take it against the trained weights as they
    stood before the update (recomputed, one more forward pass per step) and weight each
    token by their probability over the engine's, left out (decoupled) or cut
    (truncated-is) above behaviour_cap."""
    behaviour_cap: float = Field(5.0, gt=1)
    """The largest proximal / behaviour probability ratio a token is weighted by."""

    @property
    def needs_proximal(self) -> bool:
        """Whether the loss reads the proximal policy's log-probabilities."""
        return self.mode != "on-policy"


class EngineSection(ConfigModel):
    kind: Annotated[str, Choices("toolgym.agents.engines:ENGINES")] = "hf"
    """An engine from the engine registry. hf: generate in-process with the weights being
    trained. openai: generate on a server (`toolgym serve model` or vLLM with runtime LoRA)
    started on the same base model; needs lora.enabled, since weights reach the server as
    LoRA adapters. vllm: vLLM's engine driven from this process (a GPU, or vLLM's CPU build:
    `make vllm`), updated with full weights, or with LoRA adapters under lora.enabled."""
    base_url: str | None = None
    """The server's URL for kind=openai (e.g. http://127.0.0.1:8000/v1)."""
    served_model: str | None = None
    """The base model's name on the server (default: `model`)."""


class CheckpointSection(ConfigModel):
    every_steps: int = Field(1, ge=1)
    """Write the checkpoint (weights, optimizer and the reward sources' and stream's states,
    each a full copy) after every this many steps, and after the last. A run that stops
    resumes from the last one written and plays the steps after it again; larger: less
    time and disk spent on a large model's checkpoints."""


class DistributedSection(ConfigModel):
    timeout_s: float = Field(1800.0, gt=0)
    """How long a rank waits on the others (a collective, or the leader's next command, which
    comes after the step's episodes are played) before the run fails instead of hanging."""


class RaySection(ConfigModel):
    address: str | None = None
    """The Ray cluster the env and engine actors run on: auto (the one `ray start` runs on this
    machine), ADDR (host:port of its head), or local (start one in this process); none: envs
    run in this process. Needs `pip install 'toolgym[dist]'`."""
    env_actors: int = Field(2, ge=1)
    """Ray actors per env, each keeping instances of it and their shared resources."""
    env_cpus: float = Field(0.5, gt=0)
    """CPUs Ray reserves for each env actor (a fraction shares a core)."""
    engine_actors: int = Field(0, ge=0)
    """Ray actors that generate, each running an engine.kind engine (hf, or vllm)
    on its own copy of the weights, which every sync sends them; 0: the engine runs in the
    trainer's process."""
    engine_cpus: float = Field(1.0, gt=0)
    """CPUs Ray reserves for each engine actor."""
    engine_gpus: float = Field(0.0, ge=0)
    """GPUs Ray reserves for each engine actor (a fraction shares one)."""
    timeout_s: float = Field(600.0, gt=0)
    """The longest an engine actor may take to start, answer a request or load weights
    before it counts as lost: the request goes to another actor, and a run whose actors are
    all lost fails saying so instead of hanging."""


class EvalSection(ConfigModel):
    every_steps: int = Field(5, ge=1)
    """Evaluate after every this many training steps, and after the last."""
    episodes: int = Field(32, ge=1)
    """Episodes per env, on the first tasks of its eval split (all of them if it has fewer);
    eval tasks never occur in training."""
    temperature: float = Field(0.0, ge=0)
    """Sampling temperature of evaluation (0: greedy)."""
    plays: int = Field(1, ge=1, le=64)
    """Episodes of each eval item, for a sampled evaluation: repeats narrow a rate's interval
    by their own sampling noise (not by how few items there are: intervals are over items)."""
    kept: int = Field(256, ge=0)
    """An evaluation of at most this many episodes is kept whole in
    RUN_DIR/evaluations/step_N.jsonl (N: the steps done before it), to read with `toolgym
    rollouts show` (0: none kept)."""
    at_start: bool = False
    """Also evaluate before the first update (logged as step 0): the baseline the run's
    evaluations compare with."""
    keep_best: bool = False
    """Also keep the policy of the best evaluation so far (by eval/success, the start's
    included; a tie keeps the earlier) as RUN_DIR/best_policy, with the step that chose it in
    its toolgym_best.json: a run that collapses late keeps what it reached. The choice saw
    the eval split, so measure the kept policy on the test split (`toolgym eval --split test`)."""
    sets: list[EvalSetSection] = Field(default_factory=list)
    """Sets played at every evaluation beside the run's own held-out split: each an env
    (id, kwargs, and a `name` its metrics are logged under, eval/NAME/success) whose eval
    split (or test split: `split`) differs from what training draws. A set of an env the
    run trains on, with its settings (its test split: more held-out items), is held out:
    pooled with the eval split as held_out/success, the run's one held-out figure. Any other
    (a larger maze, unseen values) measures transfer."""


class AsyncSection(ConfigModel):
    """mode: async. Every setting here is refused in sync mode, which is the stream at
    max_staleness 0 with the engine sharing the trained weights."""

    max_staleness: int = Field(1, ge=0)
    """The most versions a group may be trained behind the weights it started under (eta; 0
    trains on exactly what sync mode does)."""
    partial_rollouts: bool = False
    """Episodes go on across weight syncs (a sync lands between turns), so a step trains on
    the first groups to finish and the rest carry over; loss.mode (decoupled or truncated-is)
    corrects the older turns' tokens, which may be more than max_staleness versions old."""
    stale_turns: Literal["correct", "mask"] = "correct"
    """partial_rollouts: the turns of a carried-over episode made more than max_staleness
    versions before the update: correct (loss.mode weighs them) or mask (left out of the
    loss, so every trained token is within max_staleness)."""
    extra_groups: int = Field(0, ge=0)
    """Groups started beyond (max_staleness + 1) x rollout.tasks_per_step, so a step can pick
    the first to finish."""


class SelfPlaySection(ConfigModel):
    domain: Annotated[str, Choices("toolgym.training.selfplay.domains:DOMAINS")]
    """What the policy proposes tasks on (sql, sql_edit, code, search, textworld, maze); its
    solver env is the run's env, whose held-out tasks the periodic evaluation plays."""
    proposals: int = Field(4, ge=0)
    """Proposer episodes a step; each valid task gets rollout.rollouts_per_task solvers. 0
    proposes nothing: the solver trains on the references alone (an ablation's arm)."""
    shown: int = Field(2, ge=0)
    """Pool tasks shown to each proposer as examples."""
    references: int = Field(4, ge=0)
    """Reference tasks the pool starts with (the domain's own; never evicted)."""
    reward: str = "learnability"
    """The proposer's reward for a valid task: learnability, one_minus or band(lo, hi)."""
    invalid_penalty: float = -0.5
    """The reward of a task that was read but some later stage refused (Absolute Zero's
    penalty for a well-formed wrong answer)."""
    format_penalty: float = -1.0
    """The reward of a proposal whose task could not be read (the format stage; Absolute
    Zero's penalty for a format error)."""
    solver_groups: int = Field(8, ge=0)
    """Solver groups a step trains on at least: each valid proposal's, topped up from the
    pool's past proposals (newest first) when too few are valid, from the references only
    while the pool has too few proposals. A batch that shrank with the proposer's failures
    would starve the solver (about 3 groups a step against a curated run's 8)."""
    readers: int = Field(1, ge=1)
    """Reader episodes per task for a domain that grounds its tasks (search): a task stands
    when one of them answers it from the evidence."""
    pool_capacity: int = Field(256, ge=1)
    """Proposed tasks the pool keeps (the oldest go first); references are kept besides."""
    pool_policy: Annotated[str, Choices("toolgym.training.selfplay.pool:POLICIES")] = "uniform"
    """How examples are picked from the pool: uniform or recent."""
    proposer: dict[str, Any] = Field(default_factory=dict)
    """The proposer env's arguments over those it shares with the solver's (max_turns)."""

    frozen: list[Literal["proposer", "solver"]] = Field(default_factory=list)
    """Roles played but not trained, for ablations: a frozen proposer still writes the
    step's tasks and a frozen solver still scores them; only the other role learns."""
    baseline: Literal["group", "running"] = "group"
    """What a proposal's reward is compared with: the others of its kind this step (group),
    or a running mean over steps per task kind (running: SPIRAL's role-conditioned
    advantage, steadier than a mean of a few proposals). Solvers keep their group's."""
    baseline_decay: float = Field(0.9, ge=0.0, lt=1.0)
    """The running baseline's weight on its past: b = decay * b + (1 - decay) * this step's
    mean reward (the first step's mean starts it)."""
    solver_band: tuple[float, float] | None = None
    """Train the solver only on groups whose solve rate p has lo <= p <= hi (R-Zero trains
    on 0.3 to 0.8: a task the solver nearly always or nearly never solves teaches little).
    The others still score their proposers and are kept with the step's rollouts."""

    scorer: Literal["solver", "snapshot"] = "solver"
    """Whose solve rate pays a proposer: the solver groups the step trains on (solver), or
    as many episodes by a frozen copy of the policy (snapshot; R-Zero's fixed solver), which
    are played besides and not trained. A snapshot's reward does not move as the solver
    learns the pool, so a proposer is paid for what the snapshot finds hard. It copies the
    model in this process (engine.kind hf)."""
    snapshot_every: int = Field(0, ge=0)
    """With scorer: snapshot, the snapshot takes the trained weights every this many updates
    (R-Zero's alternation); 0 keeps the run's start weights throughout. Sync mode only. A
    resumed run's snapshot is taken from the weights it resumes with, once one is due."""

    @model_validator(mode="after")
    def _consistent(self) -> SelfPlaySection:
        proposer_rule(self.reward)  # a ConfigError names what is wrong
        band = self.solver_band
        if band is not None and not 0 <= band[0] <= band[1] <= 1:
            raise ConfigError(f"selfplay.solver_band {list(band)}: give [lo, hi] with "
                              "0 <= lo <= hi <= 1")  # fmt: skip
        if self.snapshot_every and self.scorer != "snapshot":
            raise ConfigError("selfplay.snapshot_every is for scorer: snapshot")
        if {"proposer", "solver"} <= set(self.frozen):
            raise ConfigError("selfplay.frozen: freeze one role at most; with both, nothing trains")
        return self


class HarnessSection(ConfigModel):
    """An agent the user already has, played through the gateway (agents/gateway): each
    episode runs the agent once against a URL that records its model calls."""

    agent: str | None = None
    """The agent as "path/to/file.py:function" or "package.module:function", called as
    agent(task, base_url, api_key) (async, or plain: then in a thread) and returning its
    result."""
    command: list[str] | None = None
    """Or a command line run once per episode: it reads OPENAI_BASE_URL, OPENAI_API_KEY and
    TOOLGYM_TASK (the task as JSON) and prints its result."""
    worker: bool = False
    """Run the command as long-lived workers (up to `concurrency` of them), each serving
    episode after episode by a line protocol (agents/gateway/worker.py), instead of once per
    episode: its start is paid once per worker."""
    pass_env: list[str] = Field(default_factory=list)
    """Variables of the trainer's environment a command also gets (it gets PATH, HOME, the
    locale and the Python paths; never the trainer's keys unless named here)."""
    isolate: bool = True
    """Run each command in PID and IPC namespaces of its own (bubblewrap): it cannot see or
    signal the trainer or its siblings, it sees the run's directory empty (the stored
    episodes hold tasks' answers), and all it started ends with it. false: the trainer's own
    processes (then it can read its siblings' keys and tasks, and the run's files)."""
    reward: str = "env"
    """How a result is scored: env (the env's `answer_tool`, called with the result, on an
    instance reset with the episode's task), exact, contains, number, or
    "package.module:function" called as function(result, the drawn task's fields)."""
    answer_tool: str = "answer"
    """The env's tool that checks a result (reward: env); it takes one parameter."""
    max_calls: int = Field(16, ge=1)
    """Model calls in an episode; the next is refused and ends it."""
    max_completion_tokens: int = Field(4096, ge=1)
    """Tokens the model may write over an episode."""
    idle_timeout_s: float = Field(120.0, gt=0)
    """An agent that makes no call for this long is abandoned (its episode masked if it never
    called the model, else a 0: the policy's replies left it so)."""
    concurrency: int = Field(64, ge=1)
    """Agents running at once (and the gateway's generations at once)."""
    host: str = "127.0.0.1"
    """Where the gateway listens; every call needs its session's key, wherever it is."""
    port: int = Field(0, ge=0, le=65535)
    """Its port (0: a free one)."""

    @model_validator(mode="after")
    def _one_agent(self) -> HarnessSection:
        if (self.agent is None) == (self.command is None):
            raise ConfigError("harness: give `agent` (package.module:function) or `command`, one")
        if self.command is not None and not self.command:
            raise ConfigError("harness.command: give at least the program to run")
        if self.worker and self.command is None:
            raise ConfigError("harness.worker: workers serve a `command`'s episodes")
        return self


class TrainConfig(ConfigModel):
    model: str
    """Model directory to start from (e.g. made by `toolgym model init`, then `toolgym sft`)."""
    run_dir: str = "runs/train"
    """Where the run writes config.json, metrics.jsonl, TensorBoard events, its checkpoint
    and the trained policy (RUN_DIR/policy)."""
    seed: int = Field(0, ge=0)
    """Seeds the model's initialisation of new parts, the task draws and the sampling."""
    steps: int = Field(20, ge=1)
    """Training steps: each collects rollouts, then updates the policy."""
    max_env_steps: int | None = Field(None, ge=1)
    """Also stop once training has spent this many env steps (its episodes' turns, and
    Monte-Carlo branches'), after the step that reaches it: to compare methods whose steps
    cost the env differently at equal env steps. None: `steps` alone decides."""
    device: str = "auto"
    """auto (cuda if a GPU is visible, else cpu), cpu, cuda or cuda:N."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """Compute precision (auto: bfloat16 on GPUs that support it, float32 on cpu); weights
    and optimizer states stay float32."""
    env: EnvSection = Field(default_factory=EnvSection)
    """The env to train on, when `envs` is not given."""
    envs: list[EnvSection] = Field(default_factory=list)
    """A weighted mixture of envs (or of one env's task sets under different names)."""
    rewards: list[RewardSection] = Field(default_factory=lambda: [RewardSection(source="env")])
    """The reward sources whose weighted sum the advantages read (default: the env's; with a
    harness, the agent's `result`; in self-play, the env's and the `proposer` reward)."""
    rollout: RolloutSection = Field(default_factory=RolloutSection)
    """How each step's episodes are collected."""
    advantage: AdvantageSection = Field(default_factory=AdvantageSection)
    """How rewards become per-token advantages."""
    optim: OptimSection = Field(default_factory=OptimSection)
    """The optimizer (AdamW), its batches and its learning-rate schedule."""
    loss: LossSection = Field(default_factory=LossSection)
    """The policy loss (PPO-clip), its KL and entropy terms."""
    eval: EvalSection = Field(default_factory=EvalSection)
    """Evaluation on each env's held-out eval tasks."""
    engine: EngineSection = Field(default_factory=EngineSection)
    """What generates the rollouts."""
    lora: LoraSection = Field(default_factory=LoraSection)
    """Low-rank adapters instead of full fine-tuning."""
    checkpoint: CheckpointSection = Field(default_factory=CheckpointSection)
    """How often the run writes what it resumes from (RUN_DIR/checkpoint)."""
    ray: RaySection = Field(default_factory=RaySection)
    """Env pools as Ray actors across a cluster's nodes (agents/ray/envs.py)."""
    distributed: DistributedSection = Field(default_factory=DistributedSection)
    """A run launched as several processes (`torchrun --nproc-per-node N -m toolgym train`):
    the weights are sharded across them (FSDP2), rank 0 plays the episodes."""
    tensorboard: bool = True
    """Also write the metrics as TensorBoard scalars under RUN_DIR/tensorboard."""
    loggers: list[Literal["wandb", "mlflow"]] = Field(default_factory=list)
    """Also send the metrics, and each step's kept rollouts as a table, to Weights & Biases
    (offline unless WANDB_MODE says otherwise; files under RUN_DIR/wandb) or MLflow
    (RUN_DIR/mlruns unless MLFLOW_TRACKING_URI says where); each needs its package."""
    rollouts_kept: int = Field(4, ge=0)
    """Trajectories of each step kept in RUN_DIR/rollouts/step_N.jsonl, as whole groups
    spread over the step's, to read with `toolgym rollouts show RUN_DIR` or `toolgym view`
    (0: none)."""
    mode: Literal["sync", "async"] = "sync"
    """sync: each step collects, then trains, then syncs the weights. async: episodes are
    played on the run's loop while the trainer trains (training/stream.py), the engine on
    its own copy of the weights, as `async_training` sets."""
    async_training: AsyncSection = Field(default_factory=AsyncSection)
    """mode: async: how stale a trained group may be and whether episodes span syncs."""
    selfplay: SelfPlaySection | None = None
    """Self-play: the policy proposes its tasks and solves them (training/selfplay)."""
    harness: HarnessSection | None = None
    """Play each episode with an agent harness through the gateway instead of the env's own
    loop; the env gives the tasks, their held-out split and (reward: env) the checker."""

    @model_validator(mode="before")
    @classmethod
    def _recorded_scores_are_rewards(cls, data: Any) -> Any:
        """By default a harness run is paid the agent's result, and self-play pays proposers
        their reward besides the env's: the scores recorded while episodes play."""
        if not isinstance(data, dict) or "rewards" in data:
            return data
        if data.get("harness") is not None:
            return {**data, "rewards": [{"source": "result"}]}
        if data.get("selfplay") is not None:
            return {**data, "rewards": [{"source": "env"}, {"source": "proposer"}]}
        return data

    @model_validator(mode="after")
    def _geometry(self) -> TrainConfig:
        trajectories = self.rollout.tasks_per_step * self.rollout.rollouts_per_task
        per_minibatch = trajectories // self.optim.minibatches
        if per_minibatch < 1:
            raise ConfigError(
                f"optim.minibatches ({self.optim.minibatches}) is more than the step's "
                f"{trajectories} trajectories (rollout.tasks_per_step x rollout.rollouts_per_task)"
            )
        if "micro_batch_size" not in self.optim.model_fields_set:
            self.optim.micro_batch_size = min(self.optim.micro_batch_size, per_minibatch)
        if self.optim.micro_batch_size > per_minibatch:
            raise ConfigError(
                f"optim.micro_batch_size ({self.optim.micro_batch_size}) is larger than one "
                f"mini-batch's {per_minibatch} trajectories (rollout.tasks_per_step "
                f"{self.rollout.tasks_per_step} x rollout.rollouts_per_task "
                f"{self.rollout.rollouts_per_task} / optim.minibatches {self.optim.minibatches})"
            )
        labels = [e.label for e in self.mixture]
        if len(set(labels)) != len(labels):
            raise ConfigError(
                f"envs: two entries are both called {sorted(n for n in labels if labels.count(n) > 1)[0]!r}; "
                "give each a distinct `name`"
            )
        taken = set(labels)
        for entry in self.eval.sets:
            if entry.name is None or entry.name in taken:
                raise ConfigError(
                    f"eval.sets: the set of {entry.id} needs a `name` of its own (its metrics "
                    f"are eval/NAME/...; taken: {', '.join(sorted(taken))})"
                )
            taken.add(entry.name)
        components = [r.label for r in self.rewards]
        if len(set(components)) != len(components):
            raise ConfigError(f"rewards: give each source a distinct `name` (got {components})")
        if self.selfplay is not None and len(self.mixture) != 1:
            raise ConfigError("selfplay solves on one env: give `env`, not a mixture in `envs`")
        if self.selfplay is not None and self.selfplay.snapshot_every and self.mode != "sync":
            raise ConfigError("selfplay.snapshot_every needs mode: sync (an asynchronous run's "
                              "weights change while a step plays)")  # fmt: skip
        self._harness_fits()
        self._process_rewards_move_credit()
        asynchronous = self.async_training
        if self.mode == "sync" and asynchronous != AsyncSection():  # a saved config's defaults pass
            changed = [
                f"async_training.{k}" for k, v in asynchronous
                if v != AsyncSection.model_fields[k].default
            ]  # fmt: skip
            raise ConfigError(
                f"{', '.join(changed)}: for mode: async (sync mode never trains a stale group)"
            )
        if (
            asynchronous.partial_rollouts
            and asynchronous.stale_turns == "correct"
            and self.loss.mode == "on-policy"
        ):
            raise ConfigError(
                "async_training.partial_rollouts trains on turns made by older weights: set "
                "loss.mode to decoupled or truncated-is, which correct them, or "
                "async_training.stale_turns=mask"
            )
        if self.advantage.estimator != "rloo" and self.rollout.rollouts_per_task < 2:
            raise ConfigError(
                f"{self.advantage.estimator} compares rollouts of a task: rollout.rollouts_per_task must be at least 2"
            )
        return self

    def _recorded_scores_read(self) -> None:
        """A score recorded while episodes play trains nothing unless a reward reads it."""
        sources = {r.source for r in self.rewards}
        for source in ("result", "agent"):  # only the gateway records them (a group builder
            if source in sources and self.harness is None:  # of your own may record others)
                raise ConfigError(f"rewards: the source {source} pays a score only a harness "
                                  "run records; set harness, or leave it out")  # fmt: skip
        if self.harness is not None and "result" not in sources:
            raise ConfigError("harness: the agent's result is paid through the reward source "
                              "`result`: add {source: result} to rewards")  # fmt: skip
        play = self.selfplay
        if play is not None and "proposer" not in sources and "proposer" not in play.frozen:
            raise ConfigError("selfplay: proposers are paid through the reward source "
                              "`proposer`: add {source: proposer} to rewards")  # fmt: skip

    def _process_rewards_move_credit(self) -> None:
        """Redistributed process rewards only move the outcome's credit between turns: with
        no outcome reward there is none, and they would train nothing. A process reward that
        learns from the run's own episodes is never added: the policy could steer it to pay
        more than the verified outcome does."""
        from toolgym.training.rewards import SOURCES

        scores = {r.scores for r in self.rewards}
        learned = [
            r.label for r in self.rewards if r.scores == "process" and SOURCES[r.source].learns
        ]
        if self.advantage.step_combine == "redistribute" and scores == {"process"}:
            raise ConfigError(
                "rewards: every source scores process, and advantage.step_combine: "
                "redistribute only moves an outcome reward's credit between turns; add an "
                "outcome reward (e.g. {source: env})"
                + ("" if learned else ", or set advantage.step_combine: add")
            )
        if self.advantage.step_combine == "add" and learned:
            raise ConfigError(
                f"rewards: {', '.join(learned)} {'learn' if len(learned) > 1 else 'learns'} "
                "from the run's own episodes, and added (advantage.step_combine: add) what it "
                "pays can outweigh the verified outcome: added, the implicit PRM came to pay "
                "malformed calls until they broke (docs/which-method.md). Keep "
                "advantage.step_combine: redistribute, which only moves the outcome's credit "
                "between an episode's turns"
            )

    def _harness_fits(self) -> None:
        self._recorded_scores_read()
        if self.harness is None:
            return
        if self.selfplay is not None:
            raise ConfigError("harness and selfplay: self-play plays the env's own loop")
        if self.ray.address is not None:
            raise ConfigError("harness: the gateway checks results on env instances in this "
                              "process; unset ray.address")  # fmt: skip
        if any(r.source == "mc_values" for r in self.rewards):
            raise ConfigError("harness: mc_values branches episodes by replaying the env, "
                              "and a harness's episode cannot be replayed")  # fmt: skip

    @property
    def mixture(self) -> list[EnvSection]:
        """The envs this run trains on."""
        return self.envs or [self.env]

    @property
    def held_out_sets(self) -> list[str]:
        """The eval sets that hold out more of the run's own tasks (an env it trains on, with
        the same settings, on a split training never draws): pooled with the eval split into
        the run's one held-out success. The other sets measure transfer."""
        own = [(e.id, e.kwargs) for e in self.mixture]
        return [s.label for s in self.eval.sets if (s.id, s.kwargs) in own]
