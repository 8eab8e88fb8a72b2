"""What Kubernetes and the training operator (1.9) would say about a TFJob manifest.

Written from the TFJob CRD (``manifests/base/crds/kubeflow.org_tfjobs.yaml``: field names and
types; unknown fields listed as ``kubectl --validate=strict`` would) and from the operator's
validating webhook (a DNS-1035 job name, a container named ``tensorflow`` with an image in every
replica, at most one Chief or Master), plus the enums the API documents (restart, clean-pod and
success policies). Independent of core/cluster/tfjob.py, so a mistake there shows here.
"""

from __future__ import annotations

import re
from typing import Any

DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
IANA_SVC_NAME = re.compile(r"^(?=.*[a-z])[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
QUANTITY = re.compile(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
REPLICA_TYPES = {"PS", "Worker", "Chief", "Master", "Evaluator"}
RESTART_POLICIES = {"Always", "OnFailure", "Never", "ExitCode"}
CLEAN_POD_POLICIES = {"All", "Running", "None"}
SUCCESS_POLICIES = {"", "AllWorkers"}
INT32_MAX = 2**31 - 1

TOP = {"apiVersion", "kind", "metadata", "spec", "status"}
SPEC = {"enableDynamicWorker", "runPolicy", "successPolicy", "tfReplicaSpecs"}
RUN_POLICY = {
    "activeDeadlineSeconds",
    "backoffLimit",
    "cleanPodPolicy",
    "schedulingPolicy",
    "suspend",
    "ttlSecondsAfterFinished",
    "managedBy",
}
REPLICA = {"replicas", "restartPolicy", "template"}
TEMPLATE = {"metadata", "spec"}
# The pod and container fields this exporter may write; anything else would need this list grown.
POD_SPEC = {"containers", "nodeSelector", "tolerations", "volumes", "restartPolicy"}
CONTAINER = {"name", "image", "command", "args", "env", "ports", "resources", "workingDir"}


def _unknown(obj: dict[str, Any], allowed: set[str], path: str, errors: list[str]) -> None:
    errors += [f"{path}.{key}: unknown field" for key in obj if key not in allowed]


def _int(value: Any, path: str, errors: list[str], minimum: int = 0, maximum: int = INT32_MAX) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        errors.append(f"{path}: must be an integer in {minimum}..{maximum}, not {value!r}")


def check(manifest: Any) -> list[str]:
    """Every rule the manifest breaks, as ``path: message``; empty when Kubernetes would accept it."""
    errors: list[str] = []
    if not isinstance(manifest, dict):
        return ["<root>: must be an object"]
    _unknown(manifest, TOP, "", errors)
    if manifest.get("apiVersion") != "kubeflow.org/v1":
        errors.append(".apiVersion: must be kubeflow.org/v1")
    if manifest.get("kind") != "TFJob":
        errors.append(".kind: must be TFJob")
    metadata = manifest.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(name, str) or not DNS_1035.match(name) or len(name) > 63:
        errors.append(f".metadata.name: {name!r} is not a DNS-1035 label (webhook)")
    spec = manifest.get("spec")
    if not isinstance(spec, dict):
        return [*errors, ".spec: must be an object"]
    _unknown(spec, SPEC, ".spec", errors)
    for required in ("runPolicy", "tfReplicaSpecs"):
        if required not in spec:
            errors.append(f".spec.{required}: required")
    if spec.get("successPolicy", "") not in SUCCESS_POLICIES:
        errors.append(f".spec.successPolicy: {spec['successPolicy']!r} is not one of {sorted(SUCCESS_POLICIES)}")
    run_policy = spec.get("runPolicy", {})
    if not isinstance(run_policy, dict):
        errors.append(".spec.runPolicy: must be an object")
    else:
        _unknown(run_policy, RUN_POLICY, ".spec.runPolicy", errors)
        if run_policy.get("cleanPodPolicy", "None") not in CLEAN_POD_POLICIES:
            errors.append(f".spec.runPolicy.cleanPodPolicy: not one of {sorted(CLEAN_POD_POLICIES)}")
        for key in ("backoffLimit", "ttlSecondsAfterFinished"):
            if key in run_policy:
                _int(run_policy[key], f".spec.runPolicy.{key}", errors)
        if "activeDeadlineSeconds" in run_policy:
            _int(run_policy["activeDeadlineSeconds"], ".spec.runPolicy.activeDeadlineSeconds", errors, 1, 2**63 - 1)
    replicas = spec.get("tfReplicaSpecs")
    if not isinstance(replicas, dict) or not replicas:
        return [*errors, ".spec.tfReplicaSpecs: must be a non-empty object (webhook: must be required)"]
    if len({"Chief", "Master"} & set(replicas)) > 1:
        errors.append(".spec.tfReplicaSpecs: must not have more than 1 Chief or Master role (webhook)")
    for rtype, rspec in replicas.items():
        _check_replica(rtype, rspec, f".spec.tfReplicaSpecs.{rtype}", errors)
    return errors


def _check_replica(rtype: str, rspec: Any, path: str, errors: list[str]) -> None:
    if rtype not in REPLICA_TYPES:
        errors.append(f"{path}: {rtype!r} is not a TFJob replica type {sorted(REPLICA_TYPES)}")
    if not isinstance(rspec, dict):
        errors.append(f"{path}: must be an object")
        return
    _unknown(rspec, REPLICA, path, errors)
    if "replicas" in rspec:
        _int(rspec["replicas"], f"{path}.replicas", errors)
        if rtype in ("Chief", "Master") and rspec["replicas"] != 1:
            errors.append(f"{path}.replicas: a TFJob has one {rtype}")
    if rspec.get("restartPolicy", "Never") not in RESTART_POLICIES:
        errors.append(f"{path}.restartPolicy: {rspec['restartPolicy']!r} is not one of {sorted(RESTART_POLICIES)}")
    template = rspec.get("template")
    pod = template.get("spec") if isinstance(template, dict) else None
    if isinstance(template, dict):
        _unknown(template, TEMPLATE, f"{path}.template", errors)
    containers = pod.get("containers") if isinstance(pod, dict) else None
    cpath = f"{path}.template.spec.containers"
    if not isinstance(containers, list) or not containers:
        errors.append(f"{cpath}: must be specified (webhook)")
        return
    _unknown(pod, POD_SPEC, f"{path}.template.spec", errors)  # type: ignore[arg-type]
    if not any(isinstance(c, dict) and c.get("name") == "tensorflow" for c in containers):
        errors.append(f"{cpath}: must have at least one container with name tensorflow (webhook)")
    for i, container in enumerate(containers):
        _check_container(container, f"{cpath}[{i}]", errors)


def _check_container(container: Any, path: str, errors: list[str]) -> None:
    if not isinstance(container, dict):
        errors.append(f"{path}: must be an object")
        return
    _unknown(container, CONTAINER, path, errors)
    if not isinstance(container.get("name"), str) or not DNS_1123_LABEL.match(container["name"]):
        errors.append(f"{path}.name: required, a DNS-1123 label")
    if not isinstance(container.get("image"), str) or not container["image"]:
        errors.append(f"{path}.image: must be required (webhook)")
    for key in ("command", "args"):
        if key in container and not (
            isinstance(container[key], list) and all(isinstance(a, str) for a in container[key])
        ):
            errors.append(f"{path}.{key}: must be a list of strings")
    for j, var in enumerate(container.get("env", [])):
        vpath = f"{path}.env[{j}]"
        if not isinstance(var, dict) or not isinstance(var.get("name"), str) or not ENV_NAME.match(var["name"]):
            errors.append(f"{vpath}.name: required, a C identifier-like name")
            continue
        if ("value" in var) == ("valueFrom" in var):
            errors.append(f"{vpath}: exactly one of value and valueFrom")
        elif "value" in var and not isinstance(var["value"], str):
            errors.append(f"{vpath}.value: must be a string")
        elif "valueFrom" in var:
            field_path = var["valueFrom"].get("fieldRef", {}).get("fieldPath", "")
            if not re.fullmatch(
                r"metadata\.(name|namespace|uid|labels\['[^']+'\]|annotations\['[^']+'\])|spec\.\w+|status\.\w+",
                field_path,
            ):
                errors.append(f"{vpath}.valueFrom.fieldRef.fieldPath: {field_path!r} is not a supported field")
    for j, port in enumerate(container.get("ports", [])):
        _int(port.get("containerPort"), f"{path}.ports[{j}].containerPort", errors, 1, 65535)
        if "name" in port and (not IANA_SVC_NAME.match(port["name"]) or len(port["name"]) > 15):
            errors.append(f"{path}.ports[{j}].name: not an IANA service name of at most 15 characters")
    for kind, values in container.get("resources", {}).items():
        if kind not in ("limits", "requests"):
            errors.append(f"{path}.resources.{kind}: unknown field")
            continue
        for resource, amount in values.items():
            if not (
                (isinstance(amount, int) and not isinstance(amount, bool))
                or (isinstance(amount, str) and QUANTITY.match(amount))
            ):
                errors.append(f"{path}.resources.{kind}.{resource}: {amount!r} is not a quantity")
