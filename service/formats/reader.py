"""The one validation pass over a log file, shared by ``import`` and ``replay``: its lines
parsed by the format's parser into events over a model's actions, or ``line N: reason``
errors; and the detection of a file's format (docs/formats.md)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Literal

from service.formats.dsjson import parse_dsjson
from service.formats.fields import RewardRule
from service.formats.jsonl import parse_jsonl
from service.formats.obp import parse_obp_row, table_columns

__all__ = [
    "FORMATS",
    "Format",
    "LineError",
    "LogError",
    "detect_format",
    "first_object",
    "iter_events",
]

Format = Literal["jsonl", "dsjson", "obp"]
FORMATS: tuple[str, ...] = ("jsonl", "dsjson", "obp")

#: What :func:`iter_events` yields per data line: the event, None (a DSJSON ``_skipLearn`` line,
#: valid but not an event) or the line's error.
Item = dict[str, Any] | None


class LineError(ValueError):
    """A bad input line (its 1-based number and the reason)."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line, self.reason = line, reason


class LogError(ValueError):
    """A log file that cannot be read as a whole; ``errors`` holds its line errors."""

    def __init__(self, message: str, errors: list[LineError] | None = None) -> None:
        super().__init__(message)
        self.errors = errors or []


def _non_finite(token: str) -> Any:
    raise ValueError(f"{token} is not a JSON number")


#: JSON as the log writes it (:func:`service.events.dumps`): NaN and Infinity are refused
_DECODER = json.JSONDecoder(parse_constant=_non_finite)


def parse_line(line: bytes) -> Any:
    """One log line's JSON (UTF-8; NaN and Infinity are not JSON: a ``ValueError``).

    >>> parse_line(b'{"a": [1, 2.5]}')
    {'a': [1, 2.5]}
    >>> parse_line(b'{"r": NaN}')
    Traceback (most recent call last):
    ...
    ValueError: NaN is not a JSON number
    """
    return _DECODER.decode(line.decode())


def first_object(path: Path) -> tuple[int, Any]:
    """``(line number, parsed JSON)`` of the first non-blank line; LogError if it is not JSON
    or the file holds no line."""
    with open(path, "rb") as handle:
        for n, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    return n, json.loads(line)
                except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                    raise LogError(
                        f"cannot detect the format of {path}: line {n} is not JSON ({exc}); "
                        "give the format (a CSV is read as obp)",
                        [LineError(n, f"malformed JSON: {exc}")],
                    ) from None
    raise LogError(f"{path} holds no event")


def detect_format(path: str | Path) -> str:
    """``obp`` for a ``.csv`` file, else ``jsonl`` when the first line is one of our joined
    events (a ``bb`` object with ``actions``), else ``dsjson``."""
    path = Path(path)
    if path.suffix.lower() == ".csv":
        return "obp"
    _, obj = first_object(path)
    if isinstance(obj, dict) and isinstance(obj.get("bb"), dict) and "actions" in obj["bb"]:
        return "jsonl"
    return "dsjson"


def iter_events(
    path: Path, fmt: str, actions: list[str], rule: RewardRule, action_index: bool,
    id_prefix: str, digest: Any | None = None,
) -> Iterator[tuple[int, Item | LineError]]:
    """``(line number, event | None (ignored) | LineError)`` for every data line of ``path``.

    ``id_prefix`` names the events of rows without an id (``{id_prefix}-{line}``); ``digest``
    (a hashlib object) is fed every byte of the file.
    """
    with open(path, "rb") as raw:
        if fmt == "obp":
            yield from _csv_events(raw, actions, rule, action_index, id_prefix, digest)
        else:
            yield from _json_events(raw, fmt, actions, rule, digest)


def _csv_events(
    raw: IO[bytes], actions: list[str], rule: RewardRule, action_index: bool, id_prefix: str,
    digest: Any | None,
) -> Iterator[tuple[int, Item | LineError]]:
    buffered = io.BufferedReader(_Tee(raw, digest))
    text = io.TextIOWrapper(buffered, encoding="utf-8", newline="")
    reader = csv.DictReader(text)
    try:
        columns = table_columns(reader.fieldnames or [])
    except ValueError as exc:
        yield 1, LineError(1, str(exc))
        return
    for row in reader:
        n = reader.line_num
        if None in row:
            yield n, LineError(n, "more cells than header columns")
            continue
        if any(v is None for v in row.values()):
            yield n, LineError(n, "fewer cells than header columns")
            continue
        try:
            yield n, parse_obp_row(row, columns, actions, rule, action_index, f"{id_prefix}-{n}")
        except (ValueError, TypeError) as exc:
            yield n, LineError(n, str(exc))


def _json_events(
    raw: IO[bytes], fmt: str, actions: list[str], rule: RewardRule, digest: Any | None,
) -> Iterator[tuple[int, Item | LineError]]:
    parse: Callable[[Any, list[str], RewardRule], Item] = (
        parse_dsjson if fmt == "dsjson" else parse_jsonl
    )
    for n, line in enumerate(raw, start=1):
        if digest is not None:
            digest.update(line)
        if not line.strip():
            continue
        try:
            obj = parse_line(line)
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            yield n, LineError(n, f"malformed JSON: {exc}")
            continue
        try:
            yield n, parse(obj, actions, rule)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            yield n, LineError(n, str(exc))


class _Tee(io.RawIOBase):
    """A binary reader that feeds what it reads to a hash (for the CSV path)."""

    def __init__(self, raw: IO[bytes], digest: Any | None) -> None:
        self.raw, self.digest = raw, digest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.raw.read(len(buffer))
        if self.digest is not None:
            self.digest.update(data)
        buffer[: len(data)] = data
        return len(data)
