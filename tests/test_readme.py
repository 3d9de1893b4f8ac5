"""The Python examples of the README and the user guide run as written."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
USER_GUIDE = ROOT / "docs" / "user-guide.md"


@pytest.mark.parametrize("document", [README, USER_GUIDE], ids=lambda path: path.name)
def test_python_blocks_run(document: Path):
    blocks = re.findall(r"```python\n(.*?)```", document.read_text(), flags=re.S)
    assert blocks, f"{document.name} should hold a Python example"
    for block in blocks:
        exec(compile(block, str(document), "exec"), {})
