"""packaging/k8s/train-job.yaml: the Kubernetes Job that runs `ffdesk train` under torchrun."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ffdesk.commands.train import worker_argv
from ffdesk.training.launch import ELASTIC_ENV

MANIFEST = Path(__file__).resolve().parents[2] / "packaging" / "k8s" / "train-job.yaml"


def _docs() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(MANIFEST.read_text(encoding="utf-8")) if d]


def test_the_manifest_validates_against_the_kubernetes_schemas() -> None:
    kv = pytest.importorskip(
        "kubernetes_validate", reason="kubernetes-validate is not installed in .venv (the schema validator)"
    )
    for doc in _docs():
        kv.validate(doc, kv.latest_version(), strict=True)


def test_the_job_runs_ffdesk_train_under_torchrun_on_gpus_with_a_shared_volume() -> None:
    docs = {d["kind"]: d for d in _docs()}
    assert set(docs) == {"Service", "Job"}
    job = docs["Job"]["spec"]
    pod = job["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    assert container["command"] == ["torchrun"]
    assert args[args.index("-m") + 1 : args.index("-m") + 3] == ["ffdesk", "train"]
    opts = dict(a.split("=", 1) for a in args if a.startswith("--") and "=" in a)
    nodes, per_node = int(opts["--nnodes"]), int(opts["--nproc-per-node"])
    assert nodes == job["parallelism"] == job["completions"] and job["completionMode"] == "Indexed"
    assert container["resources"]["limits"]["nvidia.com/gpu"] == per_node
    assert int(opts["--batch"]) % (nodes * per_node) == 0  # the global batch splits across ranks
    assert "--run-dir" in opts and "--resume" in args  # a restarted pod continues the run
    # the rendezvous host is pod 0 under the headless service
    assert opts["--rdzv-endpoint"].startswith(f"{docs['Job']['metadata']['name']}-0.{pod['subdomain']}:")
    assert (
        docs["Service"]["spec"]["clusterIP"] == "None"
        and docs["Service"]["metadata"]["name"] == pod["subdomain"]
    )
    env = {e["name"]: e["value"] for e in container["env"]}
    assert {k: env.get(k) for k in ELASTIC_ENV} == ELASTIC_ENV
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    claims = {v["name"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
    assert claims and all(
        opts[k].startswith(mounts[next(iter(claims))]) for k in ("--src", "--dst", "--run-dir")
    )


def test_the_train_options_in_the_job_are_ones_the_cli_takes() -> None:
    import argparse

    from ffdesk.commands import train

    parser = argparse.ArgumentParser()
    train.register(parser.add_subparsers())
    args = _docs()[1]["spec"]["template"]["spec"]["containers"][0]["args"]
    ns = parser.parse_args(args[args.index("-m") + 2 :])
    assert ns.run == Path("/mnt/ffdesk/runs/person-a") and ns.amp and ns.resume
    # what `--nproc` hands torchrun spells the run folder --run-dir (torchrun takes --run for --run-path)
    assert "--run-dir" in worker_argv(ns) and "--run" not in worker_argv(ns)
