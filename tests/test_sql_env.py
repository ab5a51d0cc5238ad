"""toolgym/SQL-v0 as a user meets it: the oracle scores 100% on SQLite and PostgreSQL, user
tasks in the Spider/BIRD shape, the tag style, rewards, state keys, and hostile queries."""

from __future__ import annotations

import hashlib
import json
import sqlite3

import pytest

import toolgym
from toolgym.envs.sql.access import generated_folder
from toolgym.envs.sql.generate import build, write_sqlite
from toolgym.envs.sql.questions import TEMPLATES, generate_question
from toolgym.errors import ConfigError
from toolgym.tools.tool import InfraError


def call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def play_oracle(env, seeds) -> list[float]:
    rewards = []
    for seed in seeds:
        env.reset(seed=seed)
        _, reward, terminated, _, info = env.step(env.unwrapped.scripted_action())
        assert terminated and not info.get("infra_error"), info
        rewards.append(reward)
    return rewards


def test_the_oracle_scores_every_generated_question_on_sqlite():
    env = toolgym.make("toolgym/SQL-v0")
    try:
        seeds = range(300)
        assert play_oracle(env, seeds) == [1.0] * 300
        assert {generate_question(s).template for s in seeds} == set(TEMPLATES)
    finally:
        env.close()


def test_the_oracle_scores_every_generated_question_on_postgres(postgres):
    env = toolgym.make("toolgym/SQL-v0", backend="postgres", dsn=postgres.reader_dsn)
    try:
        assert play_oracle(env, range(150)) == [1.0] * 150
        obs, _ = env.reset(seed=5)
        assert "FOREIGN KEY" in obs[1]["content"] and "example rows" in obs[1]["content"]
    finally:
        env.close()


def test_user_tasks_in_the_spider_shape(tmp_path):
    folder = tmp_path / "database"
    write_sqlite(build("library_1"), folder / "lib" / "lib.sqlite")  # Spider's layout
    tasks = tmp_path / "dev.jsonl"
    rows = [
        {"db_id": "lib", "question": "How many books are there?", "gold_sql": "SELECT COUNT(*) FROM books",
         "evidence": "a book is a row of books"},
        {"db_id": "lib", "question": "Titles of the three cheapest books, cheapest first?",
         "gold_sql": "SELECT title FROM books ORDER BY price LIMIT 3"},
    ]  # fmt: skip
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = toolgym.make("toolgym/SQL-v0", tasks=str(tasks), databases=str(folder))
    try:
        obs, _ = env.reset(options={"task": rows[0]})
        assert "Evidence: a book is a row of books" in obs[1]["content"]
        _, reward, *_ = env.step(call("submit", query="select count(id) from books"))
        assert reward == 1.0
        env.reset(options={"task": rows[1]})
        # the right titles in the wrong order: the gold query sorts, so order counts
        _, reward, *_ = env.step(
            call("submit", query="SELECT title FROM books ORDER BY price LIMIT 3")
        )
        assert reward == 1.0
        env.reset(options={"task": rows[1]})
        wrong = "SELECT title FROM (SELECT title, price FROM books ORDER BY price LIMIT 3) ORDER BY price DESC"
        obs, reward, terminated, *_ = env.step(call("submit", query=wrong))
        assert (reward, terminated) == (0.0, True) and "Incorrect" in obs[-1]["content"]
    finally:
        env.close()


def test_a_missing_database_is_an_infrastructure_error(tmp_path):
    env = toolgym.make("toolgym/SQL-v0", databases=str(tmp_path))
    try:
        with pytest.raises(InfraError, match="no database"):
            env.reset(options={"task": {"db_id": "gone", "question": "?", "gold_sql": "SELECT 1"}})
    finally:
        env.close()


def test_rewards_plain_and_shaped():
    for shaped, failing in ((False, 0.0), (True, -1.0)):
        env = toolgym.make("toolgym/SQL-v0", shaped=shaped)
        try:
            env.reset(seed=1)
            _, reward, terminated, *_ = env.step(call("submit", query="SELEC oops"))
            assert (reward, terminated) == (failing, True)
            env.reset(seed=1)
            _, reward, *_ = env.step(call("submit", query="SELECT 12345"))
            assert reward == 0.0
            # a query whose own error names a database failure is still the query's failure
            for query in ("SELECT * FROM corrupt", 'SELECT "disk i/o" FROM "out of memory"'):
                env.reset(seed=1)
                _, reward, terminated, _, info = env.step(call("submit", query=query))
                assert (reward, terminated) == (failing, True) and not info.get("infra_error")
        finally:
            env.close()


def test_equal_results_share_a_state_and_different_ones_do_not():
    env = toolgym.make("toolgym/SQL-v0")
    try:
        keys = []
        for query in ("SELECT COUNT(*) FROM orders", "select count(id) from orders", "SELECT 1"):
            _, info = env.reset(seed=7, options={"task": generate_question(11, ["shop_0"]).task()})
            first = info["state_key"]
            _, _, _, _, info = env.step(call("run_sql", query=query))
            keys.append(info["state_key"])
        assert keys[0] == keys[1] != keys[2] != first
    finally:
        env.close()


def test_results_are_cut_with_a_notice_and_turns_are_counted():
    env = toolgym.make("toolgym/SQL-v0", max_rows_shown=4, max_turns=3)
    try:
        env.reset(options={"task": generate_question(3, ["shop_1"]).task()})
        obs, *_ = env.step(call("run_sql", query="SELECT * FROM orders"))
        text = obs[-1]["content"]
        assert "(4 of 900 rows shown)" in text and "[2 turns left]" in text
        assert len(text.splitlines()) == 1 + 4 + 2
    finally:
        env.close()


def test_the_tag_style():
    env = toolgym.make("toolgym/SQL-v0", style="tags")
    try:
        obs, _ = env.reset(options={"task": generate_question(4, ["clinic_0"]).task()})
        assert "<solution>" in obs[0]["content"]
        obs, reward, terminated, *_ = env.step(
            "Let me look. <sql>SELECT COUNT(*) FROM visits</sql>"
        )
        assert obs[-1]["content"].startswith("<observation>") and "900" in obs[-1]["content"]
        assert not terminated
        obs, reward, terminated, *_ = env.step(env.unwrapped.scripted_action())
        assert env.unwrapped.scripted_action().startswith("<solution>")
        assert (reward, terminated) == (1.0, True)
    finally:
        env.close()


def test_a_slipping_solver_is_wrong_about_as_often_as_asked():
    """The weaker demonstrator of the SQL recipe: with solver_slips=0.5 it writes another of
    the domain's values in about half the episodes, and is graded wrong there (a swapped value
    can match by chance, e.g. two cities with as many customers)."""
    templates = ["filter_count", "filter_list", "aggregate_state", "ordering"]
    env = toolgym.make("toolgym/SQL-v0", style="tags", templates=templates, solver_slips=0.5)
    try:
        slipped, rewards = 0, []
        for seed in range(200):
            env.reset(seed=seed)
            gold = env.unwrapped.task["gold_sql"]
            action = env.unwrapped.scripted_action()
            slipped += f"<solution>{gold}</solution>" != action
            rewards.append(env.step(action)[1])
        assert 80 <= slipped <= 120, slipped
        assert 200 - slipped <= sum(rewards) <= 200 - slipped + 10, (slipped, sum(rewards))
    finally:
        env.close()
    with pytest.raises(ConfigError, match="solver_slips"):
        toolgym.make("toolgym/SQL-v0", solver_slips=1.5)


def test_slips_swap_a_domain_value_for_another_of_its_column():
    import random

    from toolgym.envs.sql.slips import slip

    sql = "SELECT COUNT(*) FROM customers WHERE city = 'Lisbon'"
    swapped = slip(sql, "shop_0", random.Random(0))
    city = swapped.split("'")[1]
    assert swapped == sql.replace("Lisbon", city) and city != "Lisbon"
    assert city in build("shop_0").domain.places
    named = "SELECT name FROM customers WHERE name = 'Ana Berg'"  # not a domain value
    assert slip(named, "shop_0", random.Random(0)) == named
    assert slip(sql, "my_own_db", random.Random(0)) == sql  # a user's database: no slips
    wide = build("clinic_wide_2")
    place = wide.vocabulary.places[0]
    sql = f"SELECT COUNT(*) FROM patients WHERE city = '{place}'"
    other = slip(sql, "clinic_wide_2", random.Random(0)).split("'")[1]
    assert other != place and other in wide.vocabulary.places


def test_made_up_values_are_the_databases_own_and_held_out_ones_are_never_wide():
    """values=wide: each database names its own made-up places, kinds and states, so across
    the 100 databases the values are too many to learn by heart; values=held_out draws from
    the other side of the words' hash, so no held-out database shares a value with a wide one.
    The domains' own databases are unchanged by either (their rows are those of before)."""
    from toolgym.envs.sql.generate import default_db_ids
    from toolgym.envs.sql.values import is_held_out

    def words(values: str) -> set[str]:
        return {
            w
            for d in default_db_ids(values=values)
            for c in build(d).vocabulary.columns()
            for w in c
        }

    wide, held_out = words("wide"), words("held_out")
    assert len(wide) > 1500 and len(held_out) > 1500 and not wide & held_out
    assert not any(is_held_out(w) for w in wide) and all(is_held_out(w) for w in held_out)
    assert not wide & words("domain")
    db = build("shop_wide_7")
    assert {p[2] for p in db.people} <= set(db.vocabulary.places)
    assert {i[2] for i in db.items} <= set(db.vocabulary.kinds)
    assert {e[5] for e in db.events} <= set(db.vocabulary.states)
    assert build("shop_0").vocabulary.places == build("shop_0").domain.places
    rows = repr([build(d).tables() for d in default_db_ids()]).encode()
    assert hashlib.sha256(rows).hexdigest()[:16] == "8776de88535d767c"  # the rows of before


def test_an_env_on_made_up_values_is_solved_by_copying_and_says_what_it_was_given():
    templates = ["filter_count", "filter_list", "aggregate_state", "ordering"]
    for values in ("wide", "held_out"):
        env = toolgym.make("toolgym/SQL-v0", style="tags", templates=templates, values=values)
        try:
            assert play_oracle(env, range(40)) == [1.0] * 40
            env.reset(seed=3)
            task = env.unwrapped.task
            assert f"_{values}_" in task["db_id"]
            value = task["gold_sql"].split("'")[1]
            assert f"'{value}'" in task["question"]  # copied from the question, or not at all
        finally:
            env.close()
    with pytest.raises(ConfigError, match="values 'made_up'"):
        toolgym.make("toolgym/SQL-v0", values="made_up")
    with pytest.raises(ConfigError, match="db_ids or values"):
        toolgym.make("toolgym/SQL-v0", values="wide", db_ids=["shop_0"])
    with pytest.raises(ConfigError, match="shop_wide_0"):
        build("shop_unseen_0")
    with pytest.raises(ConfigError, match="unknown question templates"):
        toolgym.make("toolgym/SQL-v0", templates=[["filter_count"]])


def test_a_schema_without_sample_rows_is_the_create_statements_alone():
    env = toolgym.make("toolgym/SQL-v0", sample_rows=0)
    try:
        task = generate_question(1, ["shop_0"]).task()
        obs, _ = env.reset(options={"task": task})
        schema = obs[-1]["content"]
        assert schema.count("CREATE TABLE") == 3 and "example rows" not in schema
        assert schema.endswith(f"Question: {task['question']}")  # last, next to the answer
        assert "This ends the episode." in obs[0]["content"]  # a wrapped docstring, whole
    finally:
        env.close()
    with pytest.raises(ConfigError, match="sample_rows"):
        toolgym.make("toolgym/SQL-v0", sample_rows=-1)


def test_hostile_queries_through_the_env_leave_the_file_unchanged():
    env = toolgym.make("toolgym/SQL-v0", timeout_s=0.5)
    try:
        env.reset(options={"task": generate_question(2, ["shop_0"]).task()})
        path = generated_folder() / "shop_0.sqlite"
        before = hashlib.sha256(path.read_bytes()).hexdigest()
        env.unwrapped.max_turns = 100
        for query in ("DELETE FROM orders", "DROP TABLE customers", "ATTACH 'x.db' AS x",
                      "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r) SELECT max(n) FROM r",
                      "UPDATE products SET price = 0", "PRAGMA writable_schema = 1"):  # fmt: skip
            obs, _, terminated, _, info = env.step(call("run_sql", query=query))
            assert obs[-1]["content"].startswith("Error:") and not terminated, query
            assert info["valid_action"] and not info.get("infra_error")
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT COUNT(*) FROM orders").fetchone() == (900,)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    finally:
        env.close()


def test_generated_files_from_the_cli_are_user_tasks(cli, tmp_path):
    result = cli(
        "sql",
        "generate",
        "--out",
        str(tmp_path),
        "--questions",
        "40",
        "--databases",
        "shop_1,school_0",
    )
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in (tmp_path / "questions.jsonl").read_text().splitlines()]
    assert len(rows) == 40 and {r["db_id"] for r in rows} == {"shop_1", "school_0"}
    env = toolgym.make("toolgym/SQL-v0", tasks=str(tmp_path / "questions.jsonl"),
                       databases=str(tmp_path / "databases"))  # fmt: skip
    try:
        for row in rows:
            env.reset(options={"task": row})
            _, reward, *_ = env.step(env.unwrapped.scripted_action())
            assert reward == 1.0, row
    finally:
        env.close()


def test_serve_postgres_from_the_cli(cli, tmp_path):
    import tempfile

    from conftest import free_port

    folder = tempfile.mkdtemp(prefix="toolgym-pg-cli-")
    port = str(free_port())
    started = cli(
        "sql",
        "serve-postgres",
        "--dir",
        folder,
        "--port",
        port,
        "--databases",
        "clinic_1",
        "--detach",
    )
    assert started.returncode == 0, started.stderr
    dsn = next(
        line.strip() for line in started.stdout.splitlines() if "user=toolgym_reader" in line
    )
    try:
        env = toolgym.make("toolgym/SQL-v0", backend="postgres", dsn=dsn, db_ids=["clinic_1"])
        try:
            assert play_oracle(env, range(20)) == [1.0] * 20
        finally:
            env.close()
    finally:
        stopped = cli("sql", "stop-postgres", "--dir", folder)
        assert stopped.returncode == 0, stopped.stderr


def test_a_server_that_dies_mid_episode_is_masked_not_scored():
    import shutil
    import tempfile

    from conftest import free_port
    from toolgym.envs.sql.postgres_server import start_postgres

    folder = tempfile.mkdtemp(prefix="toolgym-pg-dies-")
    server = start_postgres(folder, free_port())
    try:
        server.load([build("shop_0")])
        env = toolgym.make(
            "toolgym/SQL-v0", backend="postgres", dsn=server.reader_dsn, db_ids=["shop_0"]
        )
        try:
            env.reset(seed=0)
            server.stop()
            obs, reward, terminated, _, info = env.step(
                call("run_sql", query="SELECT COUNT(*) FROM orders")
            )
            assert info["infra_error"] and reward == 0.0 and not terminated
            _, reward, _, _, info = env.step(env.unwrapped.scripted_action())
            assert info["infra_error"]
        finally:
            env.close()
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


def test_serve_postgres_refuses_clearly(cli, tmp_path, postgres):
    import tempfile

    a_file = tmp_path / "a_file"
    a_file.write_text("")
    for args, message in (
        (("--dir", str(a_file)), "is a file"),
        (("--dir", tempfile.mkdtemp(prefix="toolgym-pg-busy-"), "--port", str(postgres.port)),
         "did not start on port"),
        (("--dir", str(tmp_path / "x"), "--databases", "shop_0,../etc"), "no generated database"),
    ):  # fmt: skip
        result = cli("sql", "serve-postgres", *args, "--detach")
        assert result.returncode != 0 and message in result.stdout + result.stderr, result
        assert "Traceback" not in result.stdout + result.stderr


def test_generated_databases_are_read_only_from_a_folder_only_we_can_write():
    from toolgym.envs.sql.access import ensure_generated
    from toolgym.errors import ConfigError

    folder = ensure_generated(["shop_0"])
    try:
        folder.chmod(0o777)
        with pytest.raises(ConfigError, match="cannot be trusted"):
            ensure_generated(["shop_0"])
    finally:
        folder.chmod(0o755)
    assert ensure_generated(["shop_0"]) == folder
