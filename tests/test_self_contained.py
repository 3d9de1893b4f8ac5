"""The project's code and docs are self-contained: they cite papers by name and docs/, never a
path outside the repository (``../shared``, ``shared/specs``) or an internal seed number."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: what must not appear (case-insensitive): outside paths and internal seed numbers
FORBIDDEN = re.compile(r"\.\./shared|shared/specs|seed[ -]00\d", re.IGNORECASE)


def forbidden_mentions(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line of ``text`` with a forbidden mention."""
    return [
        (number, line.strip())
        for number, line in enumerate(text.splitlines(), start=1)
        if FORBIDDEN.search(line)
    ]


def checked_files() -> list[Path]:
    packages = ("boosters", "learners", "service")
    files = [path for package in packages for path in (ROOT / package).rglob("*.py")]
    return sorted(files + [ROOT / "README.md", *(ROOT / "docs").glob("*.md")])


def test_the_check_catches_each_forbidden_form():
    text = (
        "fine line\n"
        "Implements ../shared/specs/bopl.md section 1\n"
        "see shared/specs/agnostic_boosting.md\n"
        "as in Seed 001's Table 1\n"
        "the seed-003 datasets\n"
        "a seed 42 run and docs/papers.md are fine\n"
    )
    assert [number for number, _ in forbidden_mentions(text)] == [2, 3, 4, 5]


def test_code_and_docs_cite_no_outside_paths_or_seed_numbers():
    files = checked_files()
    assert ROOT / "docs" / "papers.md" in files and len(files) > 20
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line}"
        for path in files
        for number, line in forbidden_mentions(path.read_text(encoding="utf-8"))
    ]
    assert not found, "cite the paper by name or docs/ instead:\n" + "\n".join(found)
