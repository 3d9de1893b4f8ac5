"""docker-compose.yml's `cluster` profile, checked the way `docker compose config` would (no
Docker engine here): six Redis nodes in cluster mode, the one-shot init that forms the cluster,
two API replicas, two learners and the worker on it; the default services left as they were;
dependencies, volumes and host ports consistent over every profile; and the shell scripts of the
Redis services valid `sh`.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from tests.service.eventlog.test_embedded import COMPOSE, ROOT

PROFILE = "cluster"
DEFAULT = {"redis", "api", "learner", "worker"}
NODES = [f"redis-node-{i}" for i in range(1, 7)]
INIT = "redis-cluster-init"
#: the app services of the profile and the default service each one runs on the cluster
APPS = {"cluster-api": "api", "cluster-learner": "learner", "cluster-worker": "worker"}
#: what an app service of the profile changes in its default service
OVERRIDDEN = {"profiles", "depends_on", "environment", "ports", "deploy"}
URL = re.compile(r"redis://:(?P<password>\$\{REDIS_PASSWORD:\?[^}]*\})@(?P<host>[\w.-]+):6379/0")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


def profile(services: dict, name: str | None) -> set[str]:
    """The services of profile ``name`` (None: those without a profile)."""
    return {s for s, service in services.items()
            if (name in service.get("profiles", ()) if name else "profiles" not in service)}


def dependencies(service: dict) -> set[str]:
    return set(service.get("depends_on") or ())  # the list and the mapping form alike


def started_by(services: dict, names) -> set[str]:
    """What `docker compose up NAMES...` starts: the services named and what they depend on."""
    started, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name not in started:
            started.add(name)
            todo.extend(dependencies(services[name]))
    return started


def replicas(service: dict) -> int:
    return service.get("deploy", {}).get("replicas", 1)


def sh_scripts(services: dict):
    """(service, script) of every `sh -c SCRIPT` command or entrypoint, as compose writes it."""
    for name, service in services.items():
        for key in ("entrypoint", "command"):
            argv = service.get(key)
            if isinstance(argv, list) and argv[:2] == ["sh", "-c"]:
                yield f"{name}.{key}", argv[2]


def host_ports(entry) -> set[int]:
    """The host ports a `ports` entry publishes (none for a bare container port)."""
    if isinstance(entry, dict):
        published = str(entry.get("published") or "")
    else:
        parts = str(entry).split("/")[0].split(":")
        published = parts[-2] if len(parts) >= 2 else ""
    if not published:
        return set()
    first, _, last = published.partition("-")
    return set(range(int(first), int(last or first) + 1))


def header(text: str) -> str:
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("# "))
    return " ".join(lines)


def test_the_profile_holds_the_cluster_shape_and_the_default_services_none(services):
    cluster = profile(services, PROFILE)
    assert cluster == {*NODES, INIT, *APPS}
    for name in cluster:
        assert services[name]["profiles"] == [PROFILE], name
    assert profile(services, None) == DEFAULT  # the default `docker compose up` is unchanged
    for name in DEFAULT:
        assert dependencies(services[name]) <= DEFAULT, name


def test_every_dependency_exists_in_the_same_profile_or_none(services):
    for name, service in services.items():
        profiles = set(service.get("profiles", ()))
        for target in dependencies(service):
            assert target in services, (name, target)
            theirs = set(services[target].get("profiles", ()))
            assert not theirs or theirs == profiles, (name, target)


def test_six_redis_nodes_in_cluster_mode_with_the_password_of_the_redis_service(services):
    redis = services["redis"]
    nodes = {name for name in profile(services, PROFILE)
             if "--cluster-enabled yes" in " ".join(services[name].get("command", []))}
    assert nodes == set(NODES)
    # the `redis` service's checks of REDIS_PASSWORD and REDIS_APPENDFSYNC, word for word
    checks = redis["command"][2].split("exec ")[0]
    volumes = set()
    for name in NODES:
        node = services[name]
        assert node["image"] == redis["image"] == "redis:7-alpine"
        assert node["environment"]["REDIS_PASSWORD"] == redis["environment"]["REDIS_PASSWORD"]
        assert node["environment"]["REDIS_APPENDFSYNC"] == redis["environment"]["REDIS_APPENDFSYNC"]
        assert node["environment"]["REDIS_NODE"] == name  # the name it announces
        assert node["healthcheck"] == redis["healthcheck"]
        script = node["command"][2]
        assert node["command"][:2] == ["sh", "-c"] and script.startswith(checks)
        flags = " ".join(script.split())
        for flag in ("--appendonly yes", '--appendfsync "$$REDIS_APPENDFSYNC"',
                     '--requirepass "$$REDIS_PASSWORD"', '--masterauth "$$REDIS_PASSWORD"',
                     "--cluster-enabled yes", '--cluster-announce-hostname "$$REDIS_NODE"',
                     "--cluster-preferred-endpoint-type hostname"):
            assert flag in flags, (name, flag)
        assert "ports" not in node  # only the compose network reaches the nodes
        (volume,) = node["volumes"]
        assert volume.endswith(":/data")  # nodes.conf and the append-only file
        volumes.add(volume)
    assert len(volumes) == len(NODES)


def test_the_init_service_forms_the_cluster_once(services):
    init = services[INIT]
    script = init["command"][2]
    # the create command, its continued lines joined
    create = " ".join(re.search(r"redis-cli --cluster create(?:[^\n\\]|\\\n)*", script)
                      .group(0).replace("\\\n", " ").split())
    assert create.split(" --")[1:] == ["cluster create " + " ".join(f"{n}:6379" for n in NODES),
                                       "cluster-replicas 1", "cluster-yes"]
    # authenticated without the password on the command line; idempotent; waits for the nodes
    password = services["redis"]["environment"]["REDIS_PASSWORD"]
    assert init["environment"]["REDISCLI_AUTH"] == password
    assert " -a " not in script
    assert "cluster_known_nodes" in script and "^cluster_state:ok" in script
    assert init["depends_on"] == {n: {"condition": "service_healthy"} for n in NODES}
    assert init.get("restart", "no") == "no"  # one-shot: it exits, and stays exited


def test_the_app_services_run_on_the_cluster_once_it_is_formed(services):
    password = services["redis"]["environment"]["REDIS_PASSWORD"]
    for name, default in APPS.items():
        service = services[name]
        env = service["environment"]
        assert env["BOOSTBANDIT_REDIS_CLUSTER"] == "true", name
        # a write counts once a replica holds it (docs/consistency.md, "Redis Cluster")
        assert env["BOOSTBANDIT_REDIS_REPLICA_ACKS"] == "${BOOSTBANDIT_REDIS_REPLICA_ACKS:-1}"
        url = URL.fullmatch(env["REDIS_URL"])
        assert url and url["host"] in NODES and url["password"] == password, (name, url)
        assert service["depends_on"] == {INIT: {"condition": "service_completed_successfully"}}
        # the default service otherwise: command, healthcheck, the rest of its environment
        base = services[default]
        assert {k: v for k, v in service.items() if k not in OVERRIDDEN} == {
            k: v for k, v in base.items() if k not in OVERRIDDEN}, name
        cluster = {"REDIS_URL", "BOOSTBANDIT_REDIS_CLUSTER", "BOOSTBANDIT_REDIS_REPLICA_ACKS"}
        assert {k: v for k, v in env.items() if k not in cluster} == {
            k: v for k, v in base["environment"].items() if k not in cluster}, name


def test_two_api_replicas_two_learners_one_worker(services):
    def count(command: str) -> int:
        return sum(replicas(services[name]) for name in APPS
                   if " ".join(services[name].get("command", [])).endswith(command))

    assert replicas(services["cluster-api"]) == 2
    assert count("boostbandit learner") == 2
    assert count("boostbandit worker") == 1


def test_no_two_services_publish_the_same_host_port(services):
    owner: dict[int, str] = {}
    for name, service in services.items():  # every profile: they may run together
        for entry in service.get("ports", []):
            ports = host_ports(entry)
            assert not (ports and replicas(service) > 1), (name, entry)  # replicas would clash
            for port in ports:
                assert port not in owner, (port, owner.get(port), name)
                owner[port] = name
    assert owner[8000] == "api"


def test_every_named_volume_is_declared(compose):
    declared = set(compose["volumes"])
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0] if isinstance(volume, str) else volume.get("source")
            if not source.startswith((".", "/")):
                assert source in declared, (name, source)


def test_the_documented_command_starts_the_cluster_shape_alone(services):
    text = COMPOSE.read_text()
    command = re.search(r"`(docker compose --profile cluster up [^`]*)`", header(text))
    assert command, "the header comment names the cluster profile's command"
    named = command.group(1).split()[5:]
    assert named and set(named) <= set(APPS)
    # the whole profile, and no default service: no port clash with a running default shape
    assert started_by(services, named) == profile(services, PROFILE)
    assert command.group(1) in " ".join((ROOT / "README.md").read_text().split())


@pytest.mark.skipif(shutil.which("sh") is None, reason="no sh")
def test_the_shell_scripts_are_valid_sh(services):
    scripts = dict(sh_scripts(services))
    assert {"redis.command", f"{INIT}.command"} | {f"{n}.command" for n in NODES} <= set(scripts)
    for where, script in scripts.items():
        # compose reads `$$` as `$`; a single `$` would be compose's own variable, not the shell's
        assert "$" not in script.replace("$$", ""), where
        checked = subprocess.run(["sh", "-n"], input=script.replace("$$", "$"), text=True,
                                 capture_output=True, timeout=30)
        assert checked.returncode == 0, (where, checked.stderr)
