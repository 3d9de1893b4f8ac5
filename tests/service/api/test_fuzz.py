"""Schemathesis over the app's OpenAPI: no operation answers a 5xx, whatever the input, and the
native operations keep their contract.

Every operation of ``/openapi.json`` is fuzzed in-process (ASGI) against a redis-server of this
module, with the learner running: ``BOOSTBANDIT_FUZZ_EXAMPLES`` examples each (default 200) in
Schemathesis's examples, coverage and fuzzing phases (valid and invalid data), checked with
``not_a_server_error`` and, on every operation but the Personalizer ones, the contract checks
of :data:`CONTRACT`. Half of the valid cases have their path parameters, event ids, rank action
sets and model parameters steered onto a seeded model and its events (``benchmarks/load/fuzz.py``'s
hook), so the fuzzer reaches the routes' logic and not only 404s.
``BOOSTBANDIT_FUZZ_SEED`` repeats a run (a failure prints its seed). ``python -m
benchmarks.load.fuzz`` is the longer run, over HTTP against ``boostbandit serve``, with every check.

The tests after the fuzz run pin the server errors it found (fixed; they answer 4xx now).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, note, settings

from benchmarks.load.fuzz import DOOMED, MODEL, NEGATIVE_DATA_STATUSES, spare_model, steer_case
from service.api.app import create_app
from service.api.middleware import route_template
from service.settings import Settings
from tests.conftest import fuzz_target

schemathesis = pytest.importorskip("schemathesis")
from schemathesis.checks import (  # noqa: E402
    allow_header_conformance,
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

#: the OpenAPI contract, checked on every operation but the Personalizer ones (their envelope
#: is theirs: tests/service/personalizer/test_personalizer.py). Not positive_data_acceptance:
#: some schema-valid requests fail a check against the model (a label or excluded action it does not
#: have, a min_propensity above 1/its number of actions), which no schema can say.
CONTRACT = [not_a_server_error, status_code_conformance, response_schema_conformance,
            content_type_conformance, response_headers_conformance, allow_header_conformance,
            negative_data_rejection]

EXAMPLES = int(os.environ.get("BOOSTBANDIT_FUZZ_EXAMPLES", "200"))

FUZZ_SETTINGS = dict(
    run_learner=True,
    redis_async="off",  # the app's lifespan runs in another event loop than the requests
    learner_block_ms=20,
    learner_lease_seconds=2.0,
    snapshot_every_events=500,
    redis_timeout_seconds=2.0,
    max_body_bytes=16384,
    max_features=50,
    personalizer_params={"n_learners": 3},
    personalizer_reward_wait_seconds=5.0,
)


class _Target:
    """The ASGI app under test, set by the fixture once its Redis is up (the schema is built at
    import, for pytest's collection, from an app that is never started). Counts the answers."""

    app: Any = None
    statuses: Counter = Counter()  # ("METHOD route", status) -> answers

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":  # the lifespan is run by the fixture's TestClient
            return

        async def counting(message) -> None:
            if message["type"] == "http.response.start":
                route = route_template(scope)
                self.statuses[f"{scope['method']} {route}", message["status"]] += 1
            await send(message)

        await self.app(scope, receive, counting)


TARGET = _Target()
schema = schemathesis.openapi.from_dict(
    create_app(Settings(redis_url="redis://127.0.0.1:1/0", **FUZZ_SETTINGS)).openapi()
)
schema.app = TARGET
if os.environ.get("BOOSTBANDIT_FUZZ_SEED"):
    schema.config.seed = int(os.environ["BOOSTBANDIT_FUZZ_SEED"])
schema.hook("map_case")(spare_model)
schema.hook("flatmap_case")(steer_case)
# invalid data answered 413 (a body over max_body_bytes) is rejected too
schema.config.checks.negative_data_rejection.expected_statuses = NEGATIVE_DATA_STATUSES


@pytest.fixture(scope="module", autouse=True)
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The app on a redis-server of this module, with the seeded model and events."""
    with fuzz_target(tmp_path_factory.mktemp("fuzz-redis"), TARGET, **FUZZ_SETTINGS) as client:
        yield client
    print(f"\nfuzz answers (seed {schema.config.seed}):")  # shown with -s
    for (route, code), n in sorted(TARGET.statuses.items()):
        print(f"  {route} {code}: {n}")


#: Personalizer's administration operations: each call may retrain every model, evaluate or
#: export, so they get a quarter of the examples
#: (tests/service/personalizer/test_personalizer_contract.py fuzzes them too)
ADMIN = r"^/personalizer/v1\.0/(configurations|evaluations|model|logs|featureImportances)"


def _fuzz(case) -> None:
    note(f"repeat with BOOSTBANDIT_FUZZ_SEED={schema.config.seed}")
    personalizer = case.operation.path.startswith("/personalizer/")
    case.call_and_validate(checks=[not_a_server_error] if personalizer else CONTRACT)


@pytest.mark.slow
@schema.exclude(path_regex=ADMIN).parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck),
          database=None)
def test_no_server_errors(case) -> None:
    _fuzz(case)


@pytest.mark.slow
@schema.include(path_regex=ADMIN).parametrize()
@settings(max_examples=max(1, EXAMPLES // 4), deadline=None,
          suppress_health_check=list(HealthCheck), database=None)
def test_no_server_errors_in_administration(case) -> None:
    _fuzz(case)


def test_the_fuzzer_reached_the_routes_logic() -> None:
    """The steering works: the seeded model answered predict, feedback and rank (not only 404s
    and validation errors)."""
    if not TARGET.statuses:
        pytest.skip("the fuzz run was deselected")
    ok = {route for (route, code), n in TARGET.statuses.items() if 200 <= code < 300}
    for route in ("POST /v1/models", "POST /v1/models/{name}/predict",
                  "POST /v1/models/{name}/feedback", "POST /personalizer/v1.0/rank",
                  "POST /personalizer/v1.0/events/{eventId}/reward"):
        assert route in ok, f"{route} never answered 2xx: {sorted(TARGET.statuses.items())}"


@pytest.mark.parametrize("method, name, kept", [
    ("DELETE", MODEL, DOOMED), ("DELETE", "other", "other"), ("GET", MODEL, MODEL)])
def test_a_generated_delete_spares_the_seeded_model(method: str, name: str, kept: str) -> None:
    """Hypothesis draws the code's string literals, so a generated (not steered) case can DELETE
    the seeded model: with seed 210254058604148625076823166461264839657 one did, and every later
    request to it answered 404. Such a DELETE goes to the doomed model."""
    from types import SimpleNamespace

    context = SimpleNamespace(operation=SimpleNamespace(method=method))
    case = SimpleNamespace(path_parameters={"name": name})
    assert spare_model(context, case) is case and case.path_parameters == {"name": kept}
    # registered as map_case, which Schemathesis applies in every generating phase (coverage
    # included), not only as flatmap_case
    assert spare_model in schema.hooks.get_all()["map_case"]


# --- server errors the fuzzing found (fixed) ---------------------------------------------------


@pytest.mark.parametrize("params, problem", [
    # NaN/Infinity parse (Python's JSON reader takes them), the booster took them, then storing
    # the config (JSON without NaN) raised: 500
    ('{"fast_trees": NaN}', "not a finite number"),
    ('{"fixed_trees": [1, {"a": -Infinity}]}', "not a finite number"),
    # a config stored with deeply nested params: its answer could not be serialised (500), nor
    # any later GET /v1/models (500 until the model was deleted)
    ('{"fixed_trees": ' + "[" * 500 + "1" + "]" * 500 + "}", "deeper than 16 levels"),
])
def test_unstorable_params_are_422(served: TestClient, params: str, problem: str) -> None:
    body = '{"name": "fz-params", "booster": "adabandit", "actions": ["a", "b"], "params": '
    r = served.post("/v1/models", content=body + params + "}",
                    headers={"content-type": "application/json"})
    assert r.status_code == 422 and problem in r.text, r.text
    assert served.get("/v1/models/fz-params").status_code == 404
    assert served.get("/v1/models").status_code == 200
    assert served.get(f"/v1/models/{MODEL}").status_code == 200
