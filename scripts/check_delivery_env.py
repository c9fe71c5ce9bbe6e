#!/usr/bin/env python3
"""Checks that docker-compose.yml and the Kubernetes manifests pass only settings the
binaries read: each service's environment (and command) is handed to its binary's
`--check-config`, which parses it and refuses unknown agentic settings, and no service is
given the stand-in model's settings (the services know nothing of it). Also checks that
compose `depends_on` and kustomize `resources` name things that exist, and that the
Kubernetes gateway may reach only DNS, the executors, the tool-host and PostgreSQL."""

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target") / "debug"
SERVICES = {"prompt-gateway", "classic-executor", "code-executor", "hosted-executor", "tool-host"}
# The stand-in model (tests/agentic-testkit) checks the settings with its own prefix.
STAND_IN_MODEL = "stand-in-model"
STAND_IN_MODEL_PREFIX = "STAND_IN_MODEL_"
failures = []


def compose_value(value):
    """`${VAR:-default}` becomes its default, as compose would without the variable set."""
    return re.sub(r"\$\{[A-Z0-9_]+:-([^}]*)\}", r"\1", str(value))


def check(origin, binary, env, args):
    if binary not in SERVICES and binary != STAND_IN_MODEL:
        return
    misplaced = sorted(name for name in env if name.startswith(STAND_IN_MODEL_PREFIX))
    if binary in SERVICES and misplaced:
        failures.append(f"{origin}: {binary} is given the stand-in model's settings: {', '.join(misplaced)}")
        return
    run_env = {"PATH": os.environ.get("PATH", ""), **env}
    result = subprocess.run([str(BIN / binary), *args, "--check-config"], env=run_env, capture_output=True, text=True)
    if result.returncode != 0:
        failures.append(f"{origin}: {binary} refuses its configuration: {result.stderr.strip().splitlines()[0] if result.stderr.strip() else result.returncode}")
    else:
        print(f"ok  {origin}: {binary} accepts {len(env)} settings")


def check_compose():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    for name, service in services.items():
        for dependency in service.get("depends_on", {}) or {}:
            if dependency not in services:
                failures.append(f"compose: {name} depends on unknown service {dependency}")
        command = service.get("command") or []
        if not command:
            continue
        env = {key: compose_value(value) for key, value in (service.get("environment") or {}).items()}
        env = {key: value for key, value in env.items() if value != ""}
        check(f"compose {name}", command[0], env, command[1:])


def dockerfile_images():
    """The binaries in each image the Dockerfile makes, by stage name: what its build stages
    copy out of target/release into /out, for the stages that take /out from them."""
    stages, current = {}, None
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if match := re.match(r"FROM \S+ AS (\S+)", line):
            current = stages.setdefault(match.group(1), {"built": set(), "from": None})
        elif current is not None:
            current["built"].update(re.findall(r"target/release/([a-z-]+)", line))
            if match := re.match(r"COPY --from=(\S+) /out/", line):
                current["from"] = match.group(1)
    return {name: stages[stage["from"]]["built"] for name, stage in stages.items() if stage["from"]}


def check_images():
    """The production image holds the services and the CLI, never the stand-in model; every
    compose service runs a binary its image has."""
    images = dockerfile_images()
    production = images.get("production", set())
    expected = SERVICES | {"agentic"}
    if production != expected:
        failures.append(f"Dockerfile: the production image holds {sorted(production)}, not {sorted(expected)}")
    if images.get("stand-in-model") != {STAND_IN_MODEL}:
        failures.append(f"Dockerfile: the stand-in-model image holds {sorted(images.get('stand-in-model', []))}")
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for name, service in compose["services"].items():
        build = service.get("build")
        command = service.get("command") or []
        if not build or not command:
            continue
        target = build.get("target") if isinstance(build, dict) else None
        if command[0] not in images.get(target, set()):
            failures.append(f"compose {name}: runs {command[0]}, which the image of target {target} does not hold")
        else:
            print(f"ok  compose {name}: {command[0]} is in the {target} image")


def manifest_documents():
    # deploy/compose holds compose's configuration files, not manifests.
    kubernetes = [ROOT / "deploy" / "base", ROOT / "deploy" / "overlays"]
    for path in sorted(path for directory in kubernetes for path in directory.rglob("*.yaml")):
        if path.name == "kustomization.yaml":
            kustomization = yaml.safe_load(path.read_text())
            for resource in kustomization.get("resources", []):
                if not (path.parent / resource).exists():
                    failures.append(f"{path.relative_to(ROOT)}: resource {resource} does not exist")
            for patch in kustomization.get("patches", []):
                if not (path.parent / patch["path"]).exists():
                    failures.append(f"{path.relative_to(ROOT)}: patch {patch['path']} does not exist")
            continue
        for document in yaml.safe_load_all(path.read_text()):
            if document:
                yield path, document


def check_manifests():
    config, secrets = {}, {}
    documents = list(manifest_documents())
    for path, document in documents:
        if document["kind"] == "ConfigMap" and "base" in path.parts:
            config.update(document.get("data", {}))
        if document["kind"] == "Secret":
            secrets.update(document.get("stringData", {}))
    for path, document in documents:
        if document["kind"] != "Deployment":
            continue
        for container in document["spec"]["template"]["spec"]["containers"]:
            env = {}
            for variable in container.get("env", []):
                source = variable.get("valueFrom", {})
                if "value" in variable:
                    env[variable["name"]] = variable["value"]
                elif "configMapKeyRef" in source:
                    key = source["configMapKeyRef"]["key"]
                    if key not in config:
                        failures.append(f"{path.name}: {variable['name']} reads missing config key {key}")
                    env[variable["name"]] = config.get(key, "")
                elif "secretKeyRef" in source:
                    key = source["secretKeyRef"]["key"]
                    if key not in secrets:
                        failures.append(f"{path.name}: {variable['name']} reads missing secret key {key}")
                    env[variable["name"]] = secrets.get(key, "")
            command = container.get("command", [])
            check(f"{path.relative_to(ROOT)} {container['name']}", command[0], env, command[1:] + container.get("args", []))


def check_gateway_egress():
    """The gateway holds the internal token: its egress is the executors, the tool-host,
    PostgreSQL and DNS, nothing else, and every executor's pods carry the label it selects."""
    documents = [document for _, document in manifest_documents()]
    expected = [
        {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]},
        {"to": [{"podSelector": {"matchLabels": {"app.kubernetes.io/component": "executor"}}}]},
        {"to": [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "tool-host"}}}],
         "ports": [{"port": 50054}]},
        {"ports": [{"port": 5432}]},
    ]
    egress = [
        document for document in documents
        if document["kind"] == "NetworkPolicy"
        and "Egress" in document["spec"].get("policyTypes", [])
        and document["spec"]["podSelector"].get("matchLabels", {}).get("app.kubernetes.io/name") == "prompt-gateway"
    ]
    if len(egress) != 1:
        failures.append(f"expected one egress NetworkPolicy for prompt-gateway, found {len(egress)}")
    elif egress[0]["spec"].get("egress") != expected:
        failures.append(f"prompt-gateway egress must be exactly DNS, executors, tool-host and PostgreSQL: {egress[0]['spec'].get('egress')}")
    for document in documents:
        if document["kind"] != "Deployment":
            continue
        labels = document["spec"]["template"]["metadata"]["labels"]
        if labels.get("app.kubernetes.io/name", "").endswith("-executor") and labels.get("app.kubernetes.io/component") != "executor":
            failures.append(f"{document['metadata']['name']}: executor pods need app.kubernetes.io/component: executor")


check_compose()
check_images()
check_manifests()
check_gateway_egress()
if failures:
    print("\n".join(f"FAIL {failure}" for failure in failures), file=sys.stderr)
    sys.exit(1)
