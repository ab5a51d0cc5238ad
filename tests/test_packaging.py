"""Packaging as users meet it: a built wheel installed into a fresh venv imports every
subpackage under `toolgym`, and a separately installed package adds its env through the
`toolgym.envs` entry-point group."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT

pytestmark = pytest.mark.slow
IGNORE = shutil.ignore_patterns(
    ".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".venv", "runs"
)


def sh(*args: str | Path, **kwargs) -> str:
    result = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=600, **kwargs
    )
    assert result.returncode == 0, f"{args}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def test_wheel_installs_into_a_fresh_venv_and_imports_every_subpackage(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=IGNORE)  # a clean tree: no stale build/ in the wheel
    sh(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        tmp_path / "dist",
        source,
    )
    wheel = next((tmp_path / "dist").glob("toolgym-*.whl"))
    venv = tmp_path / "venv"
    python = venv_seeing_our_dependencies(venv)
    sh(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", wheel)
    script = (
        "import importlib, pkgutil, toolgym\n"
        "names = [m.name for m in pkgutil.walk_packages(toolgym.__path__, 'toolgym.') if m.name != 'toolgym.__main__']\n"
        f"for n in names: assert importlib.import_module(n).__file__.startswith(r'{venv}'), n\n"
        "for sub in ('envs', 'tools', 'agents', 'training', 'sandbox'): assert 'toolgym.' + sub in names\n"
        "env = toolgym.make('toolgym/Maze-v0'); env.reset(seed=0)\n"
        "from importlib.resources import files; gui = files('toolgym.envs.gui')\n"
        "assert (gui / 'page_tree.js').is_file() and (gui / 'example' / 'shop.html').is_file()\n"
        "print(len(names))\n"
    )
    count = int(sh(python, "-c", script, cwd=tmp_path).strip())
    assert count > 20
    assert sh(venv / "bin" / "toolgym", "--version", cwd=tmp_path).startswith("toolgym ")
    assert (venv / "lib").glob("python*/site-packages/toolgym/envs/py.typed")


def venv_seeing_our_dependencies(venv: Path) -> Path:
    """A fresh venv whose sys.path ends with this interpreter's site directories, so the
    dependencies come from wherever the tests run (the system Python or an activated
    virtualenv; `--system-site-packages` would see the base interpreter instead) while
    toolgym itself must come from what is installed into the venv. Plain path lines in a
    .pth file do not run the .pth files of those directories, so an editable install of
    toolgym there stays invisible."""
    sh(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    purelib = sh(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
    ours = [
        p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and Path(p).is_dir()
    ]
    (Path(purelib) / "toolgym-test-dependencies.pth").write_text("\n".join(ours) + "\n")
    return python


def test_a_separately_installed_package_registers_its_env_through_the_entry_point(tmp_path):
    project = tmp_path / "plugin"
    shutil.copytree(FIXTURES / "toolgym_demo_plugin", project, ignore=IGNORE)
    site = tmp_path / "site"
    sh(
        sys.executable,
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--no-build-isolation",
        "--target",
        site,
        project,
    )
    env = {**os.environ, "PYTHONPATH": str(site), "COLUMNS": "200"}
    listed = sh(sys.executable, "-m", "toolgym", "list", env=env, cwd=tmp_path)
    assert "demo/Echo-v0" in listed and "plugin env" in listed
    checked = sh(sys.executable, "-m", "toolgym", "check", "demo/Echo-v0", env=env, cwd=tmp_path)
    assert "All checks passed." in checked
    played = sh(
        sys.executable,
        "-c",
        "import toolgym; e = toolgym.make('demo/Echo-v0'); e.reset(seed=0); print(e.step(e.scripted_action())[1])",
        env=env,
        cwd=tmp_path,
    )
    assert played.strip() == "1.0"
    # `import toolgym` alone registers the package's envs with Gymnasium (it used to take a
    # first toolgym.make: NamespaceNotFound before)
    through_gymnasium = sh(
        sys.executable,
        "-c",
        "import toolgym, gymnasium; e = gymnasium.make('demo/Echo-v0'); print(type(e.unwrapped).__name__)",
        env=env,
        cwd=tmp_path,
    )
    assert through_gymnasium.strip().endswith("Env")
    # Without the package on the path, the id is unknown again.
    missing = subprocess.run(
        [sys.executable, "-m", "toolgym", "check", "demo/Echo-v0"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert missing.returncode == 1 and "env 'demo/Echo-v0' is not registered" in missing.stdout
