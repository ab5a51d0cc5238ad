"""`toolgym view` driven as a user drives it, in headless Chromium (Playwright with the
system browser): the runs of the quickstart, self-play, a GUI env with screenshots and an
async run open with no console error; an episode's shaded tokens carry the stored
advantages; filters and paging; a run in progress updates; a damaged file shows what it
can; hostile text stays text; and the server serves nothing but the runs it was given."""

from __future__ import annotations

import json
import re
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import run_cli, run_ok, serve
from toolgym.agents.trajectory import read_jsonl
from toolgym.config import load_config
from toolgym.envs.gui.browser import find_chromium
from toolgym.training.config import TrainConfig
from toolgym.training.trainer import Trainer

pytestmark = pytest.mark.timeout(600)


QUICKSTART = "{size: 3, n_doors: 0, far_goal: false, max_turns: 6}"
"""The quickstart's mazes, which its SFT policy solves about half the time."""


def train(run_dir, *settings):
    Trainer(load_config(TrainConfig, None, [f"run_dir={run_dir}", "tensorboard=false",
                                            *settings])).run()  # fmt: skip
    return run_dir


@pytest.fixture(scope="module")
def runs(quickstart_run, tool_calling_model_dir, tmp_path_factory):
    """The quickstart's RL run, and a self-play, a GUI (screenshots), an async run and one
    paid a proxy reward beside the env's (from the quickstart's SFT policy, which solves some
    mazes and fails others, so the proxy's agreement with success has both to go on)."""
    root = tmp_path_factory.mktemp("viewed")
    small = ["rollout.tasks_per_step=2", "rollout.rollouts_per_task=2", "rollout.max_tokens=16",
             "optim.micro_batch_size=2", "eval.episodes=2", "rollouts_kept=8"]  # fmt: skip
    model = f"model={tool_calling_model_dir}"
    vlm = root / "vlm"
    run_ok("model", "init", "--arch", "qwen2_vl", "--out", str(vlm))
    selfplay = [
        "env.kwargs={size: 3, n_doors: 0, max_turns: 2}",
        "selfplay={domain: maze, "
        "proposals: 3, references: 2, solver_groups: 2, proposer: {max_turns: 1}}",
    ]
    gui = ["env.id=toolgym/miniwob.click-button-v0", "env.kwargs={screenshot: true, max_turns: 2}"]
    mazes = ["mode=async", "env.kwargs={size: 3, max_turns: 3}"]
    return {
        "quickstart": quickstart_run[0] / "rl",
        "selfplay": train(root / "selfplay", model, "steps=1", *small, *selfplay),
        "gui": train(root / "gui", f"model={vlm}", "steps=1", *small, *gui),
        "async": train(root / "async", model, "steps=2", *small, *mazes),
        "proxied": train(root / "proxied", f"model={quickstart_run[0] / 'sft'}", "steps=2",
                         *small, "rollout.tasks_per_step=8", "rollout.max_tokens=32",
                         "rollout.tool_schemas_in_prompt=false", f"env.kwargs={QUICKSTART}",
                         "rewards=[{source: env}, {source: format, kwargs: {invalid: -0.2}}]"),
    }  # fmt: skip


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=find_chromium(), headless=True)
        yield chromium
        chromium.close()


class Page:
    """A page of the viewer with every console error and uncaught exception it logs."""

    def __init__(self, browser, url, width=1280):
        self.page = browser.new_page(viewport={"width": width, "height": 900})
        self.page.set_default_timeout(60_000)  # a loaded 2-core machine renders slowly
        self.errors: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", lambda d: self.errors.append(f"a dialog opened: {d.message}"))
        self.url = url

    def open(self, route, ready):
        self.page.goto(f"{self.url}/#{route}")
        self.page.wait_for_selector(ready)
        return self.page


@pytest.fixture(scope="module")
def viewer(runs):
    yield from serve(["view", *map(str, runs.values()), "--no-open"], "viewer")


def test_each_kind_of_run_opens_on_every_page_with_no_console_error(runs, viewer, browser):
    page = Page(browser, viewer)
    home = page.open("/", ".chart")
    assert home.locator("table tr").count() == 1 + len(runs)
    for number, (kind, run) in enumerate(runs.items()):
        shown = page.open(f"/run/{number}", "#steps a")
        assert run.name in shown.inner_text("main")
        if kind == "quickstart":  # its start and end for every eval set, as the summary has them
            summary = json.loads((run / "summary.json").read_text())
            assert "held out (eval and test pooled) at the start" in shown.inner_text("main")
            rows = shown.locator("#eval-sets tr").all_inner_texts()
            assert [r.split("\t")[:2] for r in rows[1:]] == [
                ["eval", "held out"], ["test", "held out"], ["4x4", "transfer"]
            ]  # fmt: skip
            assert f"{summary['start']['success']:.3f}" in shown.inner_text("main")
        step = read_jsonl(sorted((run / "rollouts").iterdir())[-1])
        last = int(sorted((run / "rollouts").iterdir())[-1].stem.removeprefix("step_"))
        listed = page.open(f"/run/{number}/step/{last}", "#episodes tr.episode-row")
        assert listed.locator("tr.episode-row").count() == len(step), kind
        record = [json.loads(r) for r in (run / "metrics.jsonl").read_text().splitlines()]
        played = next(r for r in record if r["step"] == last)["rollout/episodes"]
        assert f"the step: {played} episodes played" in listed.inner_text("#figures"), kind
        assert f"({len(step)} kept of {played} played)" in listed.inner_text("#shown"), kind
        episode = page.open(f"/run/{number}/step/{last}/episode/0", ".turn")
        assert episode.locator(".turn").count() == len(step[0].steps), kind
        if kind == "gui":  # the screenshots the policy saw
            assert episode.locator("img.shot").count() == len(step[0].images) > 0
        if kind == "selfplay":  # its curves: proposals kept, the pool
            curves = page.open(f"/run/{number}", ".chart[data-keys^='groups/valid']")
            assert curves.locator(".chart[data-keys^='groups/pool']").count() == 1
            assert {t.role for t in step} == {"proposer", "solver"}
            chosen = page.open(f"/run/{number}/step/{last}?role=proposer", "#episodes")
            assert chosen.locator("tr.episode-row").count() == sum(
                t.role == "proposer" for t in step
            )
        if kind == "async":
            assert "staleness" in episode.inner_text(".turn")
        if kind == "proxied":  # the proxy's agreement with success, banded by its interval
            curves = page.open(f"/run/{number}", ".chart[data-keys^='proxy/*/agreement']")
            chart = curves.locator(".chart[data-keys^='proxy/*/agreement']")
            assert "proxy/format/agreement" in chart.inner_text()
            assert "rollout/success" in chart.inner_text()
            assert "agreement_low" not in chart.inner_text()  # a band, not a series
            assert chart.locator("path[fill-opacity]").count() >= 1
            scores = curves.locator(".chart[data-keys='proxy/*/score']").inner_text()
            assert "proxy/format/score" in scores
    assert page.errors == []


@pytest.mark.parametrize("width", [1280, 800])
def test_the_pages_read_at_a_laptops_width_and_a_narrow_one(runs, viewer, browser, width):
    """No console error; every chart fills its box, inside the window, with ticks on both
    axes whose labels stay short (values too small to read are drawn in a named power of
    ten); a step page states the step's own figures."""
    page = Page(browser, viewer, width)
    for route, ready in (("/", ".chart"), ("/run/0", "#steps a")):
        shown = page.open(route, ready)
        sizes = shown.eval_on_selector_all(
            ".chart",
            """charts => charts.map((c) => {
            const svg = c.querySelector("svg").getBoundingClientRect();
            return {box: c.clientWidth, svg: svg.width, right: c.getBoundingClientRect().right,
                    y: [...c.querySelectorAll("text.y-label")].map((t) => t.textContent),
                    x: [...c.querySelectorAll("text.x-label")].map((t) => t.textContent)};
        })""",
        )
        assert len(sizes) >= 8, route
        for chart in sizes:
            assert chart["svg"] >= chart["box"] - 12 and chart["right"] <= width, chart
            assert len(chart["y"]) >= 3 and len(chart["x"]) >= 2, chart
            assert all(len(label) <= 6 for label in chart["y"] + chart["x"]), chart
    step = int(sorted((runs["quickstart"] / "rollouts").iterdir())[-1].stem.removeprefix("step_"))
    listed = page.open(f"/run/0/step/{step}", "#figures")
    assert "episodes played" in listed.inner_text("#figures")
    assert page.errors == []


def test_a_page_left_before_its_answer_came_never_covers_the_one_opened_next(runs, viewer, browser):
    """A step opened while the run page still waits for its records: the run page's answer,
    come late, is dropped, not drawn over the step page the user moved to."""
    page = Page(browser, viewer)
    held = []
    page.page.route(re.compile(r"/api/runs/0/records"), lambda route: held.append(route))
    page.page.goto(f"{viewer}/#/run/0")
    for _ in range(400):  # the run page asks for its records, and waits
        if held:
            break
        page.page.wait_for_timeout(50)
    assert held, "the run page never asked for its records"
    step = int(sorted((runs["quickstart"] / "rollouts").iterdir())[-1].stem.removeprefix("step_"))
    listed = page.open(f"/run/0/step/{step}", "#figures")
    with listed.expect_request_finished(lambda request: "/records" in request.url):
        held[0].continue_()
    listed.wait_for_timeout(500)  # what the late answer would draw, it draws at once
    assert "episodes played" in listed.inner_text("#figures")
    assert listed.locator("#steps").count() == 0
    assert page.errors == []


def test_shaded_tokens_carry_the_stored_advantages(runs, viewer, browser):
    """On the first kept episode given a non-zero advantage (a kept group can carry no
    signal at all: its advantages all 0)."""
    kept = [(p, read_jsonl(p)) for p in sorted((runs["quickstart"] / "rollouts").iterdir())]
    path, stored, index = next(
        (p, episodes, k) for p, episodes in kept for k, t in enumerate(episodes)
        if any(s.advantage for s in t.steps)
    )  # fmt: skip
    step = int(path.stem.removeprefix("step_"))
    page = Page(browser, viewer).open(f"/run/0/step/{step}/episode/{index}", ".token")
    turns = page.locator(".turn")
    for k, s in enumerate(stored[index].steps):
        tokens = turns.nth(k).locator(".token")
        assert tokens.count() == s.response_end - s.response_start
        shaded = tokens.evaluate_all("ts => ts.map(t => Number(t.dataset.advantage))")
        assert shaded == [pytest.approx(s.advantage)] * len(shaded)
        text = "".join(tokens.evaluate_all("ts => ts.map(t => t.textContent)"))
        assert text.removesuffix("<|im_end|>") == s.action  # what the model wrote, and its end
    # the turns that shared an anchor: each from where the actions differ, whole on demand
    mates = page.locator("details.mate")
    assert mates.count() > 0  # GiGPO's anchors: the group's episodes met the same states
    for k in range(mates.count()):
        full = mates.nth(k).locator("pre.mate-action").text_content()
        shown = mates.nth(k).locator(".mate-differs").text_content()
        assert shown.strip("…") in re.sub(r"\s+", " ", full) and full.strip()


def many_episodes(runs, tmp_path):
    """A copy of the quickstart run whose last kept step holds 120 episodes: 40 of them
    successes with a searchable word, and one line torn in the middle of the file."""
    run = shutil.copytree(runs["quickstart"], tmp_path / "big")
    path = sorted((run / "rollouts").iterdir())[-1]
    line = json.loads(path.read_text().splitlines()[0])
    lines = []
    for k in range(120):
        episode = json.loads(json.dumps(line))
        episode["id"] = f"copy:{k}"
        for step in episode["steps"]:
            step["reward"] = 0.0
        episode["steps"][-1]["reward"] = 1.0 if k % 3 == 0 else 0.0
        episode["solved"] = k % 3 == 0
        if k % 3 == 0:
            episode["steps"][-1]["action"] += " zebra"
        lines.append(json.dumps(episode))
    lines.insert(60, lines[60][: len(lines[60]) // 2])
    path.write_text("\n".join(lines) + "\n")
    return run, int(path.stem.removeprefix("step_"))


def test_filters_paging_and_a_damaged_line(runs, browser, tmp_path):
    run, step = many_episodes(runs, tmp_path)
    for url in serve(["view", str(run), "--no-open"], "viewer"):
        page = Page(browser, url)
        listed = page.open(f"/run/0/step/{step}", "#episodes")
        assert listed.locator("tr.episode-row").count() == 50
        assert "1-50 of 120 matching (120 kept" in listed.inner_text("#shown")
        assert "skipped 1 unreadable line: line 61: JSONDecodeError" in listed.inner_text(
            "#skipped"
        )
        listed.click("#next")
        listed.wait_for_selector("text=51-100 of 120")
        listed.click("#next")
        listed.wait_for_selector("text=101-120 of 120")
        assert listed.locator("tr.episode-row").count() == 20 and listed.is_disabled("#next")
        listed.select_option("select[name=success]", "yes")
        listed.click("button[type=submit]")
        listed.wait_for_selector("text=1-40 of 40 matching")
        listed.fill("input[name=q]", "ZEBRA")
        listed.select_option("select[name=success]", "")
        listed.fill("input[name=min]", "1")
        listed.click("button[type=submit]")
        listed.wait_for_selector("text=1-40 of 40 matching")
        listed.fill("input[name=min]", "2")
        listed.click("button[type=submit]")
        listed.wait_for_selector("text=0-0 of 0 matching")
        assert page.errors == []


def test_a_run_in_progress_updates_its_curves(runs, browser, tmp_path):
    run = shutil.copytree(runs["async"], tmp_path / "live")
    for url in serve(["view", str(run), "--no-open"], "viewer"):
        page = Page(browser, url)
        shown = page.open("/run/0", ".chart")
        steps = shown.locator(".chart[data-keys^='rollout/success'] text.x-label")
        assert steps.all_text_contents() == ["1", "2"]  # a tick a step, whole numbers
        last = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
        with (run / "metrics.jsonl").open("a") as f:
            f.write(json.dumps(last | {"step": 3, "rollout/success": 0.5}) + "\n")
        shown.wait_for_selector(
            ".chart[data-keys^='rollout/success'] text.x-label:text-is('3')", timeout=15_000
        )
        assert "updated" in shown.inner_text("#live") and page.errors == []


def test_hostile_text_in_an_episode_stays_text(runs, browser, tmp_path):
    run = shutil.copytree(runs["async"], tmp_path / "hostile")
    path = sorted((run / "rollouts").iterdir())[-1]
    line = json.loads(path.read_text().splitlines()[0])
    attack = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
    line["steps"][0]["action"] = attack
    line["steps"][0]["observation"] = [{"role": "tool", "name": "<b>x</b>", "content": attack}]
    line["messages"] = [{"role": "user", "content": attack}]
    line |= {"answer": attack, "verdict": "Correct.", "scores": {"result": 1.0}}  # a harness's
    path.write_text(json.dumps(line) + "\n")
    step = int(path.stem.removeprefix("step_"))
    for url in serve(["view", str(run), "--no-open"], "viewer"):
        page = Page(browser, url)
        shown = page.open(f"/run/0/step/{step}/episode/0", ".turn")
        assert shown.locator("main img, main script").count() == 0
        text = shown.inner_text("main")
        assert text.count(attack) >= 3  # the message, the tool's answer and the agent's answer
        assert "the checker Correct." in text and "result 1" in text
        assert page.errors == []


def get(url, host=None):
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def test_the_server_serves_only_the_runs_it_was_given(runs, viewer, tmp_path):
    assert viewer.startswith("http://127.0.0.1:")
    port = viewer.rsplit(":", 1)[1]  # a second viewer on a port that is taken: one line
    taken = run_cli("view", str(runs["async"]), "--port", port, "--no-open")
    assert taken.returncode == 2 and "Traceback" not in taken.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in taken.stderr
    for path in ("/static/..%2F..%2F..%2Fetc%2Fpasswd", "/static/%2E%2E/runs.py",
                 "/static/app.js%00.html", "/api/runs/9/records", "/api/runs/0/steps/999999",
                 "/api/runs/0/steps/1/episodes/99999", "/../../etc/passwd"):  # fmt: skip
        status, body = get(viewer + path)
        assert status == 404, path
    assert get(viewer + "/api/runs/0/steps/x")[0] == 404
    status, body = get(viewer + "/api/runs/0/steps/1?offset=abc")
    assert status == 400 and "offset must be a whole number" in body["error"]
    status, body = get(viewer + "/api/runs", host="attacker.example")  # a renamed host
    assert status == 403 and "attacker.example" in body["error"]
    run = shutil.copytree(runs["async"], tmp_path / "linked")
    secret = tmp_path / "secret.jsonl"
    shutil.copy(sorted((run / "rollouts").iterdir())[0], secret)
    (run / "rollouts" / "step_000007.jsonl").symlink_to(secret)
    for url in serve(["view", str(run), "--no-open"], "viewer"):
        status, body = get(url + "/api/runs/0/steps/7")
        assert status == 404 and "outside the run directory" in body["error"]


def strict_json(url):
    """The body as a browser's JSON.parse reads it: NaN and Infinity are not JSON."""

    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    with urllib.request.urlopen(url, timeout=30) as answer:
        return answer.status, json.loads(answer.read(), parse_constant=refuse)


def test_hostile_run_files_are_served_as_json_a_browser_reads(runs, tmp_path):
    """NaN and Infinity in the metrics, a line of the wrong shape or nested 100,000 deep, a
    summary that links outside the run, and episode pages opened together on a fresh viewer:
    each is answered, and no run drops from the listing."""
    import concurrent.futures

    run = shutil.copytree(runs["async"], tmp_path / "odd")
    lines = (run / "metrics.jsonl").read_text().splitlines()
    last = json.loads(lines[-1])
    lines.append(json.dumps(last | {"step": 3, "loss/policy": float("nan"),
                                    "rollout/success": float("inf")}))  # fmt: skip
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    outside = tmp_path / "elsewhere.json"
    outside.write_text('{"status": "finished"}')
    (run / "summary.json").unlink(missing_ok=True)
    (run / "summary.json").symlink_to(outside)
    damaged = shutil.copytree(runs["async"], tmp_path / "damaged")
    kept = (damaged / "metrics.jsonl").read_text().splitlines()
    deep = '{"a": ' * 100_000 + "1" + "}" * 100_000
    (damaged / "metrics.jsonl").write_text("\n".join([kept[0], "[1, 2]", deep, *kept[1:]]) + "\n")
    step = int(sorted((run / "rollouts").iterdir())[-1].stem.removeprefix("step_"))
    for url in serve(["view", str(run), str(damaged), "--no-open"], "viewer"):
        pages = [f"{url}/api/runs/0/steps/{step}/episodes/{k % 2}" for k in range(8)]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:  # a fresh viewer, no tokenizer
            assert [s for s, _ in pool.map(strict_json, pages)] == [200] * 8
        status, listed = strict_json(f"{url}/api/runs")
        assert status == 200 and [r["name"] for r in listed] == ["odd", "damaged"]
        assert listed[0]["summary"] is None  # it lies outside the run
        status, records = strict_json(f"{url}/api/runs/0/records")
        assert status == 200 and records[-1]["step"] == 3
        assert records[-1]["loss/policy"] is None and records[-1]["rollout/success"] is None
        status, records = strict_json(f"{url}/api/runs/1/records")
        assert (status, records) == (200, [])


def test_token_pieces_cost_a_turns_length_not_its_square():
    """Each token is decoded with the few before it: the characters decoded over a turn
    grow with its length, and the pieces still join into the turn's text."""
    from toolgym.viewer.runs import PIECE_CONTEXT, Run

    class Counting:
        decoded = 0

        def decode(self, ids):
            Counting.decoded += len(ids)
            return "".join(chr(97 + i % 26) for i in ids)

    run = Run(path=Path("/nonexistent"), name="x")
    run.tokenizer = Counting()
    ids = list(range(5000))
    pieces = run.token_pieces(ids)
    assert "".join(pieces) == Counting().decode(ids)
    assert Counting.decoded <= 2 * len(ids) * (PIECE_CONTEXT + 1)


def test_a_folder_of_runs_opens_its_runs_and_not_its_models(tmp_path):
    """`toolgym view runs/quickstart`: its RL run, not its models (whose config.json is a
    model's); a folder with no run in it is refused in words."""
    from toolgym.errors import ConfigError
    from toolgym.viewer.runs import open_runs

    folder = tmp_path / "quickstart"
    for model in ("base", "sft"):
        (folder / model).mkdir(parents=True)
        (folder / model / "config.json").write_text("{}")
    (folder / "rl").mkdir()
    (folder / "rl" / "metrics.jsonl").write_text("")
    (folder / "curves.png").write_bytes(b"")
    assert [r.name for r in open_runs([folder])] == ["quickstart/rl"]
    assert [r.name for r in open_runs([folder / "rl"])] == ["rl"]
    with pytest.raises(ConfigError, match="is not a run directory .* nor a folder of runs"):
        open_runs([folder / "rl" / "nothing"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="nor a folder of runs"):
        open_runs([tmp_path / "empty"])
