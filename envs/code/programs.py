"""Small programs for code reasoning (Absolute Zero's task kinds): a function `f` of one
argument and literal inputs.

- `generate_program(seed)`: a curated program from a dozen templates and inputs for it,
  with their outputs (computed here: the templates are ours, so they run in this process).
- `static_problem(program, inputs)`: why a proposed program may not run at all (a syntax
  error, a banned module or builtin, an input that is not a Python literal), or None.
- `call_f(pool, program, value)`: f(value) in the sandbox, as repr text, bounded; anything a
  policy wrote runs only there.
"""

from __future__ import annotations

import ast
import random
from dataclasses import dataclass
from typing import Any

from toolgym.envs.code.sandbox_access import run_in_pool
from toolgym.sandbox import SandboxPool, Status

OUTPUT_CHARS = 200
"""The longest repr an output may have: a task whose answer is a page is not a task."""
PROGRAM_CHARS = 1000
BANNED_MODULES = frozenset(
    [
        "random",
        "os",
        "sys",
        "subprocess",
        "time",
        "datetime",
        "socket",
        "threading",
        "multiprocessing",
        "uuid",
        "secrets",
        "shutil",
        "signal",
        "ctypes",
        "pathlib",
        "io",
        "builtins",
        "importlib",
        "asyncio",
        "inspect",
        "gc",
        "resource",
    ]
)
"""Modules whose programs answer differently run to run, or reach outside the function."""
BANNED_NAMES = frozenset(
    [
        "open",
        "exec",
        "eval",
        "compile",
        "__import__",
        "input",
        "globals",
        "locals",
        "vars",
        "getattr",
        "setattr",
        "delattr",
        "breakpoint",
        "exit",
        "quit",
        "memoryview",
        # an object's hash and address change from one interpreter to the next
        "hash",
        "id",
    ]
)
KINDS = ("deduction", "abduction", "induction")


@dataclass(frozen=True)
class Program:
    template: str
    program: str
    inputs: list[str]
    outputs: list[str]


TEMPLATES: dict[str, tuple[str, str]] = {
    # name: (source with {a}, {b}, input kind)
    "affine": ("def f(x):\n    return x * {a} + {b}", "int"),
    "modulo": ("def f(x):\n    return x % {a}", "int"),
    "clamp": ("def f(x):\n    return max(x, {a})", "int"),
    "digits": ("def f(x):\n    return sum(int(d) for d in str(x))", "int"),
    "reverse": ("def f(s):\n    return s[::-1]", "str"),
    "suffix": ("def f(s):\n    return s + '{w}'", "str"),
    "count": ("def f(s):\n    return s.count('{c}')", "str"),
    "upper_first": ("def f(s):\n    return s[:{a}].upper()", "str"),
    "even_sum": ("def f(xs):\n    return sum(v for v in xs if v % 2 == 0)", "list"),
    "shift": ("def f(xs):\n    return [v + {a} for v in xs]", "list"),
    "largest": ("def f(xs):\n    return sorted(xs)[-1]", "list"),
    "length": ("def f(xs):\n    return len(xs) * {a}", "list"),
}
WORDS = ["ab", "cat", "dog", "sun", "tree", "moon", "river", "stone", "leaf", "bird"]


def generate_program(seed: int, n_inputs: int = 1) -> Program:
    """Program `seed`: a template, its parameters and `n_inputs` distinct inputs."""
    rng = random.Random(f"toolgym-program-{seed}")
    name = rng.choice(sorted(TEMPLATES))
    source, kind = TEMPLATES[name]
    program = source.format(a=rng.randint(2, 9), b=rng.randint(1, 9), w=rng.choice(WORDS),
                            c=rng.choice("aeiost"))  # fmt: skip
    inputs: list[str] = []
    while len(inputs) < n_inputs:
        value = _input(kind, rng)
        if value not in inputs:
            inputs.append(value)
    namespace: dict[str, Any] = {}
    exec(program, namespace)  # our own template, never a policy's text
    outputs = [repr(namespace["f"](ast.literal_eval(v))) for v in inputs]
    return Program(name, program, inputs, outputs)


def _input(kind: str, rng: random.Random) -> str:
    if kind == "int":
        return str(rng.randint(0, 99))
    if kind == "str":
        return repr("".join(rng.choice(WORDS) for _ in range(rng.randint(1, 2))))
    return repr([rng.randint(0, 9) for _ in range(rng.randint(2, 4))])


def static_problem(program: str, inputs: list[str]) -> str | None:
    """Why `program` with `inputs` is refused before it runs, or None."""
    if len(program) > PROGRAM_CHARS:
        return f"the program has {len(program)} characters (at most {PROGRAM_CHARS})"
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError) as exc:
        return f"the program does not parse: {str(exc)[:120]}"
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    if "f" not in defined:
        return "the program defines no function f"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
            )
            banned = sorted({n.split(".")[0] for n in names} & BANNED_MODULES)
            if banned:
                return f"the program uses a banned module: {banned[0]}"
        elif isinstance(node, ast.Name) and node.id in BANNED_NAMES:
            return f"the program uses a banned builtin: {node.id}"
        elif isinstance(node, ast.Attribute) and node.attr.startswith("__"):
            return f"the program reaches a dunder attribute: {node.attr}"
    for value in inputs:
        if (problem := literal_problem(value)) is not None:
            return f"input {value[:40]!r}: {problem}"
    return None


def literal_problem(value: str) -> str | None:
    """Why `value` is not a short Python literal, or None."""
    if len(value) > OUTPUT_CHARS:
        return f"an input has at most {OUTPUT_CHARS} characters"
    try:
        ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return "not a Python literal (a number, string, list, tuple, dict or bool)"
    return None


def other_inputs(value: str) -> list[str]:
    """A few other inputs of `value`'s type (a literal), near it and far from it: for
    abduction's check that some other input gives another output (else any input is an
    answer; a threshold such as `x > 10` is told apart by a far one).
    Empty for a value of a type it knows no neighbours of (a dict, None)."""
    try:
        x = ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return []
    if isinstance(x, bool):
        near: list[Any] = [not x]
    elif isinstance(x, int | float):
        near = [x + 1, x - 1, 0, -x - 7, x * 7 + 3]
    elif isinstance(x, str):
        near = [x + "a", x[1:], "", "zq" + x[::-1]]
    elif isinstance(x, list):
        near = [x[1:], x[:1] + x, x[::-1], []]
    elif isinstance(x, tuple):
        near = [x[1:], x[:1] + x, x[::-1], ()]
    else:
        near = []
    return [r for r in map(repr, near) if len(r) <= OUTPUT_CHARS and r != repr(x)]


def same_value(answer: str, expected: str) -> bool:
    """Whether two literals' texts name the same value ("[1, 2]" and "[1,2]" do)."""
    try:
        return bool(ast.literal_eval(answer.strip()) == ast.literal_eval(expected))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return answer.strip() == expected.strip()


FRESH = """import subprocess, sys
done = subprocess.run([sys.executable, "-S", "-c", {code}], capture_output=True, text=True,
                      env={{"PATH": "/usr/bin:/bin", **{env}}})
sys.stdout.write(done.stdout)
sys.stderr.write(done.stderr)
sys.exit(done.returncode)
"""
"""Runs a script in a new interpreter with the given environment (inside the sandbox)."""


@dataclass(frozen=True)
class FreshInterpreter:
    """How a fresh interpreter is set up to run a program once. Two runs that differ in both
    show an answer that hangs on either: the hash seed moves a set's order, the allocator an
    object's address. Address randomisation moves whole pages, so an address's low 12 bits
    are the same from run to run under one allocator: two runs under Python's allocator gave
    the same `repr(object())[-6:]` in 1 of 150 tries in the sandbox, one run under each
    allocator in none of 150 (the two place objects at other low bits)."""

    hash_seed: int
    system_malloc: bool = False
    """Allocate with the C library's malloc instead of Python's own (`PYTHONMALLOC=malloc`)."""

    def environment(self) -> dict[str, str]:
        return {"PYTHONHASHSEED": str(self.hash_seed)} | (
            {"PYTHONMALLOC": "malloc"} if self.system_malloc else {}
        )


TWO_RUNS = (FreshInterpreter(hash_seed=1), FreshInterpreter(hash_seed=2, system_malloc=True))
"""The two runs a proposal is checked with: one answer from both, or it is not a task."""


@dataclass(frozen=True)
class Call:
    output: str | None
    """repr(f(value)), when it returned."""
    error: str | None = None


async def call_f(
    pool: SandboxPool,
    program: str,
    value: str,
    timeout_s: float | None = None,
    fresh: FreshInterpreter | None = None,
) -> Call:
    """f(value) in the sandbox. `value` must be a literal (static_problem says), so the only
    code that runs is the program's. With `fresh`, in a new interpreter set up so (not the
    warm sandbox's forked one): a proposal checked in TWO_RUNS shows any answer that hangs on
    string hashing, a set's order or an address."""
    script = f"{program}\n\nprint(repr(f({value})))\n"
    if fresh is not None:
        script = FRESH.format(code=repr(script), env=repr(fresh.environment()))
    result = await run_in_pool(pool, script, timeout_s=timeout_s)
    if result.status is not Status.OK:
        last = (result.stderr.strip().splitlines() or [result.status.value])[-1]
        return Call(None, f"{result.status.value}: {last[:200]}")
    output = result.stdout.strip()
    if len(output) > OUTPUT_CHARS:
        return Call(None, f"the output has over {OUTPUT_CHARS} characters")
    return Call(output)
