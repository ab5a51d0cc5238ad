"""The layering is a test, not a hope: training -> agents -> envs -> tools | sandbox -> core.

Every import in the package counts, wherever it stands (module top, inside a function, under
TYPE_CHECKING), and so does a string that names a module to import later (an entry point
such as "toolgym.agents.engines.hf:HFEngine", or `importlib.import_module("toolgym.x")`): a
lazy import is still a dependency. The application layer (the `toolgym` package facade, its
`__main__`, the CLI and the run viewer) sits on top and may use everything.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Collection
from pathlib import Path

from conftest import ROOT

# Higher rank may import lower rank; equal ranks only within the same layer.
RANK = {"core": 0, "tools": 1, "sandbox": 1, "envs": 2, "agents": 3, "training": 4, "app": 5}
FOLDERS = {"toolgym": "core", "tools": "tools", "sandbox": "sandbox", "envs": "envs",
           "agents": "agents", "training": "training"}  # fmt: skip
APP = ("toolgym", "toolgym.__main__", "toolgym.cli", "toolgym.viewer")
MODULE_STRING = re.compile(r"^toolgym(\.[A-Za-z_]\w*)+(:[A-Za-z_]\w*)?$")


def layer_of(module: str) -> str:
    """The layer of a dotted module name inside toolgym."""
    if module in APP or module.startswith(("toolgym.cli.", "toolgym.viewer.")):
        return "app"
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in FOLDERS and parts[1] != "toolgym":
        return FOLDERS[parts[1]]
    return "core"


def source_modules() -> dict[str, Path]:
    """Every module of the package, by its installed name (folders map as in setup.py)."""
    modules = {}
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            prefix = ["toolgym"] if folder == "toolgym" else ["toolgym", folder]
            modules[".".join(prefix + parts)] = path
    return modules


def imports(path: Path, module: str) -> list[tuple[int, str, tuple[str, ...], bool]]:
    """(line, module, the names taken from it, whether it is a module string) for every
    import statement and module-naming string in the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[int, str, tuple[str, ...], bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, (), False) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.append((node.lineno, base, tuple(a.name for a in node.names), False))
        elif isinstance(node, ast.Constant) and MODULE_STRING.match(str(node.value)):
            found.append((node.lineno, str(node.value).partition(":")[0], (), True))
    return sorted(f for f in found if f[1].split(".")[0] == "toolgym")


def imported_names(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, module) for every import statement and module-naming string in the file."""
    return [(line, name) for line, name, _, _ in imports(path, module)]


def violations() -> list[str]:
    out = []
    for module, path in sorted(source_modules().items()):
        mine = layer_of(module)
        for line, name in imported_names(path, module):
            theirs = layer_of(name)
            allowed = RANK[theirs] < RANK[mine] or theirs == mine or mine == "app"
            if not allowed:
                out.append(f"{path.relative_to(ROOT)}:{line}: {mine} imports {theirs} ({name})")
    return out


def test_every_import_points_down_the_layers():
    assert violations() == []


def test_the_check_sees_lazy_imports_and_module_strings(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "def f():\n"
        "    from toolgym.agents.engines.hf import HFEngine\n"
        "    import toolgym.training.trainer\n"
        "ENGINE = 'toolgym.agents.engines.hf:HFEngine'\n"
        "from . import sibling\n"
    )
    names = [name for _, name in imported_names(probe, "toolgym.envs.search.probe")]
    assert names == [
        "toolgym.agents.engines.hf",
        "toolgym.training.trainer",
        "toolgym.agents.engines.hf",
        "toolgym.envs.search",
    ]
    assert [layer_of(n) for n in names] == ["agents", "training", "agents", "envs"]
    assert layer_of("toolgym.errors") == "core" and layer_of("toolgym.cli.train") == "app"


def test_the_cli_only_parses_and_prints():
    """What a command does lives in the library (a Python caller gets the same run); what
    stays in cli/ is parsing and printing, which fits in 60 lines a function."""
    long = []
    for path in sorted((ROOT / "toolgym" / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > 60:
                    long.append(f"{path.name}:{node.name} ({lines} lines)")
    assert long == []


def test_no_bench_imports_the_cli():
    """A bench reruns what the library does (the quickstart's recipe is data in
    training/quickstart_recipe.py), so it measures what a Python caller gets."""
    found = [
        f"{path.name}:{line}: {name}"
        for path in sorted((ROOT / "bench").glob("*.py"))
        for line, name in imported_names(path, f"bench.{path.stem}")
        if name == "toolgym.cli" or name.startswith("toolgym.cli.")
    ]
    assert found == []


def test_the_trainer_reads_in_one_sitting():
    """The trainer holds the loop and its phases; playing episodes (training/player.py) and
    the run directory (training/run/directory.py) live beside it, so it stays under 350."""
    lines = (ROOT / "training" / "trainer.py").read_text().count("\n")
    assert lines < 350, f"training/trainer.py is {lines} lines"


def imported_modules(path: Path, module: str, modules: Collection[str]) -> set[str]:
    """The package's modules this one imports by a statement (lazy ones too): `from pkg
    import sub` is an import of the module pkg.sub, not of pkg's facade. Module strings are
    left out: a registry naming its variants by path loads none of them when imported."""
    found = set()
    for _, name, taken, is_string in imports(path, module):
        if is_string:
            continue
        submodules = {f"{name}.{t}" for t in taken} & set(modules)
        found |= submodules
        if len(submodules) < len(taken) or not taken:  # a name of the module itself
            found |= {name} & set(modules)
    return found - {module}


def import_circles() -> list[list[str]]:
    """Each set of modules that import one another round, as a sorted list (Tarjan's strongly
    connected components)."""
    modules = source_modules()
    edges = {
        module: sorted(imported_modules(path, module, modules)) for module, path in modules.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in edges[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(modules):
        if module not in index:
            visit(module)
    return sorted(circles)


def test_no_import_circle():
    """One-way layers are not enough: inside a layer, two modules that import each other
    (a config and a source that reads it back) cannot be read, tested or moved apart."""
    assert import_circles() == []


def test_the_circle_check_sees_a_circle(tmp_path, monkeypatch):
    """A lazy import closes a circle; a registry's module string does not."""
    files = {
        "a": "from toolgym.envs import b\n",
        "b": "def f():\n    import toolgym.envs.a\n",
        "c": "from toolgym.envs import d\n",
        "d": "VARIANT = 'toolgym.envs.c:C'\n",
    }
    for name, text in files.items():
        (tmp_path / f"{name}.py").write_text(text)
    modules = {f"toolgym.envs.{name}": tmp_path / f"{name}.py" for name in files}
    monkeypatch.setattr(sys.modules[__name__], "source_modules", lambda: modules)
    assert import_circles() == [["toolgym.envs.a", "toolgym.envs.b"]]


ROOM_LIMIT = 15
LARGER_ROOMS = {
    "envs": "the framework a user's env is written against (its contract, the tool env, "
    "registration, pools, shared resources, the checker): each imported by its own path",
}


def test_each_top_folder_holds_at_most_15_modules_beside_its_sub_folders():
    """A folder of many files has several jobs: its sub-folders name them."""
    crowded = {}
    for folder in FOLDERS:
        modules = [p for p in (ROOT / folder).glob("*.py") if p.name != "__init__.py"]
        if len(modules) > ROOM_LIMIT and folder not in LARGER_ROOMS:
            crowded[folder] = len(modules)
    assert crowded == {}
    for folder in LARGER_ROOMS:
        assert len(list((ROOT / folder).glob("*.py"))) - 1 <= ROOM_LIMIT + 1, folder


def test_the_viewer_reads_a_run_through_one_light_module():
    """training/run/files.py names a run's files and reads them without torch or the trainer
    (and step_figures.py says a step's record in words, importing nothing), so the viewer
    starts fast and reads any run, whatever trained it."""
    reads = {
        name
        for path in (ROOT / "toolgym" / "viewer").glob("*.py")
        for _, name in imported_names(path, f"toolgym.viewer.{path.stem}")
        if name.startswith("toolgym.training")
    }
    assert reads == {"toolgym.training.run.files", "toolgym.training.run.step_figures"}
    files = ROOT / "training" / "run" / "files.py"
    assert {n for _, n in imported_names(files, "toolgym.training.run.files")} <= {"toolgym.errors"}
    figures = ROOT / "training" / "run" / "step_figures.py"
    assert not [n for _, n in imported_names(figures, "toolgym.training.run.step_figures")
                if n.startswith("toolgym")]  # fmt: skip
