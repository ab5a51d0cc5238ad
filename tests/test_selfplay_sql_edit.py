"""SQL self-play by editing on the real pieces: EditSQL-v0 shows a pool question and its gold
query, puts the value the model picks in place of the quoted one in both, runs the edited
query on the read-only database and hands back a typed task. What it refuses (a value the
column does not hold, the question's own, one whose edit lands on a held-out question, which
it never lists, a hostile pool example) it refuses in words; the domain's stages pass its
demonstrations and refuse a held-out question from either proposer."""

from __future__ import annotations

import asyncio

import pytest

import toolgym
from toolgym.agents.trajectory import Step, Trajectory
from toolgym.envs.ref import EnvRef
from toolgym.envs.sql.env import held_out_question
from toolgym.envs.sql.slips import held_values, literal, quoted_values
from toolgym.envs.tasks.content import ContentTasks
from toolgym.training.selfplay.domains.sql import SQLDomain
from toolgym.training.selfplay.domains.sql_edit import SQLEditDomain
from toolgym.training.selfplay.validation import read_task, validate

ARGS = {"style": "tags", "sample_rows": 0, "values": "wide",
        "templates": ["filter_count", "filter_list", "aggregate_state", "ordering"]}  # fmt: skip


def pool_example():
    """A pool question on one of the env's databases: a reference, as the pool holds them."""
    domain = SQLEditDomain(EnvRef("sql", "toolgym/SQL-v0", ARGS))
    return domain.references(1)[0].model_dump(mode="json", exclude={"provenance"})


def edit(examples, *actions, seed=3):
    """Reset EditSQL-v0 with `examples`, play `actions`: (first observation, each step's
    observation text, done, the task handed back, the env's value and values)."""

    async def play():
        env = toolgym.make("toolgym/EditSQL-v0", **ARGS)
        obs, _ = await env.areset(seed=seed, options={"task": {"examples": examples}})
        seen, done, info = [], False, {}
        for action in actions:
            out, _, done, _, info = await env.astep(action)
            seen.append(out[-1]["content"])
        editor = env.unwrapped
        await env.aclose()
        return obs[-1]["content"], seen, done, info.get("result"), editor

    return asyncio.run(play())


def verdict(result, domain_class=SQLEditDomain, *names):
    calls = [
        {"name": name, "arguments": {"query": "SELECT 1"}} for name in names or ["replace_value"]
    ]
    step = Step(0, 1, [0.0], "x", [], 0.0, 0, 1, tool_calls=calls, result=result)
    proposal = read_task(Trajectory("p0:0", steps=[step]))
    validate([proposal], domain_class(EnvRef("sql", "toolgym/SQL-v0", ARGS)).stages())
    return proposal.rejected


def test_an_edit_puts_the_value_in_the_question_and_its_query_and_the_database_answers():
    example = pool_example()
    shown, _, _, _, editor = edit([example])
    assert example["instruction"] in shown and example["check"]["gold_sql"] in shown
    new = editor.values[0]
    _, seen, done, result, editor = edit([example], f"<value>{new}</value>")
    old = f"'{editor.value}'"
    assert done and result["kind"] == "sql"
    assert result["instruction"] == example["instruction"].replace(old, f"'{new}'")
    check = result["check"]
    assert check["gold_sql"] == example["check"]["gold_sql"].replace(old, f"'{new}'")
    assert check["from"] == example["instruction"] and check["db_id"] == example["check"]["db_id"]
    assert check["runs"][0] == check["runs"][1] and check["rows"] >= 1 and check["quoted"] == [new]
    assert verdict(result) is None


@pytest.mark.parametrize(
    "value, says",
    [
        ("Nowhere", "is not one of the values listed"),
        ("x'; DROP TABLE patients; --", "is not one of the values listed"),
        ("y" * 1_000_000, "is not one of the values listed"),
    ],
    ids=["made up", "injection", "a megabyte"],
)
def test_a_value_the_column_does_not_hold_is_refused_in_words_and_the_episode_goes_on(value, says):
    _, seen, done, result, editor = edit([pool_example()], f"<value>{value}</value>")
    assert not done and result is None
    assert says in seen[0] and len(seen[0]) < 2_000  # the refusal lists the values, bounded


def test_the_question_s_own_value_is_refused():
    example = pool_example()
    _, _, _, _, editor = edit([example])
    _, seen, done, result, _ = edit([example], f"<value>{editor.value}</value>")
    assert not done and "already quotes" in seen[0]


def held_out_edit():
    """An eval question that quotes a value, and a training question that differs from it
    by that value alone (an edit of it could land on the eval question)."""
    env = toolgym.make("toolgym/SQL-v0", **ARGS).unwrapped
    tasks = ContentTasks(env.question_item)
    for i in range(200):
        held = env._generate(tasks.task("eval", i)["seed"])
        value = quoted_values(held["gold_sql"])[0]
        for other in held_values(held["db_id"], value):
            trained = {k: held[k].replace(literal(value), literal(other))
                       for k in ("question", "gold_sql")}  # fmt: skip
            if not held_out_question({"db_id": held["db_id"], **trained}):
                return held, value, {"db_id": held["db_id"], **trained}
    raise AssertionError("no eval question has a training neighbour")


def test_a_value_whose_edit_lands_on_a_held_out_question_is_not_offered_and_the_stages_refuse_it():
    held, value, trained = held_out_edit()
    _, _, _, _, editor = edit([{"instruction": held["question"], "check": held}])
    assert editor.task["question"] != held["question"]  # a held-out example is not shown
    shown = {"instruction": trained["question"], "check": trained}
    _, seen, done, result, editor = edit([shown], f"<value>{value}</value>")
    assert editor.task["question"] == trained["question"] and value not in editor.values
    assert not done and result is None and "is not one of the values listed" in seen[0]
    task = {"kind": "sql", "instruction": held["question"],
            "check": {"db_id": held["db_id"], "gold_sql": held["gold_sql"], "runs": ["a", "a"],
                      "rows": 1, "error": None, "blank": False, "quoted": [value],
                      "slips": [{"value": value, "same": False}], "from": trained["question"]}}  # fmt: skip
    refused = "held out: the solver env holds this question out of training (evaluation asks it)"
    assert verdict(task) == refused  # an editor's
    assert verdict(task, SQLDomain, "run_sql", "submit_query") == refused  # a writer's


@pytest.mark.parametrize(
    "example",
    [
        {"instruction": "How many rows?", "check": {"db_id": "clinic_wide_0", "gold_sql": "SELECT 1"}},
        {"instruction": "How many patients have 'Quorvex' as their city?", "check": {"db_id": "/etc/passwd", "gold_sql": "SELECT 'Quorvex'"}},
        {"instruction": "x" * 100_000, "check": {"db_id": "clinic_wide_0", "gold_sql": "y"}},
        {"instruction": ["not text"], "check": "nothing"},
        "a string",
    ],
)  # fmt: skip
def test_a_pool_example_it_cannot_edit_gives_way_to_a_training_question_of_its_own(example):
    shown, _, _, _, editor = edit([example])
    assert editor.value and editor.values and editor.value not in editor.values
    assert editor.task["question"] in shown and "/etc/passwd" not in shown
    assert not held_out_question(editor.task)


def test_the_scripted_editor_proposes_tasks_the_stages_pass_and_never_a_held_out_one():
    async def play(seed):
        env = toolgym.make("toolgym/EditSQL-v0", **ARGS)
        await env.areset(seed=seed)
        _, _, done, _, info = await env.astep(env.unwrapped.scripted_action())
        await env.aclose()
        return done, info.get("result")

    for seed in range(12):
        done, result = asyncio.run(play(seed))
        assert done and verdict(result) is None, (seed, result)


def test_the_sql_domain_s_references_are_training_questions():
    references = SQLDomain(EnvRef("sql", "toolgym/SQL-v0", ARGS)).references(40)
    assert len({r.instruction for r in references}) >= 30
    assert not any(
        held_out_question({"db_id": r.check["db_id"], "question": r.instruction})
        for r in references
    )


def reset_with(task):
    async def play():
        env = toolgym.make("toolgym/EditSQL-v0", **ARGS)
        try:
            obs, _ = await env.areset(seed=3, options={"task": task})
            return obs[-1]["content"], env.unwrapped
        finally:
            await env.aclose()

    return asyncio.run(play())


def test_a_client_s_own_sql_question_is_the_one_shown():
    """A reset task that is a SQL task (a client of the served env with a question of its
    own) is edited, not swapped for the env's own question."""
    example = pool_example()
    own = {"db_id": example["check"]["db_id"], "question": example["instruction"],
           "gold_sql": example["check"]["gold_sql"]}  # fmt: skip
    shown, editor = reset_with(own)
    assert f"Question: {own['question']}\nSQL: {own['gold_sql']}" in shown
    assert editor.task["question"] == own["question"] and editor.value in own["question"]


@pytest.mark.parametrize(
    ("task", "says"),
    [
        ({"question": "How many rows?"}, "a SQL task needs 'db_id', 'question', 'gold_sql'"),
        ({"colour": "red"}, "a SQL task needs"),
        ({"db_id": "/etc/passwd", "question": "How many patients have 'Quorvex' as their city?",
          "gold_sql": "SELECT 'Quorvex'"}, "its database '/etc/passwd' is not one of this env's"),
        ({"db_id": "clinic_wide_0", "question": "How many rows?", "gold_sql": "SELECT 1"},
         "quotes a value"),
        ({"db_id": "clinic_wide_0", "question": "x" * 100_000, "gold_sql": "y"}, "at most 2000"),
        ({"db_id": ["clinic_wide_0"], "question": "q", "gold_sql": "y"}, "must be strings"),
    ],
)  # fmt: skip
def test_a_client_question_it_cannot_edit_is_refused_in_words(task, says):
    with pytest.raises(toolgym.errors.ConfigError, match="cannot edit|needs") as refused:
        reset_with(task)
    assert says in str(refused.value) and len(str(refused.value)) < 400


def test_a_held_out_client_question_is_refused():
    held, _, _ = held_out_edit()
    question = {k: held[k] for k in ("db_id", "question", "gold_sql")}
    with pytest.raises(toolgym.errors.ConfigError, match="held out for evaluation"):
        reset_with(question)
