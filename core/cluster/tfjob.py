"""A cluster as a Kubeflow TFJob (``kubeflow.org/v1``): the path beyond the machines TowerDeck reaches.

TFJob is the training operator's legacy API (its 1.9 line; Kubeflow Trainer v2 replaced it), still
what many clusters run. Each TowerDeck job becomes a replica spec (``PS``, ``Worker``, ``Chief``,
``Evaluator``) with one container named ``tensorflow``, as the operator's webhook requires.

How the cluster is passed: the operator sets ``TF_CONFIG`` in every pod itself (its own service
names, port 2222), so ``tf_config`` trainers need nothing more. For the classic flags, each pod
gets ``--ps_hosts/--worker_hosts`` built from those service names (``NAME-worker-0:2222``) and
``--task_index=$(TD_TASK_INDEX)``, which Kubernetes expands from the pod's replica-index label
(a downward-API variable): one template serves every task of a job, as a TFJob needs.

Restart policies map one to one (TowerDeck uses Kubeflow's vocabulary); ``max_restarts`` becomes
``runPolicy.backoffLimit``; the parameter servers TowerDeck stops when training is over are
deleted by ``cleanPodPolicy: Running``; a cluster that ends when every worker succeeds gets
``successPolicy: AllWorkers``. What a TFJob cannot say (a per-task command, env or GPU count
that differs inside one job) is reported as a problem naming the task and the fix.
"""

from __future__ import annotations

import re
from typing import Any

from core.cluster.problems import ERROR, WARNING, Problem
from core.cluster.spec import ClusterSpec, Job, Task

API_VERSION = "kubeflow.org/v1"
KIND = "TFJob"
CONTAINER_NAME = "tensorflow"  # the webhook rejects a replica without a container of this name
MAX_LABEL = 63  # Kubernetes' DNS-1035/1123 labels: job, service and namespace names
PORT = 2222  # the operator's default port, named tfjob-port
PORT_NAME = "tfjob-port"
REPLICA_TYPES = {"ps": "PS", "chief": "Chief", "worker": "Worker", "evaluator": "Evaluator"}
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
TASK_INDEX_VAR = "TD_TASK_INDEX"
TB_DIR = "/tmp/towerdeck/tensorboard"
RUN_DIR = "/tmp/towerdeck"
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_VAR_REF = re.compile(r"\$\(")


def job_name_for(cluster_name: str) -> str:
    """A DNS-1035 label (lower case, digits, '-', starting with a letter, at most 63 characters)
    made from the cluster's name; the operator's webhook rejects anything else."""
    name = re.sub(r"[^a-z0-9-]+", "-", cluster_name.lower()).strip("-")
    if not name or not name[0].isalpha():
        name = "tf-" + name
    # Pod and service names add "-worker-12" to it: keep room under Kubernetes' 63.
    return name[:40].rstrip("-") or "tf-cluster"


def _service(name: str, job: str, index: int | str) -> str:
    return f"{name}-{job}-{index}:{PORT}"


def _escape(text: str) -> str:
    # Kubernetes expands $(VAR) in command and args; a user's literal "$(" must stay literal.
    return _VAR_REF.sub("$$(", text)


def _first(job: Job) -> Task:
    """Task 0, which every pod of the job is made like; a counted job's from its job-wide settings."""
    if job.counted:  # tasks = N on Slurm: no host yet, and a pod needs none
        return Task(job.name, 0, "", 0, job.gpus, job.command, dict(job.env))
    return job.tasks[0]


def _same_for_every_task(job: Job, problems: list[Problem]) -> bool:
    if job.counted:
        return True  # one set of job-wide settings for every task
    first = job.tasks[0]
    ok = True
    for task in job.tasks[1:]:
        for what, mine, theirs in (
            ("command", task.command, first.command),
            ("env", task.env, first.env),
            ("GPU count", len(task.gpus or ()), len(first.gpus or ())),
        ):
            if mine != theirs:
                problems.append(
                    Problem(
                        f"jobs.{job.name}.tasks[{task.index}]",
                        f"its {what} differs from task 0's; a TFJob has one pod template per job",
                        f"give every task of [jobs.{job.name}] the same {what} (set it on the job)",
                    )
                )
                ok = False
    return ok


def _args(spec: ClusterSpec, job: Job, name: str) -> list[str]:
    task = _first(job)
    index = f"$({TASK_INDEX_VAR})"
    values = {
        "{python}": "python",  # the image's python: TowerDeck's own interpreter is not in the pod
        "{job_name}": job.name,
        "{task_index}": index,
        "{role}": f"{job.name}:{index}",
        "{address}": _service(name, job.name, index),
        "{port}": str(PORT),
        "{tb_dir}": f"{TB_DIR}/{job.name}-{index}",
        "{run_dir}": RUN_DIR,
    }
    argv = []
    for arg in spec.command_for(task):
        arg = _escape(arg)
        for key, value in values.items():
            arg = arg.replace(key, value)
        argv.append(arg)
    if spec.launch_style in ("flags", "both"):
        for other in ("ps", "chief", "worker"):
            if other in spec.jobs:
                hosts = ",".join(_service(name, other, i) for i in range(spec.jobs[other].size))
                argv.append(f"--{other}_hosts={hosts}")
        argv += [f"--job_name={job.name}", f"--task_index={index}"]
    return argv


def _container(spec: ClusterSpec, job: Job, name: str, *, image: str, workdir: str | None) -> dict[str, Any]:
    task = _first(job)
    env: list[dict[str, Any]] = [
        {"name": TASK_INDEX_VAR, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{REPLICA_INDEX_LABEL}']"}}},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
    ]
    merged = {**spec.env, **task.env}
    env += [{"name": key, "value": _escape(value)} for key, value in sorted(merged.items()) if key != "TF_CONFIG"]
    command = _args(spec, job, name)
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": image,
        "command": command,
        "env": env,
        "ports": [{"name": PORT_NAME, "containerPort": PORT}],
    }
    if workdir:
        container["workingDir"] = workdir
    gpus = len(task.gpus or ())
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    return container


def to_tfjob(
    spec: ClusterSpec,
    image: str,
    *,
    name: str | None = None,
    namespace: str | None = None,
    workdir: str | None = None,
) -> tuple[dict[str, Any] | None, list[Problem]]:
    """The TFJob manifest for ``spec``, or None with the problems that prevent one."""
    problems: list[Problem] = []
    if not image.strip() or any(c.isspace() for c in image):
        problems.append(
            Problem("--image", f"{image!r} is not a container image", "e.g. --image tensorflow/tensorflow:2.16.1")
        )
    job_name = job_name_for(spec.name) if name is None else name  # --name "" is a mistake, not "default"
    label_hint = "lower-case letters, digits and '-', starting with a letter, at most 63 characters"
    if not _DNS_1035.match(job_name) or len(job_name) > MAX_LABEL:
        problems.append(Problem("--name", f"{job_name!r} is not a DNS-1035 label", label_hint))
    else:
        # The operator names a service per task NAME-JOB-INDEX, and a service name is a label too.
        longest = max((f"{job_name}-{job.name}-{job.size - 1}" for job in spec.jobs.values()), key=len, default="")
        if len(longest) > MAX_LABEL:
            problems.append(
                Problem(
                    "--name",
                    f"the service name {longest!r} made from {job_name!r} is {len(longest)} characters, over {MAX_LABEL}",
                    f"give a --name of at most {MAX_LABEL - len(longest) + len(job_name)} characters",
                )
            )
    if namespace is not None and (
        not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", namespace) or len(namespace) > MAX_LABEL
    ):
        problems.append(
            Problem(
                "--namespace",
                f"{namespace!r} is not a namespace name",
                f"lower-case letters, digits and '-', at most {MAX_LABEL} characters, e.g. --namespace ml-team",
            )
        )
    if "chief" in spec.jobs and spec.jobs["chief"].size != 1:
        problems.append(Problem("jobs.chief.tasks", "a TFJob has exactly one chief", "keep one task in [jobs.chief]"))
    uniform = [_same_for_every_task(job, problems) for job in spec.jobs.values()]
    if any(p.severity == ERROR for p in problems) or not all(uniform):
        return None, problems
    replica_specs: dict[str, Any] = {}
    backoff = 0
    for job_key in ("ps", "chief", "worker", "evaluator"):
        if job_key not in spec.jobs:
            continue
        job = spec.jobs[job_key]
        if job.restart.policy != "Never":
            backoff = max(backoff, job.restart.max_restarts)
        replica_specs[REPLICA_TYPES[job_key]] = {
            "replicas": job.size,  # a counted job's count (tasks = N)
            "restartPolicy": job.restart.policy,
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/managed-by": "towerdeck"}},
                "spec": {"containers": [_container(spec, job, job_name, image=image, workdir=workdir)]},
            },
        }
    run_policy: dict[str, Any] = {"cleanPodPolicy": "Running"}
    if backoff:
        run_policy["backoffLimit"] = backoff
    job_spec: dict[str, Any] = {"runPolicy": run_policy, "tfReplicaSpecs": replica_specs}
    completion = spec.completion_jobs()
    if completion == ("worker",) and "chief" not in spec.jobs:
        job_spec["successPolicy"] = "AllWorkers"
    elif set(completion) - {"chief", "worker"}:
        problems.append(
            Problem(
                "complete_when",
                f"a TFJob ends when its chief (or worker 0) succeeds, not {', '.join(completion)}",
                "the exported job keeps the operator's rule; check it suits your trainers",
                WARNING,
            )
        )
    metadata: dict[str, Any] = {"name": job_name}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": job_spec}, problems
