"""The RESULTS.md block of the quality benchmark: per protocol, stream x column, medians over seeds.

A cell reads ``last-20% / whole-stream`` accuracy of the played action (medians over the seeds
that ran; ``(n)`` after it when fewer seeds ran than for the stream's most complete column, a
dash when none). The VW column is the best configuration of the grid per stream and protocol
(the highest median last-20% accuracy), its name beside it; ``VW eps0.1`` is VW with the
boosters' old default exploration rate (rho = 0.1), whatever won.

The main tables show the columns a user compares (:data:`MAIN_LABELS`: the defaults, the old
defaults, the paper's settings); every other label (earlier defaults and the settings
tried) goes to the history tables (``report(..., history=True)``), beside the defaults.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from benchmarks.paper.quality.run import row_key
from benchmarks.stats import median

__all__ = ["MAIN_LABELS", "by_column", "columns_of", "report", "stream_order", "vw_best"]

ORDER = ["adabandit", "banditbbm", "oco", "egreedy_tree"]
#: the VW configuration also shown on its own: the exploration rate of the boosters' old rho
VW_FIXED = "eps0.1"
#: the labels of the main tables: the defaults, the earlier defaults, the paper's settings
MAIN_LABELS = ("default", "old", "paper")


def load_rows(path: Path) -> list[dict]:
    """The JSON lines of ``path``; of a cell that ran twice (overlapping runs), the first."""
    rows, seen = [], set()
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            key = row_key(row)
            if key not in seen:
                seen.add(key)
                rows.append(row)
    return rows


def columns_of(rows: list[dict]) -> list[str]:
    """Booster columns ``method:label`` in a stable order, then ``vw``."""
    names = {f"{r['method']}:{r['label']}" for r in rows if r["method"] != "vw"}

    def rank(name: str) -> tuple:
        method, label = name.split(":", 1)
        order = ORDER.index(method) if method in ORDER else len(ORDER)
        return (label != "default", label != "paper", label, order, method)

    return sorted(names, key=rank) + (["vw"] if any(r["method"] == "vw" for r in rows) else [])


def _fmt(values: list[dict], n_max: int) -> str:
    if not values:
        return "–"
    last = median(v["last20_accuracy"] for v in values)
    whole = median(v["accuracy"] for v in values)
    more = f" ({len(values)})" if len(values) < n_max else ""
    return f"{last:.3f} / {whole:.3f}{more}"


def vw_best(rows: list[dict]) -> tuple[str, list[dict]]:
    by_config = defaultdict(list)
    for r in rows:
        by_config[r["label"]].append(r)
    if not by_config:
        return "", []
    best = max(by_config, key=lambda c: (median(r["last20_accuracy"] for r in by_config[c]), c))
    return best, by_config[best]


def protocol_table(rows: list[dict], protocol: str, columns: list[str]) -> list[str]:
    """The markdown table of one protocol."""
    cells = defaultdict(list)
    for r in rows:
        if r["protocol"] == protocol:
            cells[(r["stream"], _column(r))].append(r)
    order = stream_order(rows)
    streams = sorted({s for s, _ in cells}, key=order.__getitem__)
    names = [
        f"VW best of grid | VW {VW_FIXED}" if c == "vw" else c.replace(":", " ") for c in columns
    ]
    header = ["stream (k, rounds)", "majority", *names]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * (len(header) + ("vw" in columns))]
    for stream in streams:
        some = next(r for (s, _), rs in cells.items() if s == stream for r in rs)
        n_max = max((len(cells[(stream, c)]) for c in columns if c != "vw"), default=1)
        out = [f"{stream} ({some['n_actions']}, {some['rounds']})", f"{some['majority']:.3f}"]
        for column in columns:
            if column == "vw":
                config, best = vw_best(cells[(stream, "vw")])
                out.append(f"{_fmt(best, len(best))} {config}" if best else "–")
                fixed = [r for r in cells[(stream, "vw")] if r["label"] == VW_FIXED]
                out.append(_fmt(fixed, len(fixed)))
            else:
                out.append(_fmt(cells[(stream, column)], n_max))
        lines.append("| " + " | ".join(out) + " |")
    return lines


def _median_last20(rows: list[dict]) -> float | None:
    return median(r["last20_accuracy"] for r in rows) if rows else None


def target_table(rows: list[dict]) -> list[str]:
    """The issue's targets per stream and protocol, on the default columns: AdaBandit against
    VW's best of grid, BanditBBM and ``oco`` against AdaBandit, ``egreedy_tree`` against chance."""
    cells = by_column(rows)
    order = stream_order(rows)
    pairs = sorted(
        {(r["stream"], r["protocol"]) for r in rows}, key=lambda sp: (order[sp[0]], sp[1])
    )
    lines = [
        "| stream | protocol | AdaBandit | VW best | AdaBandit >= VW | BanditBBM - AdaBandit "
        "| oco - AdaBandit | egreedy_tree (chance) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    wins = within = total = above = 0
    for stream, protocol in pairs:
        ada = _median_last20(cells[(stream, protocol, "adabandit:default")])
        _, best = vw_best(cells[(stream, protocol, "vw")])
        vw = _median_last20(best)
        if ada is None or vw is None:
            continue
        total += 1
        wins += ada >= vw
        gaps = []
        for name in ("banditbbm", "oco"):
            other = _median_last20(cells[(stream, protocol, f"{name}:default")])
            gaps.append("–" if other is None else f"{other - ada:+.3f}")
            within += other is not None and round(other - ada, 3) >= -0.1  # as shown
        egreedy = _median_last20(cells[(stream, protocol, "egreedy_tree:default")])
        k = next(r["n_actions"] for r in cells[(stream, protocol, "vw")])
        above += egreedy is not None and round(egreedy, 3) > round(1 / k, 3)  # as shown
        lines.append(
            f"| {stream} | {protocol} | {ada:.3f} | {vw:.3f} | {'yes' if ada >= vw else 'no'} | "
            + " | ".join(gaps)
            + f" | {'–' if egreedy is None else f'{egreedy:.3f}'} ({1 / k:.3f}) |"
        )
    lines += [
        "",
        f"AdaBandit's defaults at or above VW's best of grid: {wins} of {total} stream/protocol "
        f"cells; BanditBBM or `oco` within 0.1 of AdaBandit (or above): {within} of {2 * total}; "
        f"`egreedy_tree` above chance: {above} of {total}.",
    ]
    return lines


def speed_line(rows: list[dict], columns: list[str]) -> str:
    parts = []
    for column in columns:
        picked = [r["rounds_per_second"] for r in rows if _column(r) == column]
        if picked:
            parts.append(f"{column.replace(':', ' ')} {median(picked):,.0f}")
    return "Rounds per second, median over all its cells: " + "; ".join(parts) + "."


def missing(rows: list[dict], columns: list[str]) -> list[str]:
    """``column: stream/protocol, ...`` for the cells with no run, for the note under the tables."""
    pairs = sorted({(r["stream"], r["protocol"]) for r in rows})
    have = {(r["stream"], r["protocol"], _column(r)) for r in rows}
    out = []
    for column in columns:
        if column.endswith(":paper"):
            continue
        lacking = [f"{s}/{p}" for s, p in pairs if (s, p, column) not in have]
        if lacking:
            out.append(f"{column.replace(':', ' ')}: {', '.join(lacking)}")
    return out


def stream_order(rows: list[dict]) -> dict[str, int]:
    """Each stream's rank by its first row (the tables list streams in the order they ran)."""
    order: dict[str, int] = {}
    for r in rows:
        order.setdefault(r["stream"], len(order))
    return order


def by_column(rows: list[dict]) -> defaultdict:
    """The rows by ``(stream, protocol, column)``, the column ``method:label`` or ``vw``."""
    cells = defaultdict(list)
    for r in rows:
        cells[(r["stream"], r["protocol"], _column(r))].append(r)
    return cells


def _column(row: dict) -> str:
    return "vw" if row["method"] == "vw" else f"{row['method']}:{row['label']}"


def shown_columns(columns: list[str], history: bool) -> list[str]:
    """The main tables' columns (labels of :data:`MAIN_LABELS`, and VW), or the history's (the
    defaults, every other label, and VW).

    >>> cols = ["adabandit:default", "adabandit:paper", "adabandit:old", "adabandit:pass6", "vw"]
    >>> shown_columns(cols, False)
    ['adabandit:default', 'adabandit:paper', 'adabandit:old', 'vw']
    >>> shown_columns(cols, True)
    ['adabandit:default', 'adabandit:pass6', 'vw']
    """
    def main(column: str) -> bool:
        return column == "vw" or column.split(":", 1)[1] in MAIN_LABELS

    keep = {"vw", *(c for c in columns if c.endswith(":default"))} if history else set()
    return [c for c in columns if c in keep or main(c) != history]


def report(path: Path, intro: str = "", history: bool = False) -> str:
    """The markdown body of the block, from the JSON lines at ``path``: the targets and the main
    tables, or with ``history`` the tables of every other label."""
    rows = load_rows(path)
    columns = shown_columns(columns_of(rows), history)
    lines = [intro] if intro else []
    if not history:
        lines += ["", "**The targets** (median last-20% accuracy of the default columns)", ""]
        lines += target_table(rows)
    for protocol in ("duplicated", "plain"):
        if any(r["protocol"] == protocol for r in rows):
            lines += ["", f"**{protocol}**", "", *protocol_table(rows, protocol, columns)]
    lines += ["", speed_line(rows, columns)]
    gaps = missing(rows, columns)
    if gaps:
        lines += ["", "Cells not run: " + "; ".join(gaps) + "."]
    return "\n".join(lines).strip()
