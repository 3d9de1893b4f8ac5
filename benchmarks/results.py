"""Write a named block of benchmarks/RESULTS.md (or of the notes file that holds it), keeping the
rest of the file.

RESULTS.md holds each study's current headline; the full tables, earlier runs and working notes
live in ``benchmarks/notes/*.md``. A block is rewritten where it is: in RESULTS.md if it has the
block's markers, else in the first notes file that has them, else it is appended to RESULTS.md.
"""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
NOTES = RESULTS.parent / "notes"


def block_file(name: str, path: Path = RESULTS) -> Path:
    """The file whose ``<!-- name:start -->`` block to rewrite: ``path``, or for the project's
    RESULTS.md the notes file holding the block when RESULTS.md does not."""
    start_tag = f"<!-- {name}:start -->"
    if not path.exists() or start_tag in path.read_text() or path != RESULTS:
        return path
    for note in sorted(NOTES.glob("*.md")):
        if start_tag in note.read_text():
            return note
    return path


def replace_block(name: str, body: str, path: Path = RESULTS) -> None:
    """Put ``body`` between ``<!-- name:start -->`` and ``<!-- name:end -->`` (appended if new)."""
    path = block_file(name, path)
    start_tag, end_tag = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    block = f"{start_tag}\n{body}\n{end_tag}"
    text = path.read_text() if path.exists() else "# Benchmark results\n\n"
    if start_tag in text:
        text = text[: text.index(start_tag)] + block + text[text.index(end_tag) + len(end_tag) :]
    else:
        text += "\n" + block + "\n"
    path.write_text(text)
