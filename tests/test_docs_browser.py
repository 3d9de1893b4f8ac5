"""The docs pages render in a real headless browser (Debian's chromium) with no internet.

The service runs under uvicorn on a free 127.0.0.1 port; chromium resolves no other host
(``--host-resolver-rules``), so a page that needed a CDN would stay blank. Its DOM, dumped after
the page's scripts ran, must hold Swagger UI's operation blocks (``/docs``) and ReDoc's operation
sections (``/redoc``), also with API keys configured (the docs are open by default; the
operations ask for their key through the Authorize button). ``./scripts/test`` installs chromium
when missing; without the binary these tests skip, saying so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from service.api.app import create_app
from service.settings import Settings
from tests.conftest import free_port

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None and os.environ.get("CI"):  # skip locally, but CI must have installed it
    pytest.fail("chromium is not installed: ./scripts/test installs it", pytrace=False)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; "
    "./scripts/test installs it)"
)

#: operation ids every rendering must show (one per router)
OPERATIONS = [
    "healthz_healthz_get",
    "create_model_v1_models_post",
    "predict_v1_models__name__predict_post",
    "set_serving_v1_models__name__serving_put",
    "rank_personalizer_v1_0_rank_post",
]


@pytest.fixture(scope="module")
def served(redis_server) -> Iterator[str]:  # noqa: ANN001 - conftest's RedisServer
    """The app with API keys configured, under uvicorn on a free loopback port; its base URL."""
    settings = Settings(redis_url=redis_server.url, api_keys="user-key", admin_keys="admin-key")
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    yield base
    server.should_exit = True
    thread.join(10)


def dump_dom(url: str, tmp_path: Path) -> str:
    """The DOM of ``url`` after its scripts ran (15 s of virtual time), by headless chromium."""
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={tmp_path / 'chromium'}",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            "--virtual-time-budget=15000", "--dump-dom", url]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_swagger_ui_renders_the_operations_offline(served: str, tmp_path: Path) -> None:
    dom = dump_dom(f"{served}/docs", tmp_path)
    assert "Failed to load API definition" not in dom, dom[-3000:]
    for operation in OPERATIONS:
        tag = {"healthz": "health", "create": "models", "predict": "decisions",
               "set": "policies", "rank": "personalizer"}[operation.split("_")[0]]
        assert f'id="operations-{tag}-{operation}"' in dom, f"{operation} not rendered"
    assert dom.count('class="opblock opblock-') >= 16  # every operation of the API
    assert "btn authorize" in dom  # the security schemes' Authorize button


def test_redoc_renders_the_operations_offline(served: str, tmp_path: Path) -> None:
    dom = dump_dom(f"{served}/redoc", tmp_path)
    for operation in OPERATIONS:
        assert f'data-section-id="operation/{operation}"' in dom, f"{operation} not rendered"


def test_the_pages_load_nothing_from_elsewhere(served: str) -> None:
    """What the browser was given names no other host (the DOM tests above prove it renders
    without one; this says why)."""
    for page in ("/docs", "/redoc"):
        html = httpx.get(f"{served}{page}", timeout=10, trust_env=False).text
        assert "://" not in html, html
    assert httpx.get(f"{served}/v1/models", timeout=10, trust_env=False).status_code == 401
