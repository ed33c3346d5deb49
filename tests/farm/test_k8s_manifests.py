"""The farm's Kubernetes manifests validate against their schemas, and the check has teeth."""

from __future__ import annotations

import copy
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "kubernetes_validate", reason="kubernetes-validate (the schema validator) is not installed"
)
yaml = pytest.importorskip("yaml")

K8S = Path(__file__).resolve().parents[2] / "packaging" / "k8s"


def _validator() -> Any:
    spec = importlib.util.spec_from_file_location("k8s_validate", K8S / "validate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["k8s_validate"] = module
    spec.loader.exec_module(module)
    return module


validate = _validator()


def cluster() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((K8S / "raycluster.yaml").read_text())
    return doc


def test_every_manifest_here_is_valid(capsys: pytest.CaptureFixture[str]) -> None:
    assert validate.main([]) == 0
    out = capsys.readouterr().out
    assert "RayCluster ffdesk-farm: valid" in out and "PersistentVolumeClaim ffdesk-media: valid" in out


def test_the_cluster_asks_for_gpus_token_auth_and_the_shared_paths() -> None:
    doc = cluster()
    assert doc["spec"]["authOptions"]["mode"] == "token"
    assert doc["spec"]["rayVersion"] == "2.60.0"
    for group in doc["spec"]["workerGroupSpecs"]:
        pod = group["template"]["spec"]
        limits = pod["containers"][0]["resources"]["limits"]
        assert int(limits["nvidia.com/gpu"]) == int(group["rayStartParams"]["num-gpus"])
        assert "nvidia.com/gpu.product" in pod["nodeSelector"]
        assert "gpu_memory_gb" in group["rayStartParams"]["resources"]
        mounts = {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
        assert {"/media", "/models"} <= mounts


def _broken(change: str) -> dict[str, Any]:
    doc = copy.deepcopy(cluster())
    group = doc["spec"]["workerGroupSpecs"][0]
    if change == "unknown field":
        group["replicass"] = 2
    elif change == "wrong type":
        group["replicas"] = "four"
    elif change == "bad pod field":
        group["template"]["spec"]["containers"][0]["imagee"] = "x"
    elif change == "missing group name":
        del group["groupName"]
    return doc


@pytest.mark.parametrize("change", ["unknown field", "wrong type", "bad pod field", "missing group name"])
def test_a_broken_cluster_is_caught(change: str) -> None:
    assert validate.check(_broken(change)) != []


def test_a_broken_core_manifest_is_caught() -> None:
    claim = next(yaml.safe_load_all((K8S / "volumes.yaml").read_text()))
    claim["spec"]["accessModes"] = "ReadWriteMany"
    assert validate.check(claim) != []
