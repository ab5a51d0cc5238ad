"""Tables toolgym prints, whole at any width. Rich squeezes a table wider than the terminal
by cutting its words ("tempe…", "54.2…"), and a pipe or a log file is 80 columns. Here each
column gets at least its longest word and the rest of the width goes where the text is
longest; a table whose words cannot all fit even with light rules is printed stacked: one
block per row, a `column  value` line per cell."""

from __future__ import annotations

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.measure import Measurement
from rich.table import Column, Table
from rich.text import Text

UNBOUNDED = 100_000
"""A width no table reaches: a table measured within it gives its own widths."""


def print_table(table: Table, out: Console) -> None:
    """Print `table` whole at the console's width."""
    out.print(fitted(table, out.width, out))


def fitted(table: Table, width: int, out: Console) -> RenderableType:
    """`table` with column widths that cut no word within `width`; else with light rules
    (no side borders); else stacked."""
    for light in (False, True):
        if light:
            table.box, table.show_edge, table.padding = box.SIMPLE_HEAD, False, (0, 1)
        widths = column_widths(table, width, out)
        if widths is not None:
            for column, chosen in zip(table.columns, widths, strict=True):
                column.width, column.overflow = chosen, "fold"
            return table
    return stacked(table)


def column_widths(table: Table, width: int, out: Console) -> list[int] | None:
    """Each column's width within `width`: at least its longest word, at most its longest
    line, the room between shared in proportion to what each column could use; None when
    the longest words alone do not fit."""
    options = out.options.update(max_width=UNBOUNDED)
    ranges = [_content_range(column, options, out) for column in table.columns]
    drawn = Measurement.get(out, options, table).maximum
    room = width - (drawn - sum(high for _, high in ranges))  # less borders and padding
    lows = sum(low for low, _ in ranges)
    if lows > room:
        return None
    wants = [high - low for low, high in ranges]
    spare = min(room - lows, sum(wants))
    widths = [low + (spare * want // sum(wants) if sum(wants) else 0) for (low, _), want in
              zip(ranges, wants, strict=True)]  # fmt: skip
    for k in sorted(range(len(widths)), key=lambda k: wants[k], reverse=True):
        if sum(widths) - lows >= spare:
            break
        if widths[k] < ranges[k][1]:
            widths[k] += 1
    return widths


def stacked(table: Table) -> Group:
    """Each row as a block of `column  value` lines (empty cells left out), under the title."""
    columns = [list(c.cells) for c in table.columns]
    blocks: list[RenderableType] = []
    if table.title:
        blocks.append(_text(table.title))
    for row in range(table.row_count):
        block = Table.grid(padding=(0, 2))
        block.add_column(style="bold", overflow="fold")
        block.add_column(overflow="fold")
        for column, cells in zip(table.columns, columns, strict=True):
            if str(cells[row]).strip():
                block.add_row(_text(column.header), cells[row])
        blocks += [Text(""), block]
    return Group(*blocks)


def _content_range(column: Column, options: ConsoleOptions, out: Console) -> tuple[int, int]:
    """(longest word, longest line) over the column's header and cells."""
    sizes = [Measurement.get(out, options, _text(cell)) for cell in (column.header, *column.cells)]
    return max(s.minimum for s in sizes), max(s.maximum for s in sizes)


def _text(cell: RenderableType) -> RenderableType:
    return Text.from_markup(cell) if isinstance(cell, str) else cell
