"""Export a model's joined events out of Redis, and import a log file into a model: every
line validated first (:mod:`service.formats`), then written in MULTI/EXEC batches, rolled back
on a failure. The semantics: docs/formats.md."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import redis

from service.eventlog.log import EventLog
from service.events import dumps, loads
from service.formats.dsjson import multi_ids, to_dsjson
from service.formats.fields import RewardMap, RewardRule, reward_rule
from service.formats.obp import ACTION_COLUMNS, pick_column
from service.formats.progress import bar as progress_bar
from service.formats.reader import FORMATS, LineError, iter_events

__all__ = [
    "ExportReport",
    "ImportError_",
    "ImportReport",
    "export_events",
    "file_actions",
    "import_events",
    "rollback",
]

ExportFormat = Literal["jsonl", "dsjson"]
ImportFormat = Literal["jsonl", "dsjson", "obp"]


# --- export -------------------------------------------------------------------------------------


@dataclass
class ExportReport:
    """What :func:`export_events` wrote."""

    exported: int = 0
    skipped: int = 0  # events DSJSON cannot carry (see :func:`to_dsjson`)
    last_id: str | None = None  # the stream id to pass as the next ``since``
    problems: list[str] = field(default_factory=list)  # first few reasons of skipped events


def _export_line(raw: str, stream_id: str, name: str, fmt: str, report: ExportReport) -> str | None:
    """The line to write for the joined event ``raw``, or None (skipped, counted in ``report``)."""
    if fmt == "jsonl":
        return raw
    event = loads(raw)
    try:
        return dumps(to_dsjson(event, name))
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        report.skipped += 1
        if len(report.problems) < 10:
            report.problems.append(f"{stream_id} ({event.get('EventId')}): {exc}")
        return None


def export_events(
    log: EventLog,
    name: str,
    fmt: ExportFormat,
    out: IO[str],
    since: str | None = None,
    page: int = 1000,
    progress: bool | None = None,
) -> ExportReport:
    """Stream the joined events of ``name`` after stream id ``since`` (exclusive) to ``out``.

    Constant memory: XRANGE in pages of ``page`` entries. ``progress`` draws a tqdm bar on
    stderr (None: only when stderr is a terminal).
    """
    if fmt not in ("jsonl", "dsjson"):
        raise ValueError(f"unknown export format {fmt!r}")
    total = None if since else log.stream_length(name, "joined")
    # the next --since even when nothing is new: the given id, or the start of the stream
    report = ExportReport(last_id=since if since is not None else "0-0")
    after = since
    with progress_bar(total, None, progress) as bar:
        while True:
            batch = log.joined_raw(name, after, page)
            if not batch:
                break
            for after, raw in batch:
                line = _export_line(raw, after, name, fmt, report)
                if line is not None:
                    out.write(line + "\n")
                    report.exported += 1
            report.last_id = after
            bar.update(len(batch))
    return report


# --- import -------------------------------------------------------------------------------------


class ImportError_(RuntimeError):  # noqa: N801 - ImportError is a builtin
    """The import was refused or failed; nothing was written (``errors`` holds line errors)."""

    def __init__(self, message: str, errors: list[LineError] | None = None) -> None:
        super().__init__(message)
        self.errors = errors or []


def _csv_actions(handle: IO[str]) -> Iterator[tuple[int, list[str]]]:
    """``(line number, [action])`` for every row that names an action."""
    reader = csv.DictReader(handle)
    try:
        column = pick_column(reader.fieldnames or [], ACTION_COLUMNS, "action")
    except ValueError as exc:
        raise ImportError_(str(exc)) from None
    for row in reader:
        value = (row.get(column) or "").strip()
        if value:
            yield reader.line_num, [value]


def _json_actions(handle: IO[str], fmt: str) -> Iterator[tuple[int, list[str]]]:
    """``(line number, the action ids it names)`` for every JSON line that names some."""
    for n, line in enumerate(handle, start=1):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict):
            continue
        if fmt == "jsonl":
            bb = obj.get("bb")
            ids = bb.get("actions") if isinstance(bb, dict) else None
        else:
            ids = multi_ids(obj)
        named = [str(a) for a in (ids if isinstance(ids, list) else [])
                 if isinstance(a, str | int) and not isinstance(a, bool)]
        if named:
            yield n, named


def file_actions(path: str | os.PathLike[str], fmt: ImportFormat, action_index: bool = False,
                 reward_map: RewardMap = "identity", negative_rewards: str = "clip") -> list[str]:
    """The action ids a log file's importable lines name, in order of first appearance (for
    ``import --create``): a line the import would skip (``--on-error skip``) adds none.

    jsonl: each line's ``bb.actions``; dsjson: the ``_tag`` (else ``id``) of each ``_multi``
    entry; obp: the values of the action column (``--action-index``: ``"0"`` to the largest
    index). Raises :class:`ImportError_` when fewer than two actions are found.
    """
    with open(path, encoding="utf-8", errors="replace", newline="") as handle:
        named = dict(_csv_actions(handle) if fmt == "obp" else _json_actions(handle, fmt))
    seen = [a for ids in named.values() for a in ids]
    if fmt == "obp" and action_index:
        seen = [str(i) for i in range(max((int(a) for a in seen if a.isdigit()), default=-1) + 1)]
    candidates = list(dict.fromkeys(seen))
    rule = reward_rule(reward_map, negative_rewards)
    good = {n for n, item in iter_events(Path(path), fmt, candidates, rule, action_index, "probe")
            if not isinstance(item, LineError)}
    found = dict.fromkeys(a for n, ids in named.items() if n in good for a in ids)
    if fmt == "obp" and action_index:
        found = dict.fromkeys(str(i) for i in range(max(map(int, found), default=-1) + 1))
    if len(found) < 2:
        raise ImportError_(f"{path}: found {len(found)} action id(s) on the lines that import, "
                           "a model needs at least 2")
    return list(found)


@dataclass
class ImportReport:
    """The outcome of :func:`import_events`."""

    import_id: str
    format: str
    lines: int = 0
    imported: int = 0
    ignored: int = 0  # valid lines that are not learnable (DSJSON ``_skipLearn``)
    errors: list[LineError] = field(default_factory=list)
    sha256: str = ""
    first_id: str | None = None
    last_id: str | None = None

    def to_dict(self, max_errors: int = 20) -> dict[str, Any]:
        """JSON-able summary (the first ``max_errors`` errors)."""
        return {
            "import_id": self.import_id,
            "format": self.format,
            "lines": self.lines,
            "imported": self.imported,
            "ignored": self.ignored,
            "errors": len(self.errors),
            "first_errors": [str(e) for e in self.errors[:max_errors]],
            "sha256": self.sha256,
            "first_id": self.first_id,
            "last_id": self.last_id,
        }


@dataclass
class _Source:
    """What both passes read: the file, its format and how its lines become the model's events."""

    path: Path
    fmt: str
    actions: list[str]
    rule: RewardRule
    action_index: bool

    def events(self, import_id: str, digest: Any | None = None) -> Iterator[tuple[int, Any]]:
        return iter_events(self.path, self.fmt, self.actions, self.rule, self.action_index,
                           import_id, digest)


def _source(log: EventLog, name: str, path: str | os.PathLike[str], fmt: str, on_error: str,
            reward_map: str, action_index: bool) -> _Source:
    """The checked arguments of an import (ImportError_ naming the first bad one)."""
    if fmt not in FORMATS:
        raise ImportError_(f"unknown import format {fmt!r}")
    if on_error not in ("skip", "fail"):
        raise ImportError_(f"on_error must be skip or fail, got {on_error!r}")
    config = log.config(name)
    if config is None:
        raise ImportError_(f"unknown model {name!r}")
    path = Path(path)
    if not path.is_file():
        raise ImportError_(f"no such file: {path}")
    rule = reward_rule(reward_map, config.negative_rewards)
    return _Source(path, fmt, list(config.actions), rule, action_index)


def _validate(source: _Source, report: ImportReport, progress: bool | None) -> set[int]:
    """The checking reading: every line checked (constant memory but for the event-id digests); the
    bad lines' numbers. Fills ``report``'s counts, errors and sha256."""
    digest = hashlib.sha256()
    seen: set[bytes] = set()
    bad_lines: set[int] = set()
    with progress_bar(None, "validate", progress, unit="line") as bar:
        for n, item in source.events(report.import_id, digest):
            report.lines += 1
            if isinstance(item, LineError):
                report.errors.append(item)
                bad_lines.add(n)
            elif item is None:
                report.ignored += 1
            else:
                key = hashlib.blake2b(item["EventId"].encode(), digest_size=12).digest()
                if key in seen:
                    report.errors.append(LineError(n, f"EventId {item['EventId']!r} repeated"))
                    bad_lines.add(n)
                seen.add(key)
            bar.update(1)
    report.sha256 = digest.hexdigest()
    return bad_lines


def _refuse(log: EventLog, name: str, path: Path, report: ImportReport, on_error: str,
            force: bool) -> None:
    """ImportError_ for bad lines under ``fail``, or a file already imported (unless forced)."""
    if report.errors and on_error == "fail":
        raise ImportError_(
            f"{len(report.errors)} bad line(s), nothing imported; first: {report.errors[0]}",
            report.errors,
        )
    for record in log.import_records(name):
        if record.get("sha256") == report.sha256 and record.get("status") == "done" and not force:
            raise ImportError_(
                f"{path} was already imported into {name!r} (import {record['import_id']}); "
                "use --force to import it again"
            )


def _write_all(log: EventLog, name: str, source: _Source, report: ImportReport,
               bad_lines: set[int], batch: int, progress: bool | None,
               fail_after: int | None) -> None:
    """The writing reading: the good lines in MULTI/EXEC batches of ``batch``."""
    written_batches = 0

    def flush(pending: list[dict[str, Any]]) -> None:
        nonlocal written_batches
        if fail_after is not None and written_batches >= fail_after:
            raise redis.ConnectionError("simulated failure (fail_after)")
        _write(log, name, pending, report)
        written_batches += 1
        bar.update(len(pending))

    pending: list[dict[str, Any]] = []
    to_write = report.lines - len(bad_lines) - report.ignored
    with progress_bar(to_write, "import", progress) as bar:
        for n, item in source.events(report.import_id):
            if n in bad_lines or item is None or isinstance(item, LineError):
                continue
            item["bb"]["imported"] = {"id": report.import_id, "format": source.fmt, "line": n}
            pending.append(item)
            if len(pending) >= batch:
                flush(pending)
                pending = []
        if pending:
            flush(pending)


def import_events(
    log: EventLog,
    name: str,
    path: str | os.PathLike[str],
    fmt: ImportFormat,
    *,
    on_error: Literal["skip", "fail"] = "fail",
    reward_map: RewardMap = "identity",
    action_index: bool = False,
    force: bool = False,
    batch: int = 500,
    progress: bool | None = None,
    fail_after: int | None = None,
) -> ImportReport:
    """Validate every line of ``path``, then append the good ones to ``name``'s joined stream.

    Raises :class:`ImportError_` (nothing written) for an unknown model, a file already imported
    (unless ``force``), bad lines with ``on_error="fail"``, or a write that failed half-way
    (rolled back). ``fail_after`` (tests) simulates a Redis failure after that many batches.
    """
    source = _source(log, name, path, fmt, on_error, reward_map, action_index)
    report = ImportReport(import_id=uuid.uuid4().hex[:12], format=fmt)
    bad_lines = _validate(source, report, progress)
    _refuse(log, name, source.path, report, on_error, force)
    record = {**report.to_dict(0), "status": "writing", "file": str(source.path),
              "started": time.time()}
    log.record_import(name, report.import_id, record)
    try:
        _write_all(log, name, source, report, bad_lines, batch, progress, fail_after)
    except BaseException as exc:
        removed = rollback(log, name, report.import_id, report.first_id)
        record.update(status="rolled_back", reason=str(exc), removed=removed)
        log.record_import(name, report.import_id, record)
        raise ImportError_(
            f"import into {name!r} failed while writing ({exc}); rolled back {removed} event(s)"
        ) from exc
    record.update(report.to_dict(20), status="done", finished=time.time())
    log.record_import(name, report.import_id, record)
    return report


def _write(log: EventLog, name: str, events: list[dict[str, Any]], report: ImportReport) -> None:
    """One MULTI/EXEC: append ``events`` and count them in the model's stats."""
    ids = log.append_imported(name, events)
    if report.first_id is None:
        report.first_id = ids[0]
        log.record_import(name, report.import_id, {**report.to_dict(0), "status": "writing"})
    report.last_id = ids[-1]
    report.imported += len(events)


def rollback(log: EventLog, name: str, import_id: str, first_id: str | None) -> int:
    """Delete the joined events of import ``import_id`` (written from ``first_id`` on)."""
    return 0 if first_id is None else log.remove_imported(name, import_id, first_id)
