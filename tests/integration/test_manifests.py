"""Offline validation of the Kubernetes manifests and the Helm chart
(scripts/validate_manifests.sh, docs/kubernetes.md): every document of
deploy/kubernetes and of the chart rendered two ways is valid against its
schema (Kubernetes v1.36 OpenAPI, Prometheus Operator and KServe CRDs), and
broken manifests are refused, so the check can fail."""
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "validate_manifests.sh"
DEPLOYMENT = REPO_ROOT / "deploy" / "kubernetes" / "deployment.yaml"
RUNTIME = REPO_ROOT / "deploy" / "kubernetes" / "kserve" / "clusterservingruntime.yaml"
ISVC = REPO_ROOT / "deploy" / "kubernetes" / "kserve" / "inferenceservice.yaml"
SERVICEMONITOR = REPO_ROOT / "deploy" / "kubernetes" / "servicemonitor.yaml"


def run(*files):
    return subprocess.run([str(SCRIPT)] + [str(f) for f in files], capture_output=True,
                          text=True, timeout=300)


def test_every_manifest_and_the_rendered_chart_are_valid():
    p = run()
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[-1] == "all documents valid"
    kinds = sorted(l.split()[-1] for l in lines if l.startswith("ok "))
    assert kinds == sorted([
        "Deployment/inferd", "Service/inferd", "PodDisruptionBudget/inferd",
        "HorizontalPodAutoscaler/inferd", "ServiceMonitor/inferd",
        "ClusterServingRuntime/inferd", "InferenceService/digits",
        # the chart with its defaults
        "Deployment/inferd", "Service/inferd", "PodDisruptionBudget/inferd",
        "HorizontalPodAutoscaler/inferd", "ServiceMonitor/inferd",
        # the chart with every optional object on (autoscaling off)
        "Deployment/demo-inferd", "Service/demo-inferd", "PodDisruptionBudget/demo-inferd",
        "ServiceMonitor/demo-inferd", "ClusterServingRuntime/demo-inferd"])


def broken(tmp_path, source, edit):
    doc = yaml.safe_load(source.read_text())
    edit(doc)
    out = tmp_path / source.name
    out.write_text(yaml.safe_dump(doc))
    return out


def container(doc):
    return doc["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("source, edit, message", [
    (DEPLOYMENT, lambda d: container(d)["ports"][0].update(containerPort="8000"),
     "/spec/template/spec/containers/0/ports/0/containerPort must be integer"),
    (DEPLOYMENT, lambda d: container(d).pop("name"),
     "/spec/template/spec/containers/0 must have required property name"),
    (DEPLOYMENT, lambda d: d["spec"].pop("selector"),
     "/spec must have required property selector"),
    (SERVICEMONITOR, lambda d: d["spec"]["endpoints"][0].update(scheme="ftp"),
     "/spec/endpoints/0/scheme must be equal to one of the allowed values"),
    (RUNTIME, lambda d: d["spec"]["supportedModelFormats"][0].update(priority=0),
     "/spec/supportedModelFormats/0/priority must be >= 1"),
    (RUNTIME, lambda d: d["spec"]["containers"][0].update(image=["inferd"]),
     "/spec/containers/0/image must be string"),
    (ISVC, lambda d: d["spec"]["predictor"]["model"].update(protocolVersion="v3"),
     "/spec/predictor/model/protocolVersion must be equal to one of the allowed values"),
    (ISVC, lambda d: d["spec"]["predictor"]["model"].pop("modelFormat"),
     "/spec/predictor/model must have required property 'modelFormat'"),
])
def test_a_broken_manifest_is_refused(tmp_path, source, edit, message):
    p = run(broken(tmp_path, source, edit))
    assert p.returncode == 1, p.stdout
    assert message in p.stdout, p.stdout
    assert p.stdout.splitlines()[-1] == "1 invalid document(s)"


@pytest.mark.parametrize("text, message", [
    ("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n",
     "unknown kind example.com/v1 Widget (no schema)"),
    ("apiVersion: v1\nkind: Service\nmetadata: {}\nspec: {}\n", "no metadata.name"),
    ("apiVersion: v1\nkind: Service\nmetadata: {name: [\n", "YAML:"),
])
def test_unknown_kinds_and_bad_yaml_are_refused(tmp_path, text, message):
    f = tmp_path / "x.yaml"
    f.write_text(text)
    p = run(f)
    assert p.returncode == 1 and message in p.stdout, p.stdout


def test_chart_refuses_a_grace_period_shorter_than_the_drain(tmp_path):
    values = tmp_path / "v.yaml"
    values.write_text("drain: {exitTimeoutSecs: 60, terminationGracePeriodSeconds: 45}\n")
    third_party = os.environ.get("INFERD_THIRD_PARTY", str(REPO_ROOT / "third_party"))
    render = Path(third_party) / "helm_render" / "helm_render"
    assert run().returncode == 0  # builds the renderer
    p = subprocess.run([str(render), str(REPO_ROOT / "deploy" / "helm" / "inferd"), "x",
                        "-f", str(values)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    assert "drain.terminationGracePeriodSeconds must exceed" in p.stderr


def test_drain_settings_match_across_the_manifests():
    d = yaml.safe_load(DEPLOYMENT.read_text())
    pod = d["spec"]["template"]["spec"]
    args = container(d)["args"]
    exit_timeout = int([a for a in args if a.startswith("--exit-timeout-secs=")][0].split("=")[1])
    pre_stop = container(d)["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert pod["terminationGracePeriodSeconds"] > pre_stop + exit_timeout
    assert container(d)["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert container(d)["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
