"""The `monitoring` profile: every query of the provisioned Grafana dashboard names metrics the
service really exports (collected from real scrapes of an API replica and of the learner's
endpoint after traffic, parsed with prometheus-client's parser), and docker-compose.yml,
Prometheus's targets and Grafana's provisioning agree with each other.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import redis
import yaml
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from service.api.app import create_app
from service.eventlog import EventLog
from service.learner import Learner, limits
from service.models.store import ModelStore
from service.settings import Settings
from tests.conftest import free_port
from tests.service.learner.test_observability import get, traffic, wait_for

ROOT = Path(__file__).resolve().parents[1]
MONITORING = ROOT / "monitoring"
DASHBOARD = MONITORING / "grafana" / "dashboards" / "boostbandit.json"

#: PromQL words that are not metric names (aggregations, keywords, functions are followed by "(")
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
             "and", "or", "unless", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression (or a Grafana ``label_values(metric, label)``
    variable query) selects.

    >>> sorted(metric_names('sum by (le, route) (rate(a_bucket{x="y(z)"}[5m])) / b'))
    ['a_bucket', 'b']
    >>> metric_names("label_values(m_total, model)")
    {'m_total'}
    """
    expr = re.sub(r"label_values\(\s*([^,()]+?)\s*,[^)]*\)", r"\1", expr)
    expr = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)  # strings (label values may hold anything)
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", expr):
        word, rest = match.group(), expr[match.end():].lstrip()
        if rest.startswith("(") or word.lower() in _KEYWORDS:
            continue
        if re.fullmatch(r"\d+(\.\d+)?(e\d+)?", word):
            continue
        names.add(word)
    return names


def dashboard_queries() -> list[str]:
    """Every PromQL query of the dashboard: panel targets and variable queries."""
    board = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    for var in board.get("templating", {}).get("list", []):
        query = var.get("query")
        queries.append(query["query"] if isinstance(query, dict) else query)
    return queries


@pytest.fixture(scope="module")
def exported(redis_server) -> set[str]:
    """Sample names on /metrics of an API replica and of a learner's endpoint, after traffic."""
    url = redis_server.db_url(977)
    redis.Redis.from_url(url).flushdb()
    settings = Settings(redis_url=url, learner_metrics_port=free_port(), learner_block_ms=20,
                        snapshot_every_events=2)
    client = redis.Redis.from_url(url)
    learner = Learner(ModelStore(EventLog(client, limits=limits(settings))), settings, client)
    learner.open_endpoint()
    learner.start()
    names: set[str] = set()
    try:
        replica = Settings(redis_url=url, run_learner=False, replica_refresh_seconds=0.05)
        with TestClient(create_app(replica)) as api:
            traffic(api, 12, name="monitored")  # a name no other test in this process uses
            metrics_url = f"http://127.0.0.1:{settings.learner_metrics_port}/metrics"
            wait_for(lambda: 'boostbandit_joined_total{model="monitored",source="feedback"} 12.0'
                     in get(metrics_url)[1])
            wait_for(lambda: 'boostbandit_model_version{model="monitored"} 12.0'
                     in api.get("/metrics").text)
            _train_once(url, "monitored")  # the worker's metrics (this process's registry)
            for text in (api.get("/metrics").text, get(metrics_url)[1]):
                for family in text_string_to_metric_families(text):
                    names.update(s.name for s in family.samples)
    finally:
        learner.stop()
        redis.Redis.from_url(url).flushdb()
    return names


def _train_once(url: str, name: str) -> None:
    """A worker trains a policy of ``name`` and runs a round of the Personalizer evaluations."""
    from service.worker import Worker

    settings = Settings(redis_url=url, worker_min_events=10, worker_n_rounds=2,
                        worker_reward_model_rounds=2)
    worker = Worker(redis.Redis.from_url(url), settings, [name])
    assert [s["status"] for s in worker.train_once()] in (["published"], ["rejected"])
    worker.evaluate(time.time())


@pytest.mark.slow
def test_every_dashboard_query_names_an_exported_metric(exported: set[str]) -> None:
    queries = dashboard_queries()
    assert len(queries) >= 10
    used = set()
    for query in queries:
        names = metric_names(query)
        assert names, f"no metric in {query!r}"
        missing = names - exported
        assert not missing, f"{query!r} names {sorted(missing)}, not exported"
        used |= names
    # what the issue asks the dashboard to show
    for wanted in ("boostbandit_decisions_total", "boostbandit_joined_reward_total",
                   "boostbandit_learner_lag_seconds", "boostbandit_request_seconds_bucket",
                   "boostbandit_snapshot_age_seconds", "boostbandit_worker_trainings_total",
                   "boostbandit_worker_last_training_timestamp_seconds"):
        assert wanted in used


@pytest.mark.slow
def test_metric_names_parser_rejects_an_unknown_metric(exported: set[str]) -> None:
    """The check above can fail: a misspelt metric is caught."""
    names = metric_names('sum by (model) (rate(boostbandit_decision_total{model="m"}[5m]))')
    assert names == {"boostbandit_decision_total"} and not names <= exported


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_monitoring_profile_matches_prometheus_targets() -> None:
    services = _compose()["services"]
    for name in ("prometheus", "grafana"):
        assert services[name]["profiles"] == ["monitoring"]
    for name in ("redis", "api", "learner", "worker"):
        assert "profiles" not in services[name]  # the default `up` is unchanged
    # the ports each service serves /metrics on, as compose configures them
    ports = {
        "api": int(services["api"]["command"][services["api"]["command"].index("--port") + 1]),
        "learner": int(services["learner"]["environment"]["BOOSTBANDIT_LEARNER_METRICS_PORT"]),
        "worker": int(services["worker"]["environment"]["BOOSTBANDIT_WORKER_METRICS_PORT"]),
    }
    assert Settings().learner_metrics_port == ports["learner"]  # the defaults agree too
    assert Settings().worker_metrics_port == ports["worker"]
    for name in ("learner", "worker"):
        assert str(ports[name]) in services[name]["expose"]
        assert services[name]["environment"]["BOOSTBANDIT_HOST"] == "0.0.0.0"
        check = " ".join(services[name]["healthcheck"]["test"])
        assert f"http://127.0.0.1:{ports[name]}/healthz" in check
    prometheus = yaml.safe_load((MONITORING / "prometheus.yml").read_text())
    targets = {job["job_name"]: [t for sc in job["static_configs"] for t in sc["targets"]]
               for job in prometheus["scrape_configs"]}
    assert targets == {name: [f"{name}:{port}"] for name, port in ports.items()}
    mounts = services["prometheus"]["volumes"]
    assert "./monitoring/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in mounts
    assert "--config.file=/etc/prometheus/prometheus.yml" in services["prometheus"]["command"]


def test_grafana_provisioning_points_at_the_dashboard() -> None:
    services = _compose()["services"]
    mounts = dict(v.rsplit(":", 1)[0].split(":", 1) for v in services["grafana"]["volumes"]
                  if v.startswith("./"))
    for source in mounts:
        assert (ROOT / source).exists(), source
    provisioning = MONITORING / "grafana" / "provisioning"
    assert mounts["./monitoring/grafana/provisioning"] == "/etc/grafana/provisioning"
    sources = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())
    (source,) = sources["datasources"]
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"
    providers = yaml.safe_load((provisioning / "dashboards" / "boostbandit.yml").read_text())
    path = providers["providers"][0]["options"]["path"]
    assert mounts["./monitoring/grafana/dashboards"] == path
    board = json.loads(DASHBOARD.read_text())
    for panel in board["panels"]:
        assert panel["datasource"]["uid"] == source["uid"]
