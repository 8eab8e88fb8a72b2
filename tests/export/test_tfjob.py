"""export --tfjob: the cluster as a TFJob that the CRD's schema and the operator's webhook accept."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from core.cluster.spec import load
from core.cluster.tfjob import to_tfjob
from tests.helpers.project import ROOT, run_cli
from tests.helpers.tfjob_rules import check

DEMO = ROOT / "resources" / "demo_cluster.toml"
PS_CLUSTER = ROOT / "resources" / "parameter_server_cluster.toml"
IMAGE = "registry.example.com/ml/trainer:1.0"


def _export(path: Path, **options: Any) -> dict[str, Any]:
    spec, problems = load(path)
    assert spec is not None, problems
    manifest, problems = to_tfjob(spec, options.pop("image", IMAGE), **options)
    assert manifest is not None, problems
    return manifest


def _container(manifest: dict[str, Any], rtype: str) -> dict[str, Any]:
    container: dict[str, Any] = manifest["spec"]["tfReplicaSpecs"][rtype]["template"]["spec"]["containers"][0]
    return container


def test_the_classic_demo_exports_as_a_valid_tfjob_with_flags_from_service_names() -> None:
    manifest = _export(DEMO)
    assert check(manifest) == []
    replicas = manifest["spec"]["tfReplicaSpecs"]
    assert {k: (v["replicas"], v["restartPolicy"]) for k, v in replicas.items()} == {
        "PS": (1, "OnFailure"),
        "Worker": (2, "OnFailure"),
    }
    assert manifest["spec"]["runPolicy"] == {"cleanPodPolicy": "Running", "backoffLimit": 3}
    assert manifest["spec"]["successPolicy"] == "AllWorkers"  # TowerDeck ends when every worker succeeded
    worker = _container(manifest, "Worker")
    assert worker["name"] == "tensorflow" and worker["image"] == IMAGE
    assert worker["command"][:3] == ["python", "-u", "between_graph.py"]
    assert worker["command"][-4:] == [
        "--ps_hosts=demo-ps-0:2222",
        "--worker_hosts=demo-worker-0:2222,demo-worker-1:2222",
        "--job_name=worker",
        "--task_index=$(TD_TASK_INDEX)",
    ]
    index_var = next(v for v in worker["env"] if v["name"] == "TD_TASK_INDEX")
    assert index_var["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['training.kubeflow.org/replica-index']"
    assert {"name": "TF_CPP_MIN_LOG_LEVEL", "value": "0"} in worker["env"]


def test_a_tf2_parameter_server_cluster_keeps_its_chief_and_no_flags(tmp_path: Path) -> None:
    text = PS_CLUSTER.read_text().replace(
        '[jobs.worker]\ntasks = ["127.0.0.1:42232", "127.0.0.1:42233"]',
        '[jobs.worker]\ntasks = ["127.0.0.1:42232", "127.0.0.1:42233"]\ngpus = [0, 1]',
    )
    text += '\n[jobs.evaluator]\ntasks = ["127.0.0.1:42234"]\n'
    path = tmp_path / "ps.toml"
    path.write_text(text)
    manifest = _export(path, namespace="ml-team", workdir="/app")
    assert check(manifest) == []
    assert manifest["metadata"] == {"name": "tf2-parameter-server", "namespace": "ml-team"}
    replicas = manifest["spec"]["tfReplicaSpecs"]
    assert list(replicas) == ["PS", "Chief", "Worker", "Evaluator"]
    assert replicas["Chief"]["replicas"] == 1 and replicas["Chief"]["restartPolicy"] == "Never"
    assert "successPolicy" not in manifest["spec"]  # the chief's success ends it, as in TowerDeck
    worker = _container(manifest, "Worker")
    assert worker["command"] == ["python", "-u", "parameter_server.py", "--train_steps=200", "--log_every=20"]
    assert worker["resources"] == {"limits": {"nvidia.com/gpu": 2}}
    assert worker["workingDir"] == "/app"
    assert "resources" not in _container(manifest, "PS")


def test_placeholders_and_literal_dollar_parens(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        'name = "Ph Test_1"\nlaunch_style = "tf_config"\n'
        'command = ["python", "t.py", "--logdir={tb_dir}", "--me={address}", "--note=$(not-a-var)"]\n'
        '[jobs.ps]\ntasks = ["127.0.0.1:5000"]\n[jobs.worker]\ntasks = ["127.0.0.1:5001"]\n'
    )
    manifest = _export(path)
    assert check(manifest) == []
    assert manifest["metadata"]["name"] == "ph-test-1"
    assert _container(manifest, "Worker")["command"][2:] == [
        "--logdir=/tmp/towerdeck/tensorboard/worker-$(TD_TASK_INDEX)",
        "--me=ph-test-1-worker-$(TD_TASK_INDEX):2222",
        "--note=$$(not-a-var)",  # Kubernetes turns $$( into a literal $(
    ]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda m: m["metadata"].update(name="Demo_Job"), "not a DNS-1035 label"),
        (lambda m: _container(m, "Worker").update(name="trainer"), "container with name tensorflow"),
        (lambda m: _container(m, "Worker").update(image=""), "image: must be required"),
        (lambda m: m["spec"]["tfReplicaSpecs"].update(Chief={}, Master={}), "more than 1 Chief or Master"),
        (lambda m: m["spec"]["tfReplicaSpecs"]["PS"].update(restartPolicy="Sometimes"), "restartPolicy"),
        (lambda m: m["spec"]["runPolicy"].update(cleanPodPolicy="Some"), "cleanPodPolicy"),
        (lambda m: m["spec"].update(successPolicy="AnyWorker"), "successPolicy"),
        (lambda m: m["spec"]["tfReplicaSpecs"]["PS"].update(replicas=-1), "replicas"),
        (lambda m: m["spec"].pop("tfReplicaSpecs"), "tfReplicaSpecs"),
        (lambda m: _container(m, "PS").update(cmd=["x"]), "unknown field"),
    ],
)
def test_the_rules_catch_what_the_api_server_would_refuse(mutate: Any, expected: str) -> None:
    manifest = copy.deepcopy(_export(DEMO))
    mutate(manifest)
    assert any(expected in e for e in check(manifest)), check(manifest)


def test_what_a_tfjob_cannot_say_is_refused_with_the_task_and_fix(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        'name = "x"\ncommand = ["python", "t.py"]\n[jobs.ps]\ntasks = ["127.0.0.1:5000"]\n'
        '[jobs.worker]\ntasks = ["127.0.0.1:5001", { address = "127.0.0.1:5002", command = ["python", "other.py"] }]\n'
    )
    spec, _ = load(path)
    assert spec is not None
    manifest, problems = to_tfjob(spec, IMAGE)
    assert manifest is None
    assert [(p.field, p.hint) for p in problems] == [
        ("jobs.worker.tasks[1]", "give every task of [jobs.worker] the same command (set it on the job)")
    ]
    assert to_tfjob(spec.with_workdir(tmp_path), "bad image")[0] is None


def test_cli_export_writes_the_manifest_and_refuses_bad_input(tmp_path: Path) -> None:
    out = tmp_path / "demo-tfjob.json"
    done = run_cli("export", "--tfjob", str(DEMO), "--image", IMAGE, "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert f"kubectl apply -f {out}" in done.stdout
    assert check(json.loads(out.read_text())) == []
    printed = run_cli("export", "--tfjob", str(DEMO), "--image", IMAGE)
    assert json.loads(printed.stdout) == json.loads(out.read_text())
    bad = run_cli("export", "--tfjob", str(DEMO), "--image", IMAGE, "--name", "Demo_Job")
    assert bad.returncode == 2
    assert "error: --name: 'Demo_Job' is not a DNS-1035 label" in bad.stderr and "fix:" in bad.stderr
    missing = run_cli("export", "--tfjob", str(tmp_path / "none.toml"), "--image", IMAGE)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
