"""The Pareto front as a small plot for a terminal (pure): p99 ITL across, tokens/s up."""

from __future__ import annotations

from collections.abc import Sequence


def front_plot(points: Sequence[tuple[float, float]], width: int = 48, height: int = 10,
               x_label: str = "p99 ITL ms", y_label: str = "tok/s",
               y_format: str = ",.0f") -> str:
    """``points``: (x, y) pairs, e.g. (p99 ITL, output tokens/s); one ``*`` each, the
    axes' ends labelled. Empty when there are no points."""
    if not points:
        return ""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    grid = [[" "] * width for _ in range(height)]
    for x, y in points:
        col = round((x - x0) / (x1 - x0) * (width - 1)) if x1 > x0 else width // 2
        row = round((y1 - y) / (y1 - y0) * (height - 1)) if y1 > y0 else height // 2
        grid[row][col] = "*"
    top, bottom = format(y1, y_format), format(y0, y_format)
    pad = max(len(top), len(bottom), len(y_label))
    lines = [f"{y_label:>{pad}} |"]
    for i, cells in enumerate(grid):
        label = top if i == 0 else bottom if i == height - 1 else ""
        lines.append(f"{label:>{pad}} |{''.join(cells)}")
    lines.append(" " * pad + " +" + "-" * width)
    left, right = f"{x0:,.1f}", f"{x1:,.1f}"
    lines.append(" " * (pad + 2) + left + right.rjust(width - len(left)) + f"  {x_label}")
    return "\n".join(lines) + "\n"
