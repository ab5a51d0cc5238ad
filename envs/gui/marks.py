"""Set-of-marks: each listed element's id drawn on the page over its box, for a screenshot a
vision-language model can point into by id. The overlay ignores the mouse and is removed
after the screenshot, so the page the task sees is unchanged."""

from __future__ import annotations

from typing import Any

from toolgym.envs.gui.page_tree import PageTree

DRAW_JS = """(boxes) => {
  const layer = document.createElement('div');
  layer.id = '__toolgym_marks';
  layer.style.cssText = 'position:fixed;left:0;top:0;width:0;height:0;z-index:2147483647;' +
    'pointer-events:none;';
  for (const [id, x, y, w, h] of boxes) {
    const box = document.createElement('div');
    box.style.cssText = `position:fixed;left:${x}px;top:${y}px;width:${w}px;height:${h}px;` +
      'outline:1px solid #e0f;pointer-events:none;';
    const tag = document.createElement('span');
    tag.textContent = id;
    tag.style.cssText = 'position:absolute;left:0;top:0;font:9px monospace;color:#fff;' +
      'background:#e0f;line-height:9px;padding:0 1px;';
    box.appendChild(tag);
    layer.appendChild(box);
  }
  document.documentElement.appendChild(layer);
}"""
REMOVE_JS = "() => { const l = document.getElementById('__toolgym_marks'); if (l) l.remove(); }"


async def draw_marks(page: Any, tree: PageTree) -> None:
    """Mark the clickable elements in view (texts and containers would only add clutter)."""
    boxes = [[n["id"], *n["box"]] for n in tree.nodes if n["clickable"] and n["visible"]]
    await page.evaluate(DRAW_JS, boxes)


async def remove_marks(page: Any) -> None:
    await page.evaluate(REMOVE_JS)
