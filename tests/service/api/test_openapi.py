"""The OpenAPI contract (``app.openapi()``) and who may read the docs and the metrics.

The contract of every operation but the Personalizer ones
(tests/service/personalizer/test_personalizer.py has those): the statuses each can answer are
declared, request bodies carry examples that the API accepts, every field and parameter is
described, descriptions are Markdown (no reStructuredText
from docstrings), numeric bounds are JSON Schema's (also on nullable fields), and both key
schemes are declared. Then ``docs_access`` / ``metrics_access`` and their keys, over HTTP.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.api import schemas
from service.api.app import create_app
from service.settings import Settings

UNREACHABLE = "redis://127.0.0.1:1/0"  # the spec is built without connecting
PERSONALIZER = "/personalizer/"

#: what each operation can answer, read from its code: the routers' own errors, 401 with keys
#: configured, 403 for the admin operations, 400/413/422 for a body (not JSON, too large,
#: invalid), 422 for parameters, 503 when Redis is down or does not answer
CAN_ANSWER = {
    ("get", "/healthz"): {200},
    ("get", "/readyz"): {200, 503},
    ("get", "/metrics"): {200, 401},
    ("get", "/v1/models"): {200, 401, 503},
    ("post", "/v1/models"): {201, 400, 401, 403, 409, 413, 422, 503},
    ("get", "/v1/models/{name}"): {200, 401, 404, 422, 503},
    ("delete", "/v1/models/{name}"): {204, 401, 403, 404, 422, 503},
    ("post", "/v1/models/{name}/predict"): {200, 400, 401, 404, 409, 413, 422, 503},
    ("post", "/v1/models/{name}/feedback"): {200, 400, 401, 404, 413, 422, 503},
    ("get", "/v1/models/{name}/policies"): {200, 401, 404, 422, 503},
    ("get", "/v1/models/{name}/policies/{version}"): {200, 401, 404, 422, 503},
    ("get", "/v1/models/{name}/serving"): {200, 401, 404, 422, 503},
    ("put", "/v1/models/{name}/serving"): {200, 400, 401, 403, 404, 409, 413, 422, 503},
}
RST = re.compile(r"``|:(class|mod|func|meth|attr|data|ref):`")


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    settings = Settings(redis_url=UNREACHABLE, api_keys="user", admin_keys="admin")
    return create_app(settings).openapi()


def native_operations(spec: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in spec["paths"].items():
        if not path.startswith(PERSONALIZER):
            for method, operation in item.items():
                yield method, path, operation


def resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    return spec["components"]["schemas"][ref.rsplit("/", 1)[-1]] if ref else schema


def native_schemas(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The component schemas the native operations reference, directly or nested."""
    found: dict[str, dict[str, Any]] = {}
    stack: list[Any] = [op for _, _, op in native_operations(spec)]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
                name = ref.rsplit("/", 1)[-1]
                if name not in found:
                    found[name] = spec["components"]["schemas"][name]
                    stack.append(found[name])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def strings(item: Any) -> Iterator[str]:
    if isinstance(item, str):
        yield item
    elif isinstance(item, dict):
        for value in item.values():
            yield from strings(value)
    elif isinstance(item, list):
        for value in item:
            yield from strings(value)


def test_every_operation_declares_what_it_can_answer(spec: dict[str, Any]) -> None:
    operations = {(m, p): op for m, p, op in native_operations(spec)}
    assert set(operations) == set(CAN_ANSWER), "an operation was added: say what it answers"
    for key, operation in operations.items():
        declared = {int(code) for code in operation["responses"]}
        assert CAN_ANSWER[key] <= declared, (key, sorted(CAN_ANSWER[key] - declared))
        for code, response in operation["responses"].items():
            assert response.get("description"), (key, code)
            if int(code) >= 400:  # errors are JSON with a schema
                assert response["content"]["application/json"]["schema"], (key, code)


def test_error_schemas_are_the_bodies_the_app_sends(spec: dict[str, Any]) -> None:
    """422: a list of problems or a message (both answered); the other errors: a message."""
    create = spec["paths"]["/v1/models"]["post"]["responses"]
    invalid = resolve(spec, create["422"]["content"]["application/json"]["schema"])
    kinds = invalid["properties"]["detail"]["anyOf"]
    assert {"array", "string"} == {kind.get("type") for kind in kinds}
    error = resolve(spec, create["409"]["content"]["application/json"]["schema"])
    assert error["properties"]["detail"]["type"] == "string"
    schemas.Invalid.model_validate({"detail": "too many actions"})
    schemas.Invalid.model_validate({"detail": [{"type": "missing", "loc": ["body", "name"],
                                                "msg": "Field required"}]})


@pytest.mark.slow
def test_security_schemes_and_requirements(spec: dict[str, Any]) -> None:
    schemes = spec["components"]["securitySchemes"]
    assert schemes["apiKey"] == {**schemes["apiKey"], "type": "http", "scheme": "bearer"}
    assert schemes["subscriptionKey"] == {**schemes["subscriptionKey"], "type": "apiKey",
                                          "in": "header", "name": "Ocp-Apim-Subscription-Key"}
    for method, path, operation in native_operations(spec):
        expected = None if path in ("/healthz", "/readyz") else [{"apiKey": []}]
        assert operation.get("security") == expected, (method, path)
    rank = spec["paths"]["/personalizer/v1.0/rank"]["post"]
    assert {next(iter(r)) for r in rank["security"]} == {"apiKey", "subscriptionKey"}
    open_metrics = create_app(Settings(redis_url=UNREACHABLE, api_keys="u",
                                       metrics_access="open")).openapi()
    assert "security" not in open_metrics["paths"]["/metrics"]["get"]
    # no key configured: nothing is enforced, and the spec says so
    keyless = create_app(Settings(redis_url=UNREACHABLE)).openapi()
    assert "securitySchemes" not in keyless["components"]
    assert not [op for item in keyless["paths"].values() for op in item.values()
                if "security" in op]
    only_metrics = create_app(Settings(redis_url=UNREACHABLE, metrics_keys="m")).openapi()
    assert [p for p, item in only_metrics["paths"].items() for op in item.values()
            if "security" in op] == ["/metrics"]


def test_request_bodies_have_examples_the_api_accepts(spec: dict[str, Any]) -> None:
    bodies = 0
    for method, path, operation in native_operations(spec):
        if "requestBody" not in operation:
            continue
        bodies += 1
        ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        name = ref.rsplit("/", 1)[-1]
        examples = spec["components"]["schemas"][name].get("examples")
        assert examples, (method, path)
        for example in examples:
            getattr(schemas, name).model_validate(example)  # raises if the API would refuse it
    assert bodies == 4  # create, predict, feedback, serving


def test_every_field_and_parameter_is_described(spec: dict[str, Any]) -> None:
    for name, schema in native_schemas(spec).items():
        assert schema.get("description"), name
        for field, prop in schema.get("properties", {}).items():
            assert prop.get("description"), f"{name}.{field} has no description"
    for method, path, operation in native_operations(spec):
        assert operation.get("description"), (method, path)
        for parameter in operation.get("parameters", []):
            assert parameter.get("description"), (method, path, parameter["name"])


def test_descriptions_are_markdown(spec: dict[str, Any]) -> None:
    native = [op for _, _, op in native_operations(spec)] + list(native_schemas(spec).values())
    for text in strings([native, spec["info"], spec["components"]["securitySchemes"]]):
        assert not RST.search(text), f"reStructuredText in the OpenAPI: {text[:200]!r}"


def test_numeric_bounds_are_json_schema_on_nullable_fields_too(spec: dict[str, Any]) -> None:
    components = spec["components"]["schemas"]

    def number(schema: str, field: str) -> dict[str, Any]:
        prop = components[schema]["properties"][field]
        return next(k for k in prop.get("anyOf", [prop]) if k.get("type") == "number")

    assert number("FeedbackRequest", "reward") | {"minimum": 0, "maximum": 1} == \
        number("FeedbackRequest", "reward")
    assert number("ServingRequest", "temperature")["minimum"] == 0
    assert number("ServingRequest", "min_propensity") | {"exclusiveMinimum": 0, "maximum": 0.5} \
        == number("ServingRequest", "min_propensity")
    assert number("CreateModel", "default_reward") | {"minimum": 0, "maximum": 1} == \
        number("CreateModel", "default_reward")
    keys: list[str] = []
    stack: list[Any] = [spec]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            keys.extend(k for k in item if k in ("ge", "le", "gt", "lt"))
            stack.extend(v for k, v in item.items() if k != "examples")
        elif isinstance(item, list):
            stack.extend(item)
    assert not keys, f"pydantic bounds left as keywords JSON Schema ignores: {keys}"


# --- over HTTP ---------------------------------------------------------------------------------


def basic(key: str) -> tuple[str, str]:
    return ("anyone", key)


def test_docs_are_open_by_default_with_keys_configured() -> None:
    with TestClient(create_app(Settings(redis_url=UNREACHABLE, api_keys="user"))) as c:
        for page in ("/docs", "/redoc", "/openapi.json", "/docs-assets/swagger-ui-bundle.js"):
            assert c.get(page).status_code == 200, page
        assert "/docs-assets/swagger-ui-bundle.js" in c.get("/docs").text
        assert "/docs-assets/redoc.standalone.js" in c.get("/redoc").text


def test_docs_with_their_own_keys() -> None:
    settings = Settings(redis_url=UNREACHABLE, api_keys="user", docs_access="keys",
                        docs_keys="reader")
    with TestClient(create_app(settings)) as c:
        for page in ("/docs", "/redoc", "/openapi.json"):
            r = c.get(page)
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Basic")
            assert c.get(page, auth=basic("wrong")).status_code == 401
            assert c.get(page, auth=basic("reader")).status_code == 200  # a browser's prompt
            assert c.get(page, headers={"Authorization": "Bearer reader"}).status_code == 200
            assert c.get(page, headers={"Authorization": "Bearer user"}).status_code == 200
        assert c.get("/openapi.json", headers={"Authorization": "Basic !!"}).status_code == 401
        # a docs key is no API key
        assert c.get("/v1/models", headers={"Authorization": "Bearer reader"}).status_code == 401


def test_docs_off() -> None:
    with TestClient(create_app(Settings(redis_url=UNREACHABLE, docs_access="off"))) as c:
        for page in ("/docs", "/redoc", "/openapi.json", "/docs-assets/swagger-ui.css"):
            assert c.get(page).status_code == 404, page


def test_metrics_keys(redis_url: str) -> None:
    settings = Settings(redis_url=redis_url, api_keys="user", metrics_keys="scraper")
    with TestClient(create_app(settings)) as c:
        r = c.get("/metrics")
        assert r.status_code == 401 and "metrics" in r.json()["detail"]
        for auth in ({"headers": {"Authorization": "Bearer scraper"}},
                     {"auth": basic("scraper")}, {"headers": {"Authorization": "Bearer user"}}):
            r = c.get("/metrics", **auth)
            assert r.status_code == 200 and "boostbandit_requests_total" in r.text, auth
        assert c.get("/metrics", headers={"Authorization": "Bearer nope"}).status_code == 401
        # a metrics key is no API key
        assert c.get("/v1/models", headers={"Authorization": "Bearer scraper"}).status_code == 401
    settings = Settings(redis_url=redis_url, api_keys="user", metrics_access="open")
    with TestClient(create_app(settings)) as c:
        assert c.get("/metrics").status_code == 200
        assert c.get("/v1/models").status_code == 401


def test_method_not_allowed_lists_every_method_of_the_path() -> None:
    with TestClient(create_app(Settings(redis_url=UNREACHABLE))) as c:
        for method, path, allow in [("OPTIONS", "/v1/models/m", "DELETE, GET"),
                                    ("PATCH", "/v1/models/m/serving", "GET, PUT"),
                                    ("DELETE", "/v1/models", "GET, POST")]:
            r = c.request(method, path)
            assert r.status_code == 405 and r.headers["allow"] == allow, (path, r.headers)


def test_create_model_says_which_params_each_booster_takes(spec: dict[str, Any]) -> None:
    branches = spec["components"]["schemas"]["CreateModel"]["oneOf"]
    by_booster = {b["properties"]["booster"]["const"]: b["properties"]["params"]
                  for b in branches}
    assert by_booster["uniform"]["propertyNames"]["enum"] == ["seed"]
    assert "n_learners" in by_booster["adabandit"]["propertyNames"]["enum"]
    assert by_booster["adabandit"]["properties"]["fast_trees"] == {"type": "boolean"}


def test_booster_flags_must_be_booleans(redis_url: str) -> None:
    with TestClient(create_app(Settings(redis_url=redis_url))) as c:
        body = {"name": "flags", "booster": "adabandit", "actions": ["a", "b"]}
        for value in ("no", 0, 1, None):
            r = c.post("/v1/models", json={**body, "params": {"fast_trees": value}})
            assert r.status_code == 422 and "fast_trees must be true or false" in r.text, r.text
        params = {"fast_trees": False, "n_learners": 2, "seed": 7.0}  # an integer for JSON
        r = c.post("/v1/models", json={**body, "params": params})
        assert r.status_code == 201 and r.json()["params"]["seed"] == 7, r.text
        assert isinstance(r.json()["params"]["seed"], int)
        assert c.delete("/v1/models/flags").status_code == 204
