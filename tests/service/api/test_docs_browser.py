"""The docs pages render in a real headless browser (Debian's chromium) with no internet.

The service runs under uvicorn on a free 127.0.0.1 port; chromium sends every request for another
host to a local sink (``--proxy-server``) that answers nothing and records the host, so a page
that needed a CDN would stay blank, and one that merely asked for something outside (a logo)
is caught. Its DOM, dumped after
the page's scripts ran, must hold Swagger UI's operation blocks (``/docs``) and ReDoc's operation
sections (``/redoc``), also with API keys configured (the docs are open by default; the
operations ask for their key through the Authorize button). ``./scripts/test`` installs chromium
when missing; without the binary these tests skip, saying so.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

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


#: the domains of chromium's own background requests (not the pages')
CHROMIUM_OWN = (".google.com", ".googleapis.com", ".gstatic.com", ".gvt1.com")


class Sink:
    """A TCP server on a free loopback port that records the first line each client sends (a
    proxy's ``CONNECT host:443`` or ``GET http://host/...``) and closes the connection."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.asked: list[str] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:  # closed
                return
            with conn:
                conn.settimeout(2)
                with contextlib.suppress(OSError):
                    self.asked.append(conn.recv(4096).split(b"\r\n", 1)[0].decode(errors="replace"))

    def hosts(self) -> list[str]:
        """The hosts the pages asked for: every recorded request but chromium's own background
        ones (its clock, updates, accounts and autofill services on Google's domains)."""
        asked = [urlsplit(line.split()[1] if "://" in line else "//" + line.split()[1]).hostname
                 for line in self.asked if len(line.split()) > 1]
        return [host for host in asked if not str(host).endswith(CHROMIUM_OWN)]

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def sink() -> Iterator[Sink]:
    server = Sink()
    yield server
    server.close()


def dump_dom(url: str, tmp_path: Path, sink: Sink) -> str:
    """The DOM of ``url`` after its scripts ran (15 s of virtual time), by headless chromium
    whose requests for any host but 127.0.0.1 go to ``sink``."""
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={tmp_path / 'chromium'}",
            f"--proxy-server=http://127.0.0.1:{sink.port}",
            "--virtual-time-budget=15000", "--dump-dom", url]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.slow
def test_swagger_ui_renders_the_operations_offline(served: str, tmp_path: Path, sink) -> None:
    dom = dump_dom(f"{served}/docs", tmp_path, sink)
    assert sink.hosts() == []  # nothing asked of another host
    assert "Failed to load API definition" not in dom, dom[-3000:]
    for operation in OPERATIONS:
        tag = {"healthz": "health", "create": "models", "predict": "decisions",
               "set": "policies", "rank": "personalizer"}[operation.split("_")[0]]
        assert f'id="operations-{tag}-{operation}"' in dom, f"{operation} not rendered"
    assert dom.count('class="opblock opblock-') >= 16  # every operation of the API
    assert "btn authorize" in dom  # the security schemes' Authorize button


@pytest.mark.slow
def test_redoc_renders_the_operations_offline(served: str, tmp_path: Path, sink) -> None:
    dom = dump_dom(f"{served}/redoc", tmp_path, sink)
    assert sink.hosts() == []  # nothing asked of another host (ReDoc's menu shows a CDN logo)
    for operation in OPERATIONS:
        assert f'data-section-id="operation/{operation}"' in dom, f"{operation} not rendered"


def test_the_pages_load_nothing_from_elsewhere(served: str) -> None:
    """What the browser was given names no other host (the DOM tests above prove it renders
    without one; this says why)."""
    for page in ("/docs", "/redoc"):
        response = httpx.get(f"{served}{page}", timeout=10, trust_env=False)
        assert "://" not in response.text, response.text
        assert "default-src 'self'" in response.headers["content-security-policy"]
    assert httpx.get(f"{served}/v1/models", timeout=10, trust_env=False).status_code == 401
