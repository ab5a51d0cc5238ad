"""Config loading: YAML plus dotted overrides, typed validation, did-you-mean on typos."""

from __future__ import annotations

import pytest

from conftest import ROOT
from toolgym.config import ConfigModel, load_config
from toolgym.errors import ConfigError
from toolgym.training.advantages import Scale


class Trainer(ConfigModel):
    lr: float = 1e-5
    """Learning rate."""
    steps: int = 10


class Run(ConfigModel):
    env_id: str = "toolgym/Maze-v0"
    trainer: Trainer = Trainer()


def test_yaml_then_overrides(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("env_id: toolgym/Arithmetic-v0\ntrainer:\n  steps: 50\n")
    cfg = load_config(Run, path, ["trainer.lr=3e-4", "trainer.steps=7"])
    assert cfg == Run(env_id="toolgym/Arithmetic-v0", trainer=Trainer(lr=3e-4, steps=7))
    assert load_config(Run) == Run()


def test_typos_and_bad_values_are_explained(tmp_path):
    with pytest.raises(ConfigError, match=r"trainer.lrr: unknown setting. Did you mean: lr\?"):
        load_config(Run, None, ["trainer.lrr=1"])
    with pytest.raises(ConfigError, match=r"lr: unknown setting. Did you mean trainer.lr\?"):
        load_config(Run, None, ["lr=1"])  # one level too high: pointed to its section
    with pytest.raises(
        ConfigError, match=r"trainer.steps: Input should be a valid integer.*got 'many'"
    ):
        load_config(Run, None, ["trainer.steps=many"])
    for infinite in ("inf", "-inf", "nan", ".inf"):
        with pytest.raises(ConfigError, match=r"trainer.lr: Input should be a finite number"):
            load_config(Run, None, [f"trainer.lr={infinite}"])
    with pytest.raises(ConfigError, match="must look like section.field=value"):
        load_config(Run, None, ["trainer.steps"])
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(Run, tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_config(Run, bad)
    with pytest.raises(ValueError):  # a ConfigError is also a ValueError
        load_config(Run, None, ["env_id.x=1"])


def test_the_settings_reference_is_generated_from_the_config_and_complete():
    from pydantic import BaseModel

    from conftest import ROOT
    from toolgym.training.config import TrainConfig
    from toolgym.training.settings_doc import settings_markdown

    assert (ROOT / "docs" / "training-settings.md").read_text() == settings_markdown(), (
        "regenerate: python -m toolgym.training.settings_doc > docs/training-settings.md"
    )
    undocumented = []

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            if not field.description:
                undocumented.append(prefix + name)
            for inner in (field.annotation, *getattr(field.annotation, "__args__", ())):
                if isinstance(inner, type) and issubclass(inner, BaseModel):
                    walk(inner, f"{prefix}{name}.")

    walk(TrainConfig, "")
    assert not undocumented, f"settings without a docstring: {undocumented}"


def test_checking_a_shipped_config_loads_no_torch_and_no_env():
    """Registries are light (names, settings classes, import paths): importing the config
    and validating any shipped config (a tool reading one, a launcher) costs no torch and
    no env (a module on the way to any registered env's class, beyond those `import toolgym`
    loads to register them)."""
    import subprocess
    import sys

    probe = (
        "import sys, toolgym; registered = set(sys.modules)\n"
        "from toolgym.config import load_config\n"
        "from toolgym.training.config import TrainConfig\n"
        f"for path in {sorted(str(p) for p in (ROOT / 'configs').glob('*.yaml'))!r}:\n"
        "    load_config(TrainConfig, path, ['model=m'])\n"
        "from toolgym.envs.registration import registered_ids, spec\n"
        "homes = {spec(i).entry_point.partition(':')[0] for i in registered_ids()}\n"
        "envs = [m for m in sys.modules if m not in registered and any(\n"
        "        m == h or m.startswith(h + '.') or h.startswith(m + '.') and m != 'toolgym.envs'\n"
        "        for h in homes)]\n"
        "print(' '.join(envs + [m for m in sys.modules if m.partition('.')[0] == 'torch']))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    assert loaded == []


@pytest.mark.parametrize(
    ("override", "error"),
    [
        ("rewards=[{source: judgee}]", r"rewards.0.source: .*'judgee' is not one of .*'judge'"),
        ("rewards=[{source: format, kwargs: {invalidd: -1}}]", r"rewards.0: .*'invalidd'"),
        (
            "rewards=[{source: implicit_prm, scores: process, kwargs: {bta: 1}}]",
            r"(?s)rewards.0: .*bta: unknown setting. Did you mean: beta\?",
        ),
        ("rewards=[{source: mc_values}]", r"rewards.0: .*scores steps: give it scores: process"),
        ("engine.kind=hff", r"engine.kind: .*'hff' is not one of .*Did you mean: hf\?"),
        ("max_staleness=2", r"max_staleness: unknown setting. Did you mean async_training"),
        ("async_training.extra_groups=2", r"async_training.extra_groups: for mode: async"),
        (
            "advantage.gamma=0.9",
            r"advantage.gamma: unknown setting .*Did you mean advantage.gigpo.gamma\?",
        ),
        (
            "advantage.gigpo.gama=0.9",
            r"(?s)advantage: .*gama: unknown setting. Did you mean: gamma\?",
        ),
        (
            "advantage.gigpo.gamma=2",
            r"(?s)advantage: .*gamma: Input should be less than or equal to 1",
        ),
        ("advantage.rloo.x=1", r"advantage.rloo: the rloo estimator takes no settings"),
        ("advantage.gigpo=5", r"advantage.gigpo: give the gigpo estimator's settings as a mapping"),
        ("advantage.gigpo=null", r"advantage.gigpo: .* as a mapping, not NoneType"),
    ],
)
def test_a_bad_reward_source_its_kwargs_or_an_engine_kind_fail_as_the_config_loads(override, error):
    """Found before any env or model is built, naming the setting (the path to it)."""
    from toolgym.training.config import TrainConfig

    with pytest.raises(ConfigError, match=error):
        load_config(TrainConfig, None, ["model=m", override])


def test_each_estimator_reads_its_own_settings_and_keeps_the_others():
    """advantage.NAME holds estimator NAME's settings: switching the estimator (a bake-off's
    override on a GiGPO recipe) keeps GiGPO's for later and gives GRPO only its own."""
    from toolgym.training.config import TrainConfig

    config = load_config(
        TrainConfig, ROOT / "configs" / "maze_gigpo.yaml",
        ["model=m", "advantage.gigpo.gamma=0.5", "advantage.scale=floor",
         "advantage.std_floor=0.25"],
    )  # fmt: skip
    assert config.advantage.options()["gamma"] == 0.5
    config.advantage.estimator = "grpo"
    assert config.advantage.options() == {"scale": Scale("floor", 0.25)}  # every estimator's
    config.advantage.estimator = "rloo"
    assert config.advantage.options() == {"scale": Scale("floor", 0.25)}
    again = TrainConfig.model_validate(config.model_dump())  # a saved run's config.json
    assert again.advantage.model_dump() == config.advantage.model_dump()


def test_a_score_recorded_while_playing_is_paid_only_through_its_reward_source():
    """A harness run is paid its agent's `result` and self-play its `proposer` reward by
    default; a `rewards` list that leaves them out would train on nothing the episode earned,
    and is refused naming the fix."""
    from toolgym.training.config import TrainConfig

    harness = ROOT / "configs" / "harness_arithmetic.yaml"
    selfplay = ROOT / "configs" / "selfplay_maze.yaml"
    assert [r.source for r in load_config(TrainConfig, harness, ["model=m"]).rewards] == ["result"]
    played = load_config(TrainConfig, selfplay, ["model=m"])
    assert [r.source for r in played.rewards] == ["env", "proposer"]
    saved = TrainConfig.model_validate(played.model_dump())  # a resumed run's config.json
    assert [r.source for r in saved.rewards] == ["env", "proposer"]
    with pytest.raises(ConfigError, match=r"add \{source: result\} to rewards"):
        load_config(TrainConfig, harness, ["model=m", "rewards=[{source: env}]"])
    with pytest.raises(ConfigError, match=r"add \{source: proposer\} to rewards"):
        load_config(TrainConfig, selfplay, ["model=m", "rewards=[{source: env}]"])
    frozen = ["model=m", "rewards=[{source: env}]", "selfplay.frozen=[proposer]"]
    assert [r.source for r in load_config(TrainConfig, selfplay, frozen).rewards] == ["env"]
    with pytest.raises(ConfigError, match=r"source agent pays a score only a harness run records"):
        load_config(TrainConfig, None, ["model=m", "rewards=[{source: env}, {source: agent}]"])
    with pytest.raises(ConfigError, match=r"'result' scores the episode's outcome"):
        load_config(
            TrainConfig, harness, ["model=m", "rewards=[{source: result, scores: process}]"]
        )


def test_a_saved_config_with_the_old_std_switches_loads_where_they_agree_with_its_scale():
    """Runs saved before advantage.scale hold `advantage.grpo.std_normalize` and GiGPO's two
    switches: true under the group scale (what they meant) still loads, resumable; a switch
    that says what the scale does not is refused, naming the setting that replaced it."""
    from toolgym.training.config import TrainConfig

    old = ["model=m", "advantage.grpo={std_normalize: true}",
           "advantage.gigpo={gamma: 0.5, std_normalize: true, step_std_normalize: true}"]  # fmt: skip
    config = load_config(TrainConfig, None, old)
    assert config.advantage.options()["gamma"] == 0.5
    assert config.advantage.options()["scale"] == Scale("group")
    with pytest.raises(ConfigError, match="step_std_normalize: false is advantage.scale: none"):
        load_config(TrainConfig, None, ["model=m", "advantage.gigpo.step_std_normalize=false"])
    none = ["model=m", "advantage.scale=none", "advantage.gigpo.step_std_normalize=false"]
    assert load_config(TrainConfig, None, none).advantage.options()["scale"] == Scale("none")


def test_redistributed_process_rewards_keep_every_turns_sign_or_are_refused():
    """Process rewards are redistributed unless a config says otherwise, and that keeps each
    turn's sign only at step_alpha <= 0.5: left unset it is 0.5 (added, 1), a larger one is
    refused in words, and a saved config keeps what it resolved to."""
    from toolgym.training.config import TrainConfig

    redistributed = ["model=m"]
    config = load_config(TrainConfig, None, redistributed)
    assert config.advantage.step_combine == "redistribute"
    assert config.advantage.step_alpha == 0.5
    saved = TrainConfig.model_validate(config.model_dump(mode="json"))
    assert saved.advantage.step_alpha == 0.5
    added = load_config(TrainConfig, None, ["model=m", "advantage.step_combine=add"])
    assert added.advantage.step_alpha == 1.0
    assert TrainConfig.model_validate(added.model_dump(mode="json")).advantage.step_alpha == 1.0
    given = load_config(TrainConfig, None, [*redistributed, "advantage.step_alpha=0.25"])
    assert given.advantage.step_alpha == 0.25
    with pytest.raises(
        ConfigError, match="could flip the sign of a turn's credit; give at most 0.5"
    ):
        load_config(TrainConfig, None, [*redistributed, "advantage.step_alpha=1"])
    with pytest.raises(ConfigError, match="greater than or equal to 0"):
        load_config(TrainConfig, None, ["model=m", "advantage.step_alpha=-1"])


def test_redistributing_needs_an_outcome_to_redistribute():
    """Redistributed process scores only move an outcome reward's credit between turns: a
    config whose every reward scores process would train nothing, and is refused in words;
    added, the same rewards train."""
    from toolgym.training.config import TrainConfig

    mc = "{source: mc_values, scores: process}"
    with pytest.raises(ConfigError, match="every source scores process.*add an outcome reward"):
        load_config(TrainConfig, None, ["model=m", f"rewards=[{mc}]"])
    added = ["model=m", f"rewards=[{mc}]", "advantage.step_combine=add"]
    assert [r.scores for r in load_config(TrainConfig, None, added).rewards] == ["process"]
    both = ["model=m", f"rewards=[{{source: env}}, {mc}]"]
    assert len(load_config(TrainConfig, None, both).rewards) == 2


def test_a_process_reward_that_learns_from_the_run_is_never_added():
    """The implicit PRM learns from the policy's own episodes, so the policy can steer what
    it pays: added to the outcome it came to pay malformed calls until they broke. Added, it
    is refused in words; redistributed, it loads. Monte-Carlo values (the verdict's own mean
    over continuations) may still be added."""
    from toolgym.training.config import TrainConfig

    prm = "rewards=[{source: env}, {source: implicit_prm, name: prm, scores: process}]"
    with pytest.raises(ConfigError, match="prm learns from the run's own episodes.*redistribute"):
        load_config(TrainConfig, None, ["model=m", prm, "advantage.step_combine=add"])
    assert load_config(TrainConfig, None, ["model=m", prm]).advantage.step_combine == "redistribute"
    mc = "rewards=[{source: env}, {source: mc_values, scores: process}]"
    added = load_config(TrainConfig, None, ["model=m", mc, "advantage.step_combine=add"])
    assert added.advantage.step_combine == "add"
    alone = "rewards=[{source: implicit_prm, scores: process}]"
    with pytest.raises(ConfigError, match="add an outcome reward") as refused:
        load_config(TrainConfig, None, ["model=m", alone])
    assert "step_combine: add" not in str(refused.value)  # the way out it names is open
