#!/usr/bin/env python3
"""Checks that docker-compose.yml and the Kubernetes manifests pass only settings the
binaries read: each service's environment (and command) is handed to its binary's
`--check-config`, which parses it and refuses unknown agentic settings, and no service is
given the stand-in model's settings (the services know nothing of it). The files ship no
secret: compose requires the operator's tokens, the Kubernetes Secret holds placeholders
that every service refuses (checked both ways: refused as shipped, accepted once an
operator's secrets replace them), and compose publishes ports on loopback by default. Also checks that
compose `depends_on` and kustomize `resources` name things that exist, and that the
Kubernetes gateway may reach only DNS, the executors, the tool-host and PostgreSQL."""

import os
import re
import secrets
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
# What an operator sets for compose's required variables, and puts into the Kubernetes
# Secret instead of its placeholders: random secrets, as the files' comments ask.
OPERATOR = {
    "AGENTIC_INTERNAL_TOKEN": secrets.token_hex(32),
    "AGENTIC_AUTH_TOKENS": f"{secrets.token_hex(32)}=alice",
}
REQUIRED_IN_COMPOSE = {"AGENTIC_INTERNAL_TOKEN", "AGENTIC_AUTH_TOKENS"}
PUBLISHED_ON = "${AGENTIC_PUBLISH_ADDRESS:-127.0.0.1}:"


def compose_value(value, overrides=None):
    """A value as compose makes it: `${VAR:-default}` is VAR from `overrides` (an env file)
    or its default, `${VAR:?message}` is what the operator sets for VAR."""
    overrides = overrides or {}

    def required(match):
        name = match.group(1)
        if name not in OPERATOR:
            failures.append(f"compose requires {name}, which this check has no operator value for")
        return OPERATOR.get(name, "")

    value = re.sub(r"\$\{([A-Z0-9_]+):-([^}]*)\}",
                   lambda match: overrides.get(match.group(1), match.group(2)), str(value))
    return re.sub(r"\$\{([A-Z0-9_]+):\?[^}]*\}", required, value)


def check_config(binary, env, args):
    """Runs `binary --check-config` with `env`; its result."""
    run_env = {"PATH": os.environ.get("PATH", ""), **env}
    return subprocess.run([str(BIN / binary), *args, "--check-config"], env=run_env, capture_output=True, text=True)


def first_line(result):
    return result.stderr.strip().splitlines()[0] if result.stderr.strip() else str(result.returncode)


def check(origin, binary, env, args):
    if binary not in SERVICES and binary != STAND_IN_MODEL:
        return
    misplaced = sorted(name for name in env if name.startswith(STAND_IN_MODEL_PREFIX))
    if binary in SERVICES and misplaced:
        failures.append(f"{origin}: {binary} is given the stand-in model's settings: {', '.join(misplaced)}")
        return
    result = check_config(binary, env, args)
    if result.returncode != 0:
        failures.append(f"{origin}: {binary} refuses its configuration: {first_line(result)}")
    else:
        print(f"ok  {origin}: {binary} accepts {len(env)} settings")


def env_file(path):
    """The variables of a compose env file."""
    pairs = (line.split("=", 1) for line in path.read_text().splitlines()
             if line.strip() and not line.startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


def check_compose():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    demo = env_file(ROOT / "deploy" / "compose" / "demo.env")
    for name, service in services.items():
        for dependency in service.get("depends_on", {}) or {}:
            if dependency not in services:
                failures.append(f"compose: {name} depends on unknown service {dependency}")
        for port in service.get("ports", []) or []:
            if not str(port).startswith(PUBLISHED_ON):
                failures.append(f"compose {name}: publishes {port} on every interface, not on {PUBLISHED_ON}")
        command = service.get("command") or []
        if not command:
            continue
        raw = service.get("environment") or {}
        for variable in REQUIRED_IN_COMPOSE:
            if variable in raw and not str(raw[variable]).startswith(f"${{{variable}:?"):
                failures.append(f"compose {name}: {variable} has a default ({raw[variable]}); the operator must set it")
        for origin, overrides in [(f"compose {name}", {}), (f"compose {name} (demo.env)", demo)]:
            env = {key: compose_value(value, overrides) for key, value in raw.items()}
            env = {key: value for key, value in env.items() if value != ""}
            check(origin, command[0], env, command[1:])


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
    """Each Deployment's container with the base's ConfigMap and Secret: refused as shipped
    (the Secret's tokens are placeholders), accepted with an operator's secrets in place."""
    config, shipped = {}, {}
    documents = list(manifest_documents())
    for path, document in documents:
        if document["kind"] == "ConfigMap" and "base" in path.parts:
            config.update(document.get("data", {}))
        if document["kind"] == "Secret":
            shipped.update(document.get("stringData", {}))
    operator = {**shipped, "internal-token": OPERATOR["AGENTIC_INTERNAL_TOKEN"],
                "auth-tokens": OPERATOR["AGENTIC_AUTH_TOKENS"]}
    for path, document in documents:
        if document["kind"] != "Deployment":
            continue
        for container in document["spec"]["template"]["spec"]["containers"]:
            env, placeholders = {}, {}
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
                    if key not in shipped:
                        failures.append(f"{path.name}: {variable['name']} reads missing secret key {key}")
                    env[variable["name"]] = operator.get(key, "")
                    if key in ("internal-token", "auth-tokens"):
                        placeholders[variable["name"]] = shipped.get(key, "")
            command = container.get("command", [])
            origin = f"{path.relative_to(ROOT)} {container['name']}"
            args = command[1:] + container.get("args", [])
            check(origin, command[0], env, args)
            # Each token as shipped, alone among an operator's secrets, is refused.
            for name, placeholder in placeholders.items():
                as_shipped = check_config(command[0], {**env, name: placeholder}, args)
                if as_shipped.returncode == 0:
                    failures.append(f"{origin}: {command[0]} accepts {name} as shipped ({placeholder})")
                else:
                    print(f"ok  {origin}: {command[0]} refuses {name} as shipped: {first_line(as_shipped)}")


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
