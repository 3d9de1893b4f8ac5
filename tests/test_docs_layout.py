"""The docs are laid out by reader: relative links resolve, the README stays a front page, and
docs/boosters.md is a reference (its history lives in docs/notes/boosters-history.md)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOOSTERS = ROOT / "docs" / "boosters.md"
DOCUMENTS = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md",
                    *(ROOT / "docs").rglob("*.md")])
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HISTORY = re.compile(r"\b\d+(st|nd|rd|th) pass\b|\bpass \d+\b|\bissue[ -]?\d+\b"
                     r"|\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth"
                     r"|eleventh|twelfth|thirteenth|fourteenth|fifteenth|sixteenth|seventeenth"
                     r"|eighteenth|nineteenth|twentieth)('s)? pass", re.I)
#: `docs/boosters.md, "<title>"` as code and docs cite a section of it
CITATION = re.compile(r'docs/boosters\.md,?\s*(?:#\s*)?(?:\(\s*)?"([^"]+)"')


def prose(path: Path) -> str:
    """The file's text without its fenced code blocks."""
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings(path: Path) -> list[str]:
    return [line.lstrip("#").strip() for line in prose(path).splitlines()
            if re.match(r"#{1,6} ", line)]


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for heading in headings(path):
        base = slug(heading)
        found.add(base if base not in seen else f"{base}-{seen[base]}")
        seen[base] = seen.get(base, 0) + 1
    return found


def test_the_slugs_are_githubs() -> None:
    assert slug("### `boosters/online/oco_bandit.py`".lstrip("# ")) == "boostersonlineoco_banditpy"
    assert slug("The Hedge's losses") == "the-hedges-losses"
    assert slug("Durability: `appendfsync`") == "durability-appendfsync"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(document: Path) -> None:
    broken = []
    for target in LINK.findall(prose(document)):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        name, _, anchor = target.partition("#")
        path = (document.parent / name).resolve() if name else document
        if not path.exists():
            broken.append(f"{target}: no file {name}")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}: no heading #{anchor} in {path.relative_to(ROOT)}")
    assert not broken, "\n".join(broken)


def test_the_readme_is_a_front_page() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move sections into docs/"
    text = "\n".join(lines)
    for command in ("./scripts/serve", "./scripts/test"):
        assert command in text
        assert (ROOT / command).is_file()
    assert "## Two commands" in text


def test_results_md_is_a_results_page() -> None:
    """benchmarks/RESULTS.md holds the current figures and their commands; the full tables and
    the earlier runs live in benchmarks/notes/ (an updater's long block goes there too)."""
    lines = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 500, f"benchmarks/RESULTS.md has {len(lines)} lines"


def test_boosters_md_is_a_reference_not_a_log() -> None:
    text = BOOSTERS.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 700
    history = [line for line in text.splitlines() if HISTORY.search(line)]
    assert not history, "history belongs in docs/notes/boosters-history.md:\n" + "\n".join(history)


def test_the_history_regex_catches_pass_and_issue_mentions() -> None:
    for line in ("issue 15's eighteenth pass", "the 3rd pass", "Issue 40", "pass 12"):
        assert HISTORY.search(line), line
    assert not HISTORY.search("a model that passes 3 tests; the bypass; 12 passes")


def history_mentions(root: Path) -> list[str]:
    """Lines of code and docs that narrate the project's history ("issue N", "the Nth pass"):
    history belongs in commit messages, CHANGELOG.md and the notes folders."""
    skip = {"notes", "out", ".venv", "__pycache__"}
    paths = [root / name for name in ("README.md", "CONTRIBUTING.md", "docker-compose.yml",
                                      "pyproject.toml")]
    for folder in ("boosters", "learners", "service", "benchmarks", "tests", "scripts", "docs",
                   ".ci"):
        paths += [path for path in (root / folder).rglob("*") if path.is_file()
                  and path.suffix in {".py", ".md", ".sh", ".yml", ".yaml", ""}
                  and not skip & set(path.relative_to(root).parts)]
    found = []
    for path in paths:
        if path.resolve() == Path(__file__).resolve() or not path.exists():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if HISTORY.search(line):
                found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return found


def test_code_and_docs_do_not_narrate_history() -> None:
    found = history_mentions(ROOT)
    assert not found, "move these to a commit message or a notes folder:\n" + "\n".join(found)


def test_the_history_check_sees_a_mention(tmp_path: Path) -> None:
    (tmp_path / "boosters").mkdir()
    (tmp_path / "boosters" / "x.py").write_text('"""Fixed in the ninth pass."""\n')
    (tmp_path / "docs" / "notes").mkdir(parents=True)
    (tmp_path / "docs" / "notes" / "h.md").write_text("issue 15\n")
    assert [line.split(":")[0] for line in history_mentions(tmp_path)] == ["boosters/x.py"]


def test_every_cited_section_of_boosters_md_exists() -> None:
    """Code and docs cite docs/boosters.md by section title; each title is a heading of it."""
    # a booster's name stands for its module's section (egreedy_tree: boosters/online/baselines.py)
    titles = {heading.strip("`") for heading in headings(BOOSTERS)} | {"egreedy_tree"}
    code = [path for package in ("boosters", "learners", "service", "tests", "benchmarks")
            for path in (ROOT / package).rglob("*.py") if path != Path(__file__).resolve()]
    files = [*DOCUMENTS, *code]
    missing, cited = [], 0
    for path in files:
        text = " ".join(path.read_text(encoding="utf-8").split())  # citations wrap lines
        text = text.replace('" "', " ").replace("# ", "")
        for title in CITATION.findall(text):
            cited += 1
            if title not in titles:
                missing.append(f"{path.relative_to(ROOT)}: {title!r}")
    assert cited >= 20, "the citation pattern no longer finds the code's citations"
    assert not missing, "\n".join(sorted(set(missing)))
