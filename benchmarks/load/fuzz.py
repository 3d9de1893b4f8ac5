"""Schemathesis over the served API: every operation of ``/openapi.json``, every check.

The longer twin of ``tests/service/api/test_fuzz.py`` (which runs in-process with
``not_a_server_error`` only). This script starts its own ``redis-server`` and the service as
production runs it (``python -m service serve``: uvicorn, API and learner thread in one process) on
127.0.0.1, seeds one model with decided events and Personalizer events on its action set, then runs
Schemathesis's command line against it (phases examples, coverage, fuzzing and stateful; ``--checks
all``) with this module as its hooks module, which steers half of the valid cases' path parameters,
event ids, rank action sets and model parameters onto the seeded data, so the routes' logic is
reached and not only their 404s (invalid cases are left as generated). It prints a summary per check
and per operation, with one ``curl`` reproducer per distinct failure, and writes
``benchmarks/out/fuzz.json``.

    python -m benchmarks.load.fuzz                     # 1000 examples per operation, all checks
    python -m benchmarks.load.fuzz --examples 200 --checks not_a_server_error
    python -m benchmarks.load.fuzz --auth              # with API keys (the admin key fuzzes)

Every process it starts is stopped on exit (see :class:`benchmarks.load.supervisor.Processes`).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from benchmarks import ROOT

OUT = ROOT / "benchmarks" / "out" / "fuzz.json"
HOOKS_MODULE = "benchmarks.load.fuzz"

# --- the seeded data and the steering, shared with tests/service/api/test_fuzz.py -----------------
MODEL = "fz"
DOOMED = "fz-doomed"  # what DELETE is steered to, so the seeded model stays
ACTIONS = ["a", "b", "c"]
EVENTS = [f"ev-{i}" for i in range(8)]
PZ_EVENTS = [f"pz-ev-{i}" for i in range(8)]
USER_KEY, ADMIN_KEY = "fuzz-user", "fuzz-admin"
#: what rejects invalid data: Schemathesis's default statuses, and 413 (a body over the
#: service's max_body_bytes)
NEGATIVE_DATA_STATUSES = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422",
                          "428", "429", "5xx"]
#: what may answer schema-valid data: Schemathesis's defaults (a 5XX is not_a_server_error's
#: to count), 413 (the body limit), and the documented checks against the model that no schema
#: can say: 422 on the native routes (a label or excluded action the model does not have,
#: min_propensity above 1/k, a parameter value the booster refuses), 400 on the Personalizer ones
#: (Personalizer's code for the same); ``--strict-positive`` keeps the defaults, to count them
POSITIVE_DATA_STATUSES = ["2XX", "3XX", "401", "403", "404", "409", "429", "5XX", "413", "422",
                          "400"]

JSON_VALUES = st.recursive(
    # small integers (a model of hundreds of learners is slow to build, not wrong), and a few
    # beyond every bound
    st.none() | st.booleans() | st.integers(-3, 40) | st.sampled_from([1001, 10**6, 2**64])
    | st.text(max_size=8) | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=3),
    max_leaves=6,
)


def steer_path_parameters(context: Any, path_parameters: dict[str, Any] | None):  # noqa: ANN201
    """Half of the time the seeded model (DELETE: a model of its
    own) and the seeded Personalizer events instead of the generated names."""
    if not path_parameters:
        return st.just(path_parameters)
    steered = dict(path_parameters)
    if "name" in steered:
        steered["name"] = DOOMED if context.operation.method.upper() == "DELETE" else MODEL
    if "eventId" in steered:
        events = [{**steered, "eventId": e} for e in PZ_EVENTS]
        return st.one_of(st.sampled_from(events), st.just(path_parameters))
    return st.sampled_from([steered, path_parameters])


def steer_body(context: Any, body: Any):  # noqa: ANN201
    """Half of the time, create models with parameters their booster accepts
    (of any JSON value), rank the seeded action set (the context fuzzed), predict and feedback a
    seeded event (feedback with one of reward or label, which the schema cannot say is
    required)."""
    from boosters.registry import booster_params, names

    if not isinstance(body, dict):
        return st.just(body)
    path = context.operation.path
    if path == "/v1/models" and body.get("booster") in names():
        accepted = sorted(booster_params(body["booster"]))
        params = st.dictionaries(st.sampled_from(accepted), JSON_VALUES, max_size=4)
        return st.one_of(st.builds(lambda p: {**body, "params": p}, params), st.just(body))
    if path.endswith("/rank"):
        actions = {"actions": [{"id": a} for a in ACTIONS]}
        excluded = st.fixed_dictionaries({}, optional={
            "excludedActions": st.lists(st.sampled_from(ACTIONS), max_size=2)})
        return st.one_of(st.builds(lambda e: {**body, **actions, **e}, excluded), st.just(body))
    if not isinstance(body.get("event_id"), str):
        return st.just(body)
    steered = st.sampled_from([{**body, "event_id": e} for e in EVENTS])
    if path.endswith("/feedback"):
        outcome = st.one_of(st.fixed_dictionaries({"reward": st.floats(0, 1)}),
                            st.fixed_dictionaries({"label": st.sampled_from(ACTIONS)}))
        steered = st.builds(lambda b, o: {"event_id": b["event_id"], **o}, steered, outcome)
    return st.one_of(steered, st.just(body))


def spare_model(context: Any, case: Any) -> Any:
    """``map_case``: a DELETE of the seeded model goes to :data:`DOOMED` instead, whatever
    generated it. Hypothesis draws string literals of the code under test (``"fz"`` among
    them), so the fuzzer itself can name the seeded model; unlike ``flatmap_case``, this hook
    runs in the coverage phase too, and on invalid cases (the name stays a valid one)."""
    parameters = case.path_parameters
    if (context.operation.method.upper() == "DELETE" and isinstance(parameters, dict)
            and parameters.get("name") == MODEL):
        case.path_parameters = {**parameters, "name": DOOMED}
    return case


def steer_case(context: Any, case: Any):  # noqa: ANN201
    """``flatmap_case``: :func:`steer_path_parameters` and :func:`steer_body` on the cases
    generated as valid ones only, so an invalid case stays invalid (the negative-data checks
    judge it as generated), and not in the stateful phase (its links choose the resources)."""
    from schemathesis import GenerationMode
    from schemathesis.core import NOT_SET

    meta = getattr(case, "meta", None)
    if meta is not None and (meta.generation.mode != GenerationMode.POSITIVE
                             or meta.phase.name == "stateful"):  # links pick the resources
        return st.just(case)

    def apply(path_parameters: Any, body: Any) -> Any:
        case.path_parameters = path_parameters
        if body is not NOT_SET:
            case.body = body
        return case

    body = st.just(NOT_SET) if case.body is NOT_SET else steer_body(context, case.body)
    return st.builds(apply, steer_path_parameters(context, case.path_parameters), body)


def seed_data(client: Any, headers: dict[str, str] | None = None) -> None:
    """The seeded model (and the one DELETE gets), decided events and Personalizer events (one
    deferred) on its action set. ``client``: a TestClient or an ``httpx.Client``."""
    headers = headers or {}
    body = {"name": MODEL, "booster": "adabandit", "actions": ACTIONS,
            "params": {"n_learners": 3, "seed": 1}}
    for name in (MODEL, DOOMED):
        r = client.post("/v1/models", json={**body, "name": name}, headers=headers)
        assert r.status_code == 201, r.text
    for i, event_id in enumerate(EVENTS):
        r = client.post(f"/v1/models/{MODEL}/predict", headers=headers,
                        json={"context": {"x": float(i), "s": "u"}, "event_id": event_id})
        assert r.status_code == 200, r.text
    for event_id in PZ_EVENTS:
        r = client.post("/personalizer/v1.0/rank", headers=headers, json={
            "contextFeatures": [{"x": 1.0, "s": "u"}], "eventId": event_id,
            "actions": [{"id": a} for a in ACTIONS], "deferActivation": event_id.endswith("1"),
        })
        assert r.status_code == 201, r.text


if os.environ.get("SCHEMATHESIS_HOOKS") == HOOKS_MODULE:  # loaded by `schemathesis run`
    import schemathesis

    schemathesis.hook("map_case")(spare_model)
    schemathesis.hook("flatmap_case")(steer_case)


# --- the run ----------------------------------------------------------------------------------
def run_schemathesis(base: str, args: argparse.Namespace, report_dir: Path) -> tuple[int, float]:
    """``schemathesis run`` against ``base``; its exit code and wall time."""
    config = report_dir / "schemathesis.toml"
    def listed(codes: list[str]) -> str:
        return ", ".join(f'"{code}"' for code in codes)

    text = ("[checks.negative_data_rejection]\n"
            f"expected-statuses = [{listed(NEGATIVE_DATA_STATUSES)}]\n")
    if not args.strict_positive:
        text += ("[checks.positive_data_acceptance]\n"
                 f"expected-statuses = [{listed(POSITIVE_DATA_STATUSES)}]\n")
    config.write_text(text)
    argv = [sys.executable, "-m", "schemathesis.cli", "--config-file", str(config),
            "run", f"{base}/openapi.json",
            "--checks", args.checks, "--max-examples", str(args.examples),
            "--phases", args.phases, "--workers", str(args.workers),
            "--continue-on-failure", "--no-color" if not sys.stdout.isatty() else "--color",
            "--report", "ndjson", "--report-ndjson-path", str(report_dir / "events.ndjson"),
            "--suppress-health-check", "all", "--request-timeout", "30"]
    if args.seed is not None:
        argv += ["--seed", str(args.seed)]
    if args.auth:
        argv += ["--header", f"Authorization: Bearer {ADMIN_KEY}"]
    env = dict(os.environ, SCHEMATHESIS_HOOKS=HOOKS_MODULE,
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                          if p))
    started = time.monotonic()
    with (report_dir / "schemathesis.log").open("w") as log:
        # cwd: the run's directory, where schemathesis keeps its cache (.schemathesis/)
        code = subprocess.run(argv, env=env, cwd=report_dir, stdout=log,
                              stderr=subprocess.STDOUT, check=False).returncode
    return code, time.monotonic() - started


def _decode(blob: Any) -> str:
    if isinstance(blob, dict) and "$base64" in blob:
        return base64.b64decode(blob["$base64"]).decode("utf-8", "replace")
    return "" if blob is None else str(blob)


def _curl(request: dict[str, Any]) -> str:
    """A ``curl`` command repeating a recorded request."""
    parts = ["curl", "-X", request.get("method", "GET"), shlex.quote(request.get("uri", ""))]
    for name, values in (request.get("headers") or {}).items():
        if name.lower() in ("user-agent", "accept-encoding", "accept", "connection",
                            "content-length", "x-schemathesis-testcaseid"):
            continue
        for value in values if isinstance(values, list) else [values]:
            parts += ["-H", shlex.quote(f"{name}: {value}")]
    body = _decode(request.get("body"))
    if body:
        parts += ["-d", shlex.quote(body)]
    return " ".join(parts)


def summarise(report_dir: Path) -> dict[str, Any]:
    """Counts per check and per operation, and one reproducer per distinct failure (operation,
    check, title and the status answered), from the run's NDJSON events."""
    checks: dict[str, Counter] = defaultdict(Counter)  # check -> success / failure
    per_operation: dict[str, Counter] = defaultdict(Counter)
    failures: dict[tuple[str, ...], dict[str, Any]] = {}
    cases = 0
    errors: list[str] = []
    events = report_dir / "events.ndjson"
    for line in events.read_text().splitlines() if events.exists() else []:
        event = json.loads(line)
        if "ScenarioFinished" in event:
            recorder = event["ScenarioFinished"].get("recorder", {})
            cases += len(recorder.get("cases", {}))
            interactions = recorder.get("interactions", {})
            for case_id, case_checks in recorder.get("checks", {}).items():
                for check in case_checks:
                    name, status = check.get("name"), check.get("status")
                    checks[name][status] += 1
                    if status != "failure":
                        continue
                    info = (check.get("failure_info") or {}).get("failure") or {}
                    label = info.get("operation") or recorder.get("label", "?")
                    per_operation[label][name] += 1
                    interaction = interactions.get(case_id) or {}
                    response = interaction.get("response") or {}
                    answered = response.get("status_code")
                    key = (label, name, str(info.get("title")), str(answered))
                    entry = failures.get(key)
                    if entry is None:
                        entry = failures[key] = {
                            "operation": label, "check": name, "code": info.get("code"),
                            "title": info.get("title", "?"),
                            "message": str(info.get("message", ""))[:500],
                            "status": answered,
                            "response": _decode(response.get("content"))[:300],
                            "curl": _curl(interaction.get("request") or {}),
                            "count": 0,
                        }
                    entry["count"] += 1
        elif "NonFatalError" in event or "FatalError" in event:
            errors.append(json.dumps(event)[:500])
    return {"cases": cases, "checks": {k: dict(v) for k, v in sorted(checks.items())},
            "failures_per_operation": {k: dict(v) for k, v in sorted(per_operation.items())},
            "failures": sorted(failures.values(),
                               key=lambda f: (f["check"], f["operation"], str(f["status"]))),
            "errors": errors}


def print_summary(result: dict[str, Any]) -> None:
    """The human summary."""
    s = result["summary"]
    print(f"\nschemathesis {result['schemathesis']}: {s['cases']} test cases, "
          f"{result['seconds']:.0f} s, exit code {result['exit_code']} "
          f"(examples {result['examples']}, checks {result['checks']}, phases {result['phases']})")
    print(f"{'check':<32} {'passed':>8} {'failed':>8}")
    for name, counts in s["checks"].items():
        print(f"{name:<32} {counts.get('success', 0):>8} {counts.get('failure', 0):>8}")
    server_errors = [f for f in s["failures"] if f["check"] == "not_a_server_error"]
    print(f"\n{len(server_errors)} distinct server errors; "
          f"{len(s['failures']) - len(server_errors)} distinct other failures")
    for f in s["failures"]:
        print(f"\n[{f['check']}] {f['operation']} x{f['count']}: {f['title']} "
              f"(answered {f['status']})")
        if f["message"] and f["message"] != f["title"]:
            print("  " + f["message"].replace("\n", "\n  ")[:400])
        if f["response"]:
            print("  <- " + f["response"][:200])
        if f["curl"]:
            print("  " + f["curl"][:600])
    for error in s["errors"]:
        print(f"\nerror: {error}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1000, help="examples per operation")
    parser.add_argument("--checks", default="all", help="schemathesis checks (comma-separated)")
    parser.add_argument("--strict-positive", action="store_true",
                        help="count the documented model-dependent 422/400 answers to "
                        "schema-valid data as positive_data_acceptance failures")
    parser.add_argument("--phases", default="examples,coverage,fuzzing,stateful")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--auth", action="store_true",
                        help="configure API keys (the run sends the admin key)")
    parser.add_argument("--json", type=Path, default=OUT, help="where the summary goes")
    parser.add_argument("--keep", type=Path, default=None,
                        help="copy the run's directory (logs, NDJSON events) there")
    args = parser.parse_args(argv)

    from importlib import metadata

    import httpx

    from benchmarks.load import supervisor

    with tempfile.TemporaryDirectory(prefix="bb-fuzz-") as tmp:
        procs = supervisor.Processes(Path(tmp))
        try:
            redis_url, _ = supervisor.start_redis(procs, aof=False)
            env = {"BOOSTBANDIT_PERSONALIZER_PARAMS": json.dumps({"n_learners": 3}),
                   "BOOSTBANDIT_PERSONALIZER_REWARD_WAIT_SECONDS": "5"}
            headers = {}
            if args.auth:
                env |= {"BOOSTBANDIT_API_KEYS": USER_KEY, "BOOSTBANDIT_ADMIN_KEYS": ADMIN_KEY}
                headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
            base, service = supervisor.start_service(procs, redis_url, extra_env=env)
            with httpx.Client(base_url=base, timeout=30, trust_env=False) as client:
                seed_data(client, headers)
            print(f"service at {base}, redis at {redis_url}; running schemathesis "
                  f"({args.examples} examples per operation, checks {args.checks})...",
                  flush=True)
            code, seconds = run_schemathesis(base, args, Path(tmp))
            alive = service.poll() is None
            summary = summarise(Path(tmp))
            log_tail = "\n".join(
                (Path(tmp) / "schemathesis.log").read_text(errors="replace").splitlines()[-60:])
            service_log = procs.log_tail("service", 80)
        finally:
            procs.close()
            if args.keep is not None:
                import shutil

                shutil.copytree(tmp, args.keep, dirs_exist_ok=True)
    result = {
        "schemathesis": metadata.version("schemathesis"),
        "command": "python -m benchmarks.load.fuzz " + " ".join(argv if argv is not None
                                                           else sys.argv[1:]),
        "examples": args.examples, "checks": args.checks, "phases": args.phases,
        "auth": args.auth, "seconds": round(seconds, 1), "exit_code": code,
        "service_alive": alive, "summary": summary,
    }
    print_summary(result)
    if summary["cases"] == 0:
        print("\nno test case recorded; schemathesis said:\n" + log_tail)
    if not alive:
        print("\nthe service died:\n" + service_log)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(f"\nwrote {args.json}")
    server_errors = result["summary"]["checks"].get("not_a_server_error", {}).get("failure", 0)
    return 1 if server_errors or not alive else 0


if __name__ == "__main__":
    sys.exit(main())
