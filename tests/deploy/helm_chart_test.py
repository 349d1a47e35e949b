#!/usr/bin/python3
"""Checks helm/ernie-serve: Chart.yaml and values.yaml parse; the chart's copy
of the Grafana dashboard equals deploy/grafana/ernie-serve.json; and, when a
helm binary is found ($ERNIE_HELM, `helm` on PATH, or
~/.cache/ernie-serve/tools/helm/helm as tools/setup installs it), `helm lint`
and `helm template` over several values files, with the rendered objects
checked. Without helm it exits 77 (ctest: skipped) after the static checks."""
import json
import os
import shutil
import subprocess
import sys

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CHART = os.path.join(ROOT, "helm", "ernie-serve")
VALUES = os.path.join(os.path.dirname(__file__), "values")
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def find_helm():
    for candidate in (os.environ.get("ERNIE_HELM"), shutil.which("helm"),
                      os.path.expanduser("~/.cache/ernie-serve/tools/helm/helm")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def static_checks():
    chart = yaml.safe_load(open(os.path.join(CHART, "Chart.yaml")))
    check(chart.get("apiVersion") == "v2" and chart.get("name") == "ernie-serve", "Chart.yaml: apiVersion v2, name")
    values = yaml.safe_load(open(os.path.join(CHART, "values.yaml")))
    for key in ("image", "model", "gateway", "tokenizer", "worker", "metrics", "grafanaDashboard"):
        check(key in values, f"values.yaml has no {key}")
    check(values["metrics"]["serviceMonitor"]["enabled"] is False, "the ServiceMonitor is off by default")
    chart_copy = json.load(open(os.path.join(CHART, "dashboards", "ernie-serve.json")))
    original = json.load(open(os.path.join(ROOT, "deploy", "grafana", "ernie-serve.json")))
    check(chart_copy == original, "helm/ernie-serve/dashboards/ernie-serve.json differs from deploy/grafana/ernie-serve.json")


def render(helm, values_file=None, expect_failure=False):
    command = [helm, "template", "rel", CHART, "--namespace", "llm"]
    if values_file:
        command += ["-f", os.path.join(VALUES, values_file)]
    result = subprocess.run(command, capture_output=True, text=True)
    if expect_failure:
        return result
    check(result.returncode == 0, f"helm template {values_file}: {result.stderr}")
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def container(objects, name):
    return objects[("Deployment", f"rel-ernie-serve-{name}")]["spec"]["template"]["spec"]["containers"][0]


def check_common(objects, label):
    for name in ("gateway", "tokenizer", "worker"):
        check(("Deployment", f"rel-ernie-serve-{name}") in objects, f"{label}: no {name} Deployment")
    headless = objects[("Service", "rel-ernie-serve-worker-headless")]
    check(headless["spec"]["clusterIP"] == "None", f"{label}: the worker Service is not headless")
    gateway = container(objects, "gateway")
    check("--worker-dns=rel-ernie-serve-worker-headless:50052" in gateway["args"], f"{label}: gateway --worker-dns")
    check("--tokenizer=rel-ernie-serve-tokenizer:50051" in gateway["args"], f"{label}: gateway --tokenizer")
    check(gateway["readinessProbe"]["httpGet"]["path"] == "/ready", f"{label}: gateway readiness /ready")
    check(gateway["livenessProbe"]["httpGet"]["path"] == "/health", f"{label}: gateway liveness /health")
    for name in ("tokenizer", "worker"):
        c = container(objects, name)
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            check("grpc" in c[probe], f"{label}: {name} {probe} is not a gRPC probe")
        check(any(a.startswith("--metrics-port=") for a in c["args"]), f"{label}: {name} has no --metrics-port")
    for name in ("gateway", "tokenizer", "worker"):
        pod = objects[("Deployment", f"rel-ernie-serve-{name}")]["spec"]["template"]["spec"]
        check(pod["securityContext"]["runAsNonRoot"] is True, f"{label}: {name} may run as root")
        check(container(objects, name)["securityContext"]["readOnlyRootFilesystem"] is True,
              f"{label}: {name} root filesystem is writable")
    config = yaml.safe_load(objects[("ConfigMap", "rel-ernie-serve-worker-config")]["data"]["worker.yaml"])
    check(isinstance(config, dict) and "drain_timeout_s" in config, f"{label}: worker.yaml lacks drain_timeout_s")
    return config


def helm_checks(helm):
    lint = subprocess.run([helm, "lint", CHART, "--strict"], capture_output=True, text=True)
    check(lint.returncode == 0, f"helm lint --strict: {lint.stdout}{lint.stderr}")
    for values_file in ("image-source-cpu.yaml", "hostpath-fixed-gateways.yaml"):
        lint = subprocess.run([helm, "lint", CHART, "--strict", "-f", os.path.join(VALUES, values_file)],
                              capture_output=True, text=True)
        check(lint.returncode == 0, f"helm lint {values_file}: {lint.stdout}{lint.stderr}")

    # Defaults: PVC models, GPUs on, HPA and PDBs on, no ServiceMonitor or dashboard.
    objects = render(helm)
    check_common(objects, "defaults")
    worker = container(objects, "worker")
    check(worker["resources"]["limits"].get("nvidia.com/gpu") == 1, "defaults: worker limits nvidia.com/gpu 1")
    worker_pod = objects[("Deployment", "rel-ernie-serve-worker")]["spec"]["template"]["spec"]
    check(worker_pod["terminationGracePeriodSeconds"] == 70, "defaults: worker grace = drain 60 + 10")
    check(worker_pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == "ernie-models", "defaults: PVC volume")
    gateway_pod = objects[("Deployment", "rel-ernie-serve-gateway")]["spec"]["template"]["spec"]
    check(gateway_pod["terminationGracePeriodSeconds"] == 40, "defaults: gateway grace = drain 30 + 10")
    check(("HorizontalPodAutoscaler", "rel-ernie-serve-gateway") in objects, "defaults: no gateway HPA")
    check("replicas" not in objects[("Deployment", "rel-ernie-serve-gateway")]["spec"],
          "defaults: the HPA owns the gateway's replicas")
    for name in ("gateway", "tokenizer", "worker"):
        check(("PodDisruptionBudget", f"rel-ernie-serve-{name}") in objects, f"defaults: no {name} PDB")
    check(not any(kind == "ServiceMonitor" for kind, _ in objects), "defaults: a ServiceMonitor is rendered")
    annotations = objects[("Deployment", "rel-ernie-serve-worker")]["spec"]["template"]["metadata"]["annotations"]
    check(annotations.get("prometheus.io/port") == "9090", "defaults: worker prometheus.io/port")

    # CPU, image-copied model, ServiceMonitor and dashboard on.
    objects = render(helm, "image-source-cpu.yaml")
    config = check_common(objects, "image-source-cpu")
    check(config.get("backend") == "cpu" and config.get("threads") == 4, "image-source-cpu: worker.yaml values")
    check(config.get("served_model_name") == "demo", "image-source-cpu: served_model_name in worker.yaml")
    worker = container(objects, "worker")
    check("nvidia.com/gpu" not in worker["resources"]["limits"], "image-source-cpu: GPU requested with gpu off")
    pod = objects[("Deployment", "rel-ernie-serve-worker")]["spec"]["template"]["spec"]
    check(pod["initContainers"][0]["name"] == "copy-model", "image-source-cpu: no copy-model init container")
    check("emptyDir" in pod["volumes"][0], "image-source-cpu: model volume is not an emptyDir")
    check(pod["terminationGracePeriodSeconds"] == 30, "image-source-cpu: worker grace = 20 + 10")
    check(objects[("Deployment", "rel-ernie-serve-worker")]["spec"]["replicas"] == 3, "image-source-cpu: replicas")
    monitor = objects.get(("ServiceMonitor", "rel-ernie-serve"))
    check(monitor is not None and monitor["metadata"]["labels"].get("release") == "kube-prometheus-stack",
          "image-source-cpu: ServiceMonitor with its labels")
    dashboard = objects.get(("ConfigMap", "rel-ernie-serve-dashboard"))
    check(dashboard is not None and dashboard["metadata"]["labels"].get("grafana_dashboard") == "1",
          "image-source-cpu: dashboard ConfigMap labelled for the sidecar")
    if dashboard:
        check(json.loads(dashboard["data"]["ernie-serve.json"])["uid"] == "ernie-serve",
              "image-source-cpu: the dashboard ConfigMap holds the dashboard JSON")
    gateway = container(objects, "gateway")
    check("--cors" in gateway["args"], "image-source-cpu: gateway extraArgs")
    check(gateway["env"][0]["valueFrom"]["secretKeyRef"]["name"] == "ernie-api-key", "image-source-cpu: API key")

    # hostPath, fixed gateways, no PDBs, 2 GPUs on H200 nodes.
    objects = render(helm, "hostpath-fixed-gateways.yaml")
    check_common(objects, "hostpath")
    check(objects[("Deployment", "rel-ernie-serve-gateway")]["spec"]["replicas"] == 3, "hostpath: gateway replicas")
    check(not any(kind == "HorizontalPodAutoscaler" for kind, _ in objects), "hostpath: HPA rendered while disabled")
    check(("PodDisruptionBudget", "rel-ernie-serve-gateway") not in objects, "hostpath: gateway PDB while disabled")
    check(("PodDisruptionBudget", "rel-ernie-serve-worker") in objects, "hostpath: worker PDB missing")
    pod = objects[("Deployment", "rel-ernie-serve-worker")]["spec"]["template"]["spec"]
    check(pod["volumes"][0]["hostPath"]["path"] == "/var/lib/ernie/models", "hostpath: hostPath volume")
    check(pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H200"}, "hostpath: worker nodeSelector")
    check(pod["tolerations"][0]["key"] == "nvidia.com/gpu", "hostpath: worker tolerations")
    check(container(objects, "worker")["resources"]["requests"]["nvidia.com/gpu"] == 2, "hostpath: 2 GPUs")
    annotations = objects[("Deployment", "rel-ernie-serve-worker")]["spec"]["template"]["metadata"]["annotations"]
    check("prometheus.io/scrape" not in annotations, "hostpath: prometheus.io annotations while disabled")

    bad = render(helm, "bad-model-source.yaml", expect_failure=True)
    check(bad.returncode != 0 and "model.source must be pvc, hostPath or image" in bad.stderr,
          f"bad-model-source: expected a clear failure, got rc {bad.returncode}: {bad.stderr}")


def main():
    static_checks()
    helm = find_helm()
    if helm:
        helm_checks(helm)
    for failure in failures:
        print("FAIL:", failure)
    if failures:
        return 1
    if not helm:
        print("SKIPPED: no helm binary ($ERNIE_HELM, PATH, ~/.cache/ernie-serve/tools/helm/helm); static checks passed")
        return 77
    print("OK: static checks, helm lint and helm template over 3 values files (and one that must fail)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
