"""Write a benchmark's series as CSV and as a PNG plot (matplotlib, a dev dependency).

``write_series("bench/results/plan_vs_pending", "pending jobs", "ms", header, rows)`` writes
``plan_vs_pending.csv`` (header + rows) and ``plan_vs_pending.png`` (every column after the first
plotted against the first). The PNG is skipped with a message when matplotlib is not installed.
"""

from __future__ import annotations

import csv
import os
import sys
from collections.abc import Sequence

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def write_series(
    stem: str,
    x_label: str,
    y_label: str,
    header: Sequence[str],
    rows: Sequence[Sequence[float]],
    *,
    title: str = "",
    log_x: bool = False,
    right: Sequence[str] = (),
    right_label: str = "",
) -> list[str]:
    """Write ``stem``.csv and ``stem``.png; returns the paths written. Columns named in ``right``
    are plotted against a second y axis labelled ``right_label``."""
    os.makedirs(os.path.dirname(stem) or ".", exist_ok=True)
    written = [f"{stem}.csv"]
    with open(written[0], "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(header)
        out.writerows(rows)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed: {stem}.png not written", file=sys.stderr)
        return written
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    xs = [r[0] for r in rows]
    ax2 = ax.twinx() if right else None
    lines = []
    for k, name in enumerate(header[1:], start=1):
        target = ax2 if ax2 is not None and name in right else ax
        style = "s--" if target is ax2 else "o-"
        lines += target.plot(xs, [r[k] for r in rows], style, color=f"C{k - 1}", label=name)
    if ax2 is not None:
        ax2.set_ylabel(right_label)
        ax2.set_ylim(bottom=0)
    if log_x:
        ax.set_xscale("log")
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title(title, fontsize=9)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(lines, [line.get_label() for line in lines], fontsize=8)
    fig.tight_layout()
    fig.savefig(f"{stem}.png")
    plt.close(fig)
    written.append(f"{stem}.png")
    return written
