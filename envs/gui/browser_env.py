"""BrowserEnv: a ToolEnv whose tools act on a real page in headless Chromium.

Subclasses say how an episode opens and ends:

    async def open_task(self, page, seed, options) -> str   # load the task; its instruction
    async def read_outcome(self, page) -> float | None      # the reward once it has ended

Observation: the instruction, then the page as an accessibility-tree outline (page_tree.py)
    with an id per element; optionally a screenshot as an image content part, with the ids
    drawn on it (set-of-marks). After every turn: the page again.
Tools: click, type, press, select, scroll, hover, drag, click_at. A wrong id, a key that does not
    exist or an element that cannot take the action is an observation the model reads.
state_key: a hash of the outline (what can be seen and done), so equal pages group in GiGPO.
Infrastructure: a page whose browser died, or that does not answer within `page_timeout_s`
    (a script that never yields), ends its episode as an infrastructure error (masked from
    training); a stuck page's context is closed, which stops its scripts, and the pool starts
    a new browser for the next episode if the old one died.
"""

from __future__ import annotations

import asyncio
import base64
import math
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any

from toolgym.envs.core import Message
from toolgym.envs.gui.browser import BrowserPool, Lease, playwright_error
from toolgym.envs.gui.marks import draw_marks, remove_marks
from toolgym.envs.gui.page_tree import PageTree, read_tree
from toolgym.envs.needs import Need
from toolgym.envs.tool_env import Outcome, ToolEnv
from toolgym.errors import ConfigError
from toolgym.tools.text import clip
from toolgym.tools.tool import InfraError, ToolCallError, tool

RESOLVE_JS = """id => {
  const node = window.__toolgym && window.__toolgym.byId.get(id);
  const element = node && (node.nodeType === 3 ? node.parentElement : node);
  return element && element.isConnected ? element : null;
}"""
"""The element an outline id names (a text's id names the element around it), if it is still
on the page: one round trip."""
POINT_JS = """e => {
  e.scrollIntoView({block: 'nearest', inline: 'nearest'});
  const r = e.getBoundingClientRect();
  if (!(r.width > 0 && r.height > 0)) return {error: 'it is not shown'};
  const x = r.left + r.width / 2, y = r.top + r.height / 2;
  if (x < 0 || y < 0 || x >= innerWidth || y >= innerHeight) return {error: 'it cannot be scrolled into view'};
  const hit = document.elementFromPoint(x, y);
  if (hit && hit !== e && !e.contains(hit) && !(hit.tagName === 'LABEL' && hit.control === e)) {
    const name = (hit.getAttribute('aria-label') || hit.textContent || '').replace(/\\s+/g, ' ').trim();
    return {error: 'another element covers it (' + hit.tagName.toLowerCase() +
      (name ? ' "' + name.slice(0, 40) + '"' : '') + ')'};
  }
  return {x, y};
}"""
"""The point a mouse action aims at: the element's centre, scrolled into view, or why it
cannot be reached there."""
SELECTED_JS = """e => e.tagName === 'SELECT' && e.multiple
  ? Array.from(e.selectedOptions, o => o.label) : null"""
"""The options chosen now in a list box that takes several (None for any other element)."""
DRAG_STEPS = 8
"""Mouse moves between pick-up and drop: drag-and-drop code (jQuery UI's sortable) follows
the pointer's moves, not only where it lands."""
DRAG_PAST = 3.0
"""Pixels past the target's centre, along the drag, where the drop lands: code that asks
whether the pointer has crossed an element's middle (a sortable list) sees it cross."""
SCROLL_DIRECTIONS = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}
MAX_TYPED_CHARS = 500
MAX_KEY_CHARS = 60
"""Longer than any key combination Playwright knows (Control+Shift+ArrowDown is 23)."""


class BrowserEnv(ToolEnv):
    """Args:
    screenshot: attach a PNG of the page to every observation (for vision-language models).
    marks: draw each element's id on the screenshot (set-of-marks).
    max_chars: the most characters of the page outline.
    max_nodes: the most elements listed.
    viewport: the page's (width, height) in CSS pixels.
    executable: the Chromium binary (default: $TOOLGYM_CHROMIUM or `chromium` on the PATH).
    offline: keep every host but loopback unreachable from the page.
    action_timeout_s: how long an action may wait for its element to be ready.
    page_timeout_s: the most any one exchange with the page may take (opening the task, an
        action, reading the outline or the verdict); past it the page is closed.
    plus ToolEnv's (max_turns, parser, invalid_action_reward, ...).
    """

    instructions = (
        "Do the task in the web page. Each element of the page is listed as [id] role "
        '"name" with its state; act on elements by their id.'
    )
    ignore: tuple[str, ...] = ()
    """CSS selectors of parts of the page the agent is not shown (a harness's display)."""

    @classmethod
    def system_needs(cls, kwargs: Mapping[str, Any]) -> set[Need]:
        return {"chromium"}

    def __init__(
        self,
        *,
        screenshot: bool = False,
        marks: bool = False,
        max_chars: int = 4000,
        max_nodes: int = 300,
        viewport: tuple[int, int] | list[int] = (1280, 720),
        executable: str | None = None,
        offline: bool = True,
        action_timeout_s: float = 3.0,
        page_timeout_s: float = 15.0,
        max_turns: int = 10,
        **kwargs: Any,
    ) -> None:
        super().__init__(max_turns=max_turns, **kwargs)
        if marks and not screenshot:
            raise ConfigError("marks=True draws on the screenshot: set screenshot=True too")
        width, height = (int(v) for v in viewport)
        if not (16 <= width <= 4096 and 16 <= height <= 4096):
            raise ConfigError(f"viewport {viewport}: each side must be 16 to 4096 pixels")
        self.screenshot, self.marks = screenshot, marks
        self.max_chars, self.max_nodes = max_chars, max_nodes
        self.viewport = (width, height)
        self.executable, self.offline = executable, offline
        self.action_timeout_ms = action_timeout_s * 1000
        if not page_timeout_s > action_timeout_s:
            raise ConfigError(
                f"page_timeout_s={page_timeout_s} must be longer than action_timeout_s="
                f"{action_timeout_s}"
            )
        self.page_timeout_s = page_timeout_s
        self.lease: Lease | None = None
        self.tree: PageTree | None = None
        self.result: float | None = None
        """The task's reward once it has ended (None while it goes on)."""
        self.instruction = ""
        self.crashed: str | None = None

    # ----- hooks for subclasses -------------------------------------------------------------
    async def open_task(self, page: Any, seed: int | None, options: dict[str, Any] | None) -> str:
        raise NotImplementedError(f"{type(self).__name__} must implement open_task")

    async def read_outcome(self, page: Any) -> float | None:
        """The task's reward once it has ended, else None (read after every action)."""
        return None

    # ----- the episode ----------------------------------------------------------------------
    async def pool(self) -> BrowserPool:
        key = ("browser", self.executable, self.viewport, self.offline)
        return await self.shared(
            key, lambda: BrowserPool(self.executable, self.viewport, self.offline)
        )

    async def start(self, seed: int | None, options: dict[str, Any] | None) -> list[Message]:
        await self._give_back()
        pool = await self.pool()
        self.lease = await pool.lease()
        self.result, self.crashed = None, None
        opened = await self._on_page(
            lambda page: self.open_task(page, seed, options), " opening the task"
        )
        self.instruction = clip(opened, 2000)
        return [await self._page_message(f"Task: {self.instruction}\n\n")]

    async def observe(self) -> list[Message]:
        if self.result is not None:
            return [{"role": "user", "content": f"The task ended (reward {self.result:g})."}]
        try:
            return [await self._page_message("")]
        except InfraError as exc:
            self.crashed = str(exc)
            return [{"role": "user", "content": str(exc)}]

    async def verdict_at_turn_end(self) -> Outcome:
        """The task's verdict after any turn, a call or not: a MiniWoB task whose clock ran
        out ends with its -1 even when the model only wrote text."""
        if self.result is None and self.crashed is None:
            try:
                self.result = await self._on_page(self.read_outcome)
            except InfraError as exc:
                self.crashed = str(exc)
            except ConfigError:  # a check that answers nonsense: no verdict (an action's
                pass  # own reading of it tells the model)
        return self.outcome()

    async def astep(self, action: str) -> tuple[list[Message], float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = await super().astep(action)
        if self.crashed and not info.get("infra_error"):
            info["infra_error"] = self.crashed
        return obs, reward, terminated, truncated, info

    def outcome(self) -> Outcome:
        if self.result is None:
            return Outcome()
        return Outcome(self.result, True, solved=self.task_solved())

    def task_solved(self) -> bool | None:
        """Whether the ended task's verdict is a success; None: the default rule (the full
        reward). A task whose reward gives partial credit says so here."""
        return None

    def state_key(self) -> Hashable:
        return "page:" + (self.tree.digest() if self.tree is not None else "none")

    async def aclose(self) -> None:
        await self._give_back()
        await super().aclose()

    # ----- tools ----------------------------------------------------------------------------
    @tool
    async def click(self, element: int) -> str:
        """Click an element.

        Args:
            element: the element's id, the number in brackets, e.g. 12.
        """
        handle, node = await self._element(element)
        x, y = await self._point(handle, node)
        page = self._page()
        await self._act(lambda: page.mouse.click(x, y))
        return await self._done(f"Clicked [{element}] {_describe(node)}.")

    @tool
    async def type(self, element: int, text: str) -> str:
        """Replace the text in a text field with `text`, typed key by key.

        Args:
            element: the text field's id.
            text: what to type.
        """
        _bound("text", text, MAX_TYPED_CHARS)
        handle, node = await self._element(element)

        async def typing() -> None:
            await handle.fill("", timeout=self.action_timeout_ms)
            await handle.focus()
            await self._page().keyboard.type(text)

        await self._act(typing)
        return await self._done(f"Typed {text!r} into [{element}] {_describe(node)}.")

    @tool
    async def press(self, key: str) -> str:
        """Press a key, or a combination, in the focused element: Enter, Tab, Backspace,
        ArrowDown, Control+A ...

        Args:
            key: the key's name, e.g. "Enter".
        """
        _bound("key", key, MAX_KEY_CHARS)
        page = self._page()
        await self._act(lambda: page.keyboard.press(key))
        return await self._done(f"Pressed {key}.")

    @tool
    async def select(self, element: int, option: str) -> str:
        """Choose an option of a drop-down list (a combobox) or a list box by its text. In a
        list box that takes several (multiselectable), it toggles the option: selected if
        it was not, unselected if it was; the others stay as they are.

        Args:
            element: the list's id.
            option: the option's text, as listed.
        """
        _bound("option", option, MAX_TYPED_CHARS)
        handle, node = await self._element(element)
        chosen = await self._act(lambda: handle.evaluate(SELECTED_JS))
        if chosen is None:
            wanted: str | list[str] = option
            done = f"Selected {option!r}"
        else:
            wanted = [o for o in chosen if o != option] + ([] if option in chosen else [option])
            done = f"{'Unselected' if option in chosen else 'Selected'} {option!r}"

        async def choose() -> None:
            try:
                await handle.select_option(label=wanted, timeout=self.action_timeout_ms)
            except Exception as exc:
                if "not" in str(exc).lower() and "select" in str(exc).lower():
                    raise
                await handle.select_option(value=wanted, timeout=self.action_timeout_ms)

        await self._act(choose)
        return await self._done(f"{done} in [{element}] {_describe(node)}.")

    @tool
    async def scroll(self, direction: str = "down", element: int | None = None) -> str:
        """Scroll the page, or one scrollable element, by most of its height (or width).

        Args:
            direction: "up", "down", "left" or "right".
            element: the id of the element to scroll; the whole page when left out.
        """
        if direction not in SCROLL_DIRECTIONS:
            raise ToolCallError(f"direction {direction!r}: one of {', '.join(SCROLL_DIRECTIONS)}")
        dx, dy = SCROLL_DIRECTIONS[direction]
        script = (
            "([el, dx, dy]) => { const t = el || document.scrollingElement;"
            " t.scrollBy(dx * t.clientWidth * 0.8, dy * t.clientHeight * 0.8); }"
        )
        target = (await self._element(element))[0] if element is not None else None
        page = self._page()
        await self._act(lambda: page.evaluate(script, [target, dx, dy]))
        where = f"[{element}]" if element is not None else "the page"
        return await self._done(f"Scrolled {where} {direction}.")

    @tool
    async def hover(self, element: int) -> str:
        """Move the mouse over an element.

        Args:
            element: the element's id.
        """
        handle, node = await self._element(element)
        x, y = await self._point(handle, node)
        page = self._page()
        await self._act(lambda: page.mouse.move(x, y))
        return await self._done(f"Hovered over [{element}] {_describe(node)}.")

    @tool
    async def drag(self, element: int, to: int) -> str:
        """Drag an element with the mouse and drop it on another: a list item to a new
        place, a shape into a box.

        Args:
            element: the id of the element to drag.
            to: the id of the element to drop it on.
        """
        handle, node = await self._element(element)
        target, target_node = await self._element(to)
        x1, y1 = await self._point(target, target_node)
        x0, y0 = await self._point(handle, node)  # last: it is the one the mouse must reach
        page = self._page()

        length = max(math.hypot(x1 - x0, y1 - y0), 1.0)
        x1 += DRAG_PAST * (x1 - x0) / length  # a little past the middle, as a hand lands
        y1 += DRAG_PAST * (y1 - y0) / length

        async def dragging() -> None:
            await page.mouse.move(x0, y0)
            await page.mouse.down()
            await page.mouse.move(x1, y1, steps=DRAG_STEPS)
            await page.mouse.up()

        await self._act(dragging)
        return await self._done(
            f"Dragged [{element}] {_describe(node)} onto [{to}] {_describe(target_node)}."
        )

    @tool
    async def click_at(self, x: int, y: int) -> str:
        """Click a point of the page (CSS pixels from its top-left corner), for what the
        outline does not list (a canvas, a drawing).

        Args:
            x: pixels from the left edge.
            y: pixels from the top edge.
        """
        width, height = self.viewport
        if not (0 <= x < width and 0 <= y < height):
            raise ToolCallError(f"({x}, {y}) is outside the page's {width}x{height} pixels")
        page = self._page()
        await self._act(lambda: page.mouse.click(x, y))
        return await self._done(f"Clicked at ({x}, {y}).")

    def save_screenshot(self, path: str | Path, marks: bool = True) -> Path:
        """Write the page as a PNG (with the element ids drawn on it), for people watching
        an episode (`toolgym play ... --screenshot out.png`)."""
        return self._run_sync(self._save_screenshot(Path(path), marks))

    async def _save_screenshot(self, path: Path, marks: bool) -> Path:
        async def shoot(page: Any) -> bytes:
            if marks and self.tree is not None:
                await draw_marks(page, self.tree)
            try:
                return bytes(await page.screenshot(type="png"))
            finally:
                if marks and self.tree is not None:
                    await remove_marks(page)

        path.write_bytes(await self._on_page(shoot))
        return path

    # ----- helpers --------------------------------------------------------------------------
    def _page(self) -> Any:
        if self.lease is None:
            raise InfraError(self.crashed or "no page: the episode has not started")
        return self.lease.page

    async def _element(self, element: int | None) -> tuple[Any, dict[str, Any]]:
        """The element with this id in the last outline, as a Playwright handle."""
        node = self.tree.node(element) if self.tree is not None and element is not None else None
        if node is None:
            raise ToolCallError(
                f"no element [{element}] on the page; use an id from the latest outline"
            )
        page = self._page()
        handle = await self._act(lambda: page.evaluate_handle(RESOLVE_JS, element))
        target = handle.as_element()
        if target is None:
            raise ToolCallError(f"element [{element}] is no longer on the page")
        return target, node

    async def _point(self, handle: Any, node: dict[str, Any]) -> tuple[float, float]:
        """Where a mouse reaches the element: its centre, once scrolled into view, if nothing
        covers it there. One round trip; it does not wait for animations to settle (the
        page is acted on as it is now, as a person's click would be)."""
        where = await self._act(lambda: handle.evaluate(POINT_JS))
        if "error" in where:
            hint = " (choose an option with select on its list)" if node["role"] == "option" else ""
            raise ToolCallError(
                f"cannot reach [{node['id']}] {_describe(node)}: {where['error']}{hint}"
            )
        return float(where["x"]), float(where["y"])

    async def _act(self, action: Any) -> Any:
        """Run a Playwright call: a dead browser is an InfraError, an element that cannot
        take the action (timeout, wrong kind) the model's mistake."""
        try:
            return await self._on_page(lambda page: action(), " during the action")
        except playwright_error() as exc:
            raise ToolCallError(_first_line(exc)) from None

    async def _done(self, text: str) -> str:
        """After an action: read the task's verdict."""
        self.result = await self._on_page(self.read_outcome)
        return text

    async def _page_message(self, prefix: str) -> Message:
        tree, png = await self._on_page(self._capture)
        self.tree = tree
        text = f"{prefix}Page:\n{tree.text(self.max_chars)}"
        if png is None:
            return {"role": "user", "content": text}
        url = "data:image/png;base64," + base64.b64encode(png).decode()
        return {
            "role": "user",
            "content": [
                {"type": "text", "text": text},
                {"type": "image_url", "image_url": {"url": url}},
            ],
        }

    async def _capture(self, page: Any) -> tuple[PageTree, bytes | None]:
        """The page's outline and, with screenshot=True, its picture (marks drawn on it)."""
        tree = await read_tree(page, self.ignore, self.max_nodes)
        if not self.screenshot:
            return tree, None
        if self.marks:
            await draw_marks(page, tree)
        png = await page.screenshot(type="png")
        if self.marks:
            await remove_marks(page)
        return tree, png

    async def _on_page(self, work: Any, during: str = "") -> Any:
        """Await work(page) within `page_timeout_s`. A page that does not answer in time is
        closed (its context with it, which stops its scripts) and a browser that died is
        replaced: both are InfraErrors (the episode is masked); other errors stay as they are."""
        lease = self.lease
        if lease is None:
            raise InfraError(self.crashed or "no page: the episode has not started")
        pool = await self.pool()
        deadline = asyncio.timeout(self.page_timeout_s)
        try:
            async with deadline:
                return await work(lease.page)
        except TimeoutError:
            if not deadline.expired():
                raise
            await self._give_back()
            self.crashed = (
                f"the page did not answer within {self.page_timeout_s:g} s{during} (a script "
                "that never yields?); it was closed"
            )
            raise InfraError(self.crashed) from None
        except Exception as exc:
            if not pool.lease_alive(lease):
                raise InfraError(f"the browser died{during}: {_first_line(exc)}") from None
            raise

    async def _give_back(self) -> None:
        lease, self.lease = self.lease, None
        if lease is not None:
            await (await self.pool()).give_back(lease)


def _describe(node: dict[str, Any]) -> str:
    return f'{node["role"]} "{node["name"]}"' if node["name"] else node["role"]


def _bound(name: str, text: str, limit: int) -> None:
    """Refuse an argument too long to mean anything before it crosses to the browser."""
    if len(text) > limit:
        raise ToolCallError(f"{name} is {len(text)} characters; at most {limit}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return clip(text[0] if text else type(exc).__name__, 300)
