"""Write a named block of benchmarks/RESULTS.md, keeping the rest of the file."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def replace_block(name: str, body: str, path: Path = RESULTS) -> None:
    """Put ``body`` between ``<!-- name:start -->`` and ``<!-- name:end -->`` (appended if new)."""
    start_tag, end_tag = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    block = f"{start_tag}\n{body}\n{end_tag}"
    text = path.read_text() if path.exists() else "# Benchmark results\n\n"
    if start_tag in text:
        text = text[: text.index(start_tag)] + block + text[text.index(end_tag) + len(end_tag) :]
    else:
        text += "\n" + block + "\n"
    path.write_text(text)
