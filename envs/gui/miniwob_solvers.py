"""Scripted solvers for MiniWoB++ tasks. Each reads only what the agent reads (the
instruction and the page outline) and answers with the next turn's tool calls, so it acts
only through the env's tools: demonstrations for SFT, and a check that the outline carries
what a task needs.

`solve(task, instruction, tree)` is None for a task without a solver, or when the page is
not what the solver expects (it never guesses).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from toolgym.envs.gui.page_tree import PageTree
from toolgym.tools.records import ToolCall

Node = dict[str, Any]
Solver = Callable[[str, PageTree], list[ToolCall] | None]
SOLVERS: dict[str, Solver] = {}


def solve(task: str, instruction: str, tree: PageTree) -> list[ToolCall] | None:
    solver = SOLVERS.get(task)
    return None if solver is None else solver(instruction, tree)


def solver(*tasks: str) -> Callable[[Solver], Solver]:
    def register(fn: Solver) -> Solver:
        for task in tasks:
            SOLVERS[task] = fn
        return fn

    return register


# ----- reading the outline -------------------------------------------------------------------
def find(tree: PageTree, role: str | None = None, name: str | None = None) -> list[Node]:
    return [
        n
        for n in tree.nodes
        if (role is None or n["role"] == role) and (name is None or n["name"] == name)
    ]


def first(tree: PageTree, role: str | None = None, name: str | None = None) -> Node | None:
    found = find(tree, role, name)
    return found[0] if found else None


def quoted(instruction: str) -> list[str]:
    return re.findall(r'"([^"]*)"', instruction)


def click(node: Node | None) -> list[ToolCall] | None:
    call = click_call(node)
    return None if call is None else [call]


def click_call(node: Node | None) -> ToolCall | None:
    return None if node is None else ToolCall("click", {"element": node["id"]})


def type_into(node: Node | None, text: str) -> ToolCall | None:
    return None if node is None else ToolCall("type", {"element": node["id"], "text": text})


def then_submit(
    tree: PageTree, calls: list[ToolCall | None], label: str = "Submit"
) -> list[ToolCall] | None:
    button = next((n for n in find(tree, "button") if n["name"].lower() == label.lower()), None)
    if button is None or any(c is None for c in calls):
        return None
    return [*(c for c in calls if c is not None), ToolCall("click", {"element": button["id"]})]


def ordinal(text: str) -> int | None:
    match = re.search(r"(\d+)(?:st|nd|rd|th)", text)
    return int(match.group(1)) if match else None


def textboxes(tree: PageTree) -> list[Node]:
    return find(tree, "textbox")


# ----- solvers -------------------------------------------------------------------------------
@solver("click-button", "unicode-test")
def _click_named_button(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    names = quoted(instruction)
    return click(first(tree, "button", names[0])) if names else None


@solver("click-test")
def _click_the_button(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    return click(first(tree, "button"))


@solver("click-test-2")
def _click_button_one(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    match = re.search(r"Click button (\w+)", instruction)
    return click(first(tree, "button", match.group(1))) if match else None


@solver("click-button-sequence")
def _click_in_order(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    names = re.findall(r"button (\w+)", instruction)
    nodes = [first(tree, "button", n) for n in names]
    if not names or any(n is None for n in nodes):
        return None
    return [ToolCall("click", {"element": n["id"]}) for n in nodes if n is not None]


@solver("click-link")
def _click_link(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    names = quoted(instruction)
    if not names:
        return None
    return click(next((n for n in tree.nodes if n["clickable"] and n["name"] == names[0]), None))


@solver("click-option")
def _click_option(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    match = re.match(r"Select (.+) and click Submit", instruction)
    if not match:
        return None
    return then_submit(tree, [click_call(first(tree, "radio", match.group(1)))])


@solver("click-checkboxes")
def _click_checkboxes(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    match = re.match(r"Select (.*?) and click Submit", instruction)
    if not match:
        return None
    wanted = [w.strip() for w in match.group(1).split(",") if w.strip()]
    if wanted == ["nothing"]:
        wanted = []
    calls: list[ToolCall | None] = []
    for name in wanted:
        calls.append(click_call(first(tree, "checkbox", name)))
    return then_submit(tree, calls)


@solver("enter-text", "enter-text-dynamic")
def _enter_text(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    names = quoted(instruction)
    boxes = textboxes(tree)
    if not names or not boxes:
        return None
    return then_submit(tree, [type_into(boxes[0], names[0])])


@solver("enter-text-2")
def _enter_text_cased(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    names, boxes = quoted(instruction), textboxes(tree)
    if not names or not boxes:
        return None
    text = names[0].upper() if "upper case" in instruction else names[0].lower()
    return then_submit(tree, [type_into(boxes[0], text)])


@solver("enter-password")
def _enter_password(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    names, boxes = quoted(instruction), textboxes(tree)
    if not names or len(boxes) < 2:
        return None
    return then_submit(tree, [type_into(boxes[0], names[0]), type_into(boxes[1], names[0])])


@solver("login-user")
def _login(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    names, boxes = quoted(instruction), textboxes(tree)
    if len(names) < 2 or len(boxes) < 2:
        return None
    calls = [type_into(boxes[0], names[0]), type_into(boxes[1], names[1])]
    return then_submit(tree, calls, "Login")


@solver("focus-text", "focus-text-2")
def _focus(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    boxes = textboxes(tree)
    index = (ordinal(instruction) or 1) - 1
    return click(boxes[index]) if 0 <= index < len(boxes) else None


@solver("click-dialog", "click-dialog-2")
def _dialog(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    names = quoted(instruction)
    if not names:
        return None
    name = "Close" if names[0].lower() == "x" else names[0]
    return click(first(tree, "button", name))


@solver("click-tab")
def _tab(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    match = re.search(r"Tab #\d+", instruction)
    return click(first(tree, "tab", match.group(0))) if match else None


@solver("click-tab-2", "click-tab-2-easy", "click-tab-2-medium", "click-tab-2-hard")
def _tab_with_link(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    """Click the link if the open tab shows it, else open the next tab after the open one."""
    names = quoted(instruction)
    if not names:
        return None
    panel = first(tree, "tabpanel")
    link = next(
        (
            n
            for n in tree.nodes
            if n["clickable"] and n["role"] == "generic" and n["name"] == names[0]
        ),
        None,
    )
    if link is not None:
        return click(link)
    tabs = find(tree, "tab")
    open_names = [t["name"] for t in tabs]
    if panel is None or panel["name"] not in open_names:
        return None
    after = open_names.index(panel["name"]) + 1
    return click(tabs[after]) if after < len(tabs) else None


@solver("choose-list")
def _choose(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    match = re.match(r"Select (.+) from the list and click Submit", instruction)
    box = first(tree, "combobox")
    if not match or box is None:
        return None
    return then_submit(tree, [ToolCall("select", {"element": box["id"], "option": match.group(1)})])


@solver("click-scroll-list")
def _scroll_list(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    match = re.match(r"Select (.+) from the scroll list and click Submit", instruction)
    box = first(tree, "listbox")
    if not match or box is None or not box.get("multiselectable"):
        return None
    wanted = [w.strip() for w in match.group(1).split(",")]
    chosen = {n["name"] for n in find(tree, "option") if n.get("selected")}
    toggles = [name for name in wanted if name not in chosen] + sorted(chosen - set(wanted))
    return then_submit(
        tree, [ToolCall("select", {"element": box["id"], "option": name}) for name in toggles]
    )


PLACES = {"to the top.": 1, "up by one position.": -1, "down by one position.": +1}


@solver("drag-items")
def _drag_items(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    match = re.match(
        r"Drag (.+?) (to the .+|up by one position\.|down by one position\.)$", instruction
    )
    items = find(tree, "listitem")
    names = [n["name"] for n in items]
    if not match or match.group(1) not in names:
        return None
    here = names.index(match.group(1))
    how = match.group(2)
    if how == "to the bottom.":
        there = len(items) - 1
    elif how in ("up by one position.", "down by one position."):
        there = here + PLACES[how]
    else:
        place = 1 if how == "to the top." else ordinal(how)
        if place is None:
            return None
        there = place - 1
    if not 0 <= there < len(items) or there == here:
        return None
    return [ToolCall("drag", {"element": items[here]["id"], "to": items[there]["id"]})]


@solver("drag-sort-numbers")
def _drag_sort(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    """One drag a turn: the smallest of the unsorted rest to the top of the rest."""
    items = find(tree, "listitem")
    try:
        numbers = [int(n["name"]) for n in items]
    except ValueError:
        return None
    if not instruction.startswith("Sort the numbers in increasing order") or not items:
        return None
    for place, number in enumerate(numbers):
        smallest = min(range(place, len(numbers)), key=numbers.__getitem__)
        if numbers[smallest] < number:
            return [ToolCall("drag", {"element": items[smallest]["id"], "to": items[place]["id"]})]
    return click(first(tree, "button", "Submit"))


@solver("drag-box")
def _drag_box(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    small, large = first(tree, name="s"), first(tree, name="L")
    if not instruction.startswith("Drag the smaller box") or small is None or large is None:
        return None
    return then_submit(tree, [ToolCall("drag", {"element": small["id"], "to": large["id"]})])


@solver("click-collapsible", "click-collapsible-nodelay")
def _collapsible(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    if first(tree, "tabpanel") is not None:  # the section is open
        return click(first(tree, "button", "Submit"))
    header = next((t for t in find(tree, "tab") if t["name"].startswith("Section")), None)
    return click(header)


@solver("simple-arithmetic")
def _arithmetic(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    problem = next(
        (n for n in find(tree, "text") if re.fullmatch(r"-?\d+ [-+x*] -?\d+ =", n["name"])), None
    )
    boxes = textboxes(tree)
    if problem is None or not boxes:
        return None
    a, op, b, _ = problem["name"].split()
    value = {"+": int(a) + int(b), "-": int(a) - int(b)}.get(op, int(a) * int(b))
    return then_submit(tree, [type_into(boxes[0], str(value))])


@solver("find-word")
def _find_word(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    index = ordinal(instruction)
    paragraph = first(tree, "text")
    boxes = textboxes(tree)
    if index is None or paragraph is None or not boxes:
        return None
    words = paragraph["name"].split()
    if index > len(words) or paragraph["name"].endswith("…"):
        return None
    return then_submit(tree, [type_into(boxes[0], words[index - 1].strip(".,"))])


@solver("read-table")
def _read_table(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    match = re.search(r"value of (.+?) into", instruction)
    cells = find(tree, "cell")
    boxes = textboxes(tree)
    if not match or not boxes:
        return None
    for key, value in zip(cells[::2], cells[1::2], strict=False):
        if key["name"] == match.group(1):
            return then_submit(tree, [type_into(boxes[0], value["name"])])
    return None


@solver("odd-or-even")
def _odd_or_even(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    calls: list[ToolCall | None] = []
    nodes = tree.nodes
    for index, node in enumerate(nodes):
        if node["role"] == "text" and re.fullmatch(r"-?\d+", node["name"]):
            odd, even = nodes[index - 1], nodes[index + 1] if index + 1 < len(nodes) else None
            if even is None or odd["name"] != "Odd" or even["name"] != "Even":
                return None
            chosen = odd if int(node["name"]) % 2 else even
            calls.append(ToolCall("click", {"element": chosen["id"]}))
    return then_submit(tree, calls) if calls else None


@solver("click-widget")
def _click_widget(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    names = quoted(instruction)
    if not names:
        return None
    kind = names[0]
    tests: dict[str, Callable[[Node], bool]] = {
        "textarea": lambda n: n["role"] == "textbox" and bool(n.get("multiline")),
        "text": lambda n: n["role"] == "textbox" and not n.get("multiline"),
        "button": lambda n: n["role"] == "button",
        "checkbox": lambda n: n["role"] == "checkbox",
        "radio": lambda n: n["role"] == "radio",
    }
    test = tests.get(kind)
    return None if test is None else click(next((n for n in tree.nodes if test(n)), None))


@solver("navigate-tree")
def _navigate_tree(instruction: str, tree: PageTree) -> list[ToolCall] | None:
    """Click the named file or folder when shown, else open the first closed folder whose
    (hidden) contents hold the name."""
    names = quoted(instruction)
    if not names:
        return None
    target = names[0]
    named = [n for n in tree.nodes if n["clickable"] and n["name"] == target]
    if named:
        return click(named[-1])  # the innermost: the label, not the item around it
    for item in find(tree, "listitem"):
        label = next((n for n in tree.nodes if n["depth"] == item["depth"] + 1
                      and n["role"] == "generic" and n["name"] and n["id"] > item["id"]), None)  # fmt: skip
        if label and target in item["name"] and item["name"] != label["name"]:
            return click(label)
    return None
