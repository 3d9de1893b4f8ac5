"""The README's examples run as written: its Python blocks (and the user guide's), and its
shell blocks against a service started on a fresh data directory."""

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from service.api.server import free_port

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
USER_GUIDE = ROOT / "docs" / "user-guide.md"


@pytest.mark.slow
@pytest.mark.parametrize("document", [README, USER_GUIDE], ids=lambda path: path.name)
def test_python_blocks_run(document: Path):
    blocks = re.findall(r"```python\n(.*?)```", document.read_text(), flags=re.S)
    assert blocks, f"{document.name} should hold a Python example"
    for block in blocks:
        exec(compile(block, str(document), "exec"), {})


def shell_blocks(document: Path) -> list[str]:
    """The README's ``bash`` blocks a user runs against a started service (the set-up block,
    ``./scripts/...``, is what CI itself runs)."""
    blocks = re.findall(r"```bash\n(.*?)```", document.read_text(), flags=re.S)
    return [block for block in blocks if "./scripts/" not in block]


def as_test(block: str, port: int) -> str:
    """A README block as the test runs it: the service on its own port, curl failing on an HTTP
    error, the environment's ``bin`` on PATH as ``source .venv/bin/activate`` puts it."""
    bin_dir = Path(sys.executable).parent
    block = block.replace("localhost:8000", f"127.0.0.1:{port}").replace("curl ", "curl -sSf ")
    return block.replace("source .venv/bin/activate", f'export PATH="{bin_dir}:$PATH"')


@pytest.mark.slow
def test_the_readme_commands_run_as_written(tmp_path: Path):
    """The quick start's requests and commands, in order, against ``boostbandit serve`` on a
    fresh data directory (its embedded Redis): each exits 0, and what they write exists."""
    blocks = shell_blocks(README)
    assert len(blocks) >= 2 and "curl -X POST" in blocks[0] and "boostbandit" in blocks[1]
    boostbandit = Path(sys.executable).parent / "boostbandit"
    assert boostbandit.exists(), "the project is not installed in this environment"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_", "BOOSTBANDIT_"))}
    log = (tmp_path / "serve.log").open("wb")
    serve = subprocess.Popen([str(boostbandit), "serve", "--port", str(port)], cwd=tmp_path,
                             env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not _ready(port):
            assert serve.poll() is None and time.monotonic() < deadline, \
                (tmp_path / "serve.log").read_text()[-2000:]
            time.sleep(0.2)
        for block in blocks:
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", as_test(block, port)],
                                  cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=600)
            assert done.returncode == 0, f"{block}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(30)
    assert (tmp_path / "news.dsjson").stat().st_size > 0
    assert (tmp_path / "car.png").stat().st_size > 0
    assert (tmp_path / "boostbandit-data").is_dir()


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False
