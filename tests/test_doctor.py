"""`toolgym doctor`: what this machine can run, the fix for each missing part, and whether a
given config can start here (its envs declare what they need: envs/needs.py)."""

from __future__ import annotations

from conftest import ROOT, run_cli
from toolgym.envs.needs import env_needs

NO_DOCKER = {"DOCKER_HOST": "unix:///nonexistent/docker.sock"}  # as if the engine were down


def test_envs_declare_what_they_need_from_the_machine():
    assert env_needs("toolgym/Code-v0", {}) == {"bubblewrap"}
    assert env_needs("toolgym/MathCode-v0", {"backend": "docker"}) == {"docker"}
    assert env_needs("toolgym/CodeReason-v0", {"backend": "local"}) == set()
    assert env_needs("toolgym/SQL-v0", {}) == set()
    assert env_needs("toolgym/ProposeSQL-v0", {"backend": "postgres"}) == {"postgres"}
    assert env_needs("toolgym/miniwob.click-button-v0", {}) == {"chromium"}
    assert env_needs("toolgym/Maze-v0", {}) == set()


def test_without_docker_running_doctor_names_it_and_the_fix():
    result = run_cli("doctor", env=NO_DOCKER)
    assert result.returncode == 0, result.stderr  # no config: nothing is required
    lines = result.stdout.splitlines()
    docker = next(i for i, line in enumerate(lines) if line.split()[1:2] == ["docker"])
    assert "cannot reach the Docker engine" in lines[docker]
    assert lines[docker + 1].strip().startswith("fix: apt-get install docker.io && dockerd")
    for part in ("bubblewrap", "chromium", "postgres", "ray", "cuda", "vllm", "disk"):
        assert any(line.split()[1:2] == [part] for line in lines), part


def test_a_config_fails_only_for_what_it_needs():
    code = ROOT / "configs" / "code_gigpo.yaml"
    needs_docker = run_cli(
        "doctor", "--config", str(code), "env.kwargs.backend=docker", env=NO_DOCKER
    )
    assert needs_docker.returncode == 1
    assert f"{code} needs docker, missing here." in needs_docker.stdout
    assert "(this config needs it)" in needs_docker.stdout
    maze = run_cli("doctor", "--config", str(ROOT / "configs" / "maze_gigpo.yaml"), env=NO_DOCKER)
    assert maze.returncode == 0, maze.stdout
    assert "has everything it needs here." in maze.stdout
