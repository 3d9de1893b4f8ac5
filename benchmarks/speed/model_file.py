"""The Personalizer model file as data (version 2) against the pickles of version 1: file sizes
through the real API, and the codec's times against pickle's.

Through the API (a redis-server of its own, the app under uvicorn on a free 127.0.0.1 port, the
scenario of tests/service/personalizer/test_personalizer_model.py: four actions, two features, each
event learned before the next): train, export a signed file (version 2), and write the version-1
file of the same booster (its pickle and its serving copy's, deflated as the export deflates). Then,
on the exported booster: ``service.models.modeldata.dumps``/``loads`` against ``pickle.dumps``, the
allow-listed ``service.models.snapshots.loads`` and plain ``pickle.loads`` (best of 7).

    python -m benchmarks.speed.model_file                 # 5 learners / 240 events, 20 / 2000
    python -m benchmarks.speed.model_file --cases 5:240
"""

from __future__ import annotations

import argparse
import io
import json
import pickle
import tempfile
import time
import zipfile
from pathlib import Path


def version_1_size(manifest: dict, booster) -> int:
    """The bytes of a version-1 file of ``booster``: its pickles, deflated."""
    from learners.frozen import dumps_serving
    from service.models.snapshots import dumps_whole

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("manifest.json", json.dumps(manifest, indent=1, sort_keys=True))
        z.writestr("models/m/booster.pkl", dumps_whole(booster))
        z.writestr("models/m/serving.pkl", dumps_serving(booster))
        z.writestr("signature.json", json.dumps({"algorithm": "HMAC-SHA256", "hmac": "0" * 64}))
    return len(out.getvalue())


def best_ms(call, runs: int = 7) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def exported(url: str, learners: int | None, events: int) -> bytes:
    """A signed export after ``events`` events of a model of ``learners`` (None: default)."""
    import redis

    from service.api.server import serve_in_thread as serve
    from tests import test_personalizer_model as t

    redis.Redis.from_url(url).flushdb()
    params = {"seed": 3} if learners is None else {"n_learners": learners, "seed": 3}
    with serve(t.settings(url).model_copy(update={"personalizer_params": params})) as base:
        client, admin = t.clients(base)
        t.train(client, base, events, "t")
        return b"".join(admin.export_model(signed=True))


def case(url: str, learners: int | None, events: int) -> dict:
    from service.models import modeldata, snapshots

    data = exported(url, learners, events)
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        manifest = json.loads(z.read("manifest.json"))
        blob = z.read(manifest["models"][0]["booster"]["path"])
    booster = modeldata.loads(blob)
    whole = snapshots.dumps_whole(booster)
    return {
        "learners": learners or 20, "events": events, "file_v2": len(data),
        "file_v1": version_1_size(manifest, booster), "data": len(blob), "pickle": len(whole),
        "encode_ms": best_ms(lambda: modeldata.dumps(booster)),
        "decode_ms": best_ms(lambda: modeldata.loads(blob)),
        "pickle_ms": best_ms(lambda: snapshots.dumps_whole(booster)),
        "unpickle_allow_listed_ms": best_ms(lambda: snapshots.loads(whole)),
        "unpickle_plain_ms": best_ms(lambda: pickle.loads(whole)),
    }


def main(argv: list[str] | None = None) -> int:
    from service.api.server import free_port
    from tests.conftest import RedisServer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["5:240", "default:2000"],
                        help="LEARNERS:EVENTS (LEARNERS 'default': the booster's default)")
    args = parser.parse_args(argv)
    server = RedisServer(free_port(), Path(tempfile.mkdtemp(prefix="bb-model-file-")))
    server.start()
    try:
        for spec in args.cases:
            learners, events = spec.split(":")
            row = case(server.url, None if learners == "default" else int(learners), int(events))
            print(json.dumps({k: round(v, 2) if isinstance(v, float) else v
                              for k, v in row.items()}))
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
