"""deploy/kubernetes without a cluster: every manifest validates against the Kubernetes schemas
(deploy/kubernetes/validate, npm kubernetes-models) and agrees with the others; a broken one is
caught; the Deployment's flags are ones `inferd serve` knows; and the Prometheus Adapter's queries,
run against a real Prometheus scraping a real inferd, give the HPA the request rate the clients
sent."""
import json
import re
import shutil
import subprocess
import threading
import time
import urllib.parse

import pytest
import requests
import yaml

from inferd_harness import REPO_ROOT, Inferd, free_port, inferd_binary, scalar_identity, write_repository

MANIFESTS = REPO_ROOT / "deploy" / "kubernetes"
VALIDATOR = MANIFESTS / "validate"


def validate(directory):
    node = shutil.which("node")
    assert node, "node missing: scripts/setup.sh installs nodejs"
    if not (VALIDATOR / "node_modules" / "kubernetes-models").is_dir():
        # scripts/test-all.sh runs `npm ci` there and warns when the registry could not be reached.
        pytest.skip("deploy/kubernetes/validate/node_modules is missing: `npm ci` there could not fetch "
                    "kubernetes-models (no npm registry?)")
    return subprocess.run([node, str(VALIDATOR / "validate.mjs"), str(directory)], capture_output=True, text=True,
                          timeout=120)


def test_every_manifest_validates_and_they_agree():
    result = validate(MANIFESTS)
    assert result.returncode == 0, result.stdout + result.stderr
    for kind in ("Deployment/inferd", "Service/inferd", "Service/inferd-grpc", "PodDisruptionBudget/inferd",
                 "HorizontalPodAutoscaler/inferd", "ServiceMonitor/inferd", "ConfigMap/prometheus-adapter-inferd"):
        assert kind in result.stdout, result.stdout


def test_a_broken_manifest_is_caught(tmp_path):
    broken = tmp_path / "kubernetes"
    shutil.copytree(MANIFESTS, broken, ignore=shutil.ignore_patterns("validate"))
    deployment = (broken / "deployment.yaml").read_text()
    (broken / "deployment.yaml").write_text(deployment.replace("terminationGracePeriodSeconds: 40",
                                                               "terminationGracePeriodSeconds: 10"))
    hpa = (broken / "hpa.yaml").read_text()
    (broken / "hpa.yaml").write_text(hpa.replace("averageUtilization: 60", "averageUtilisation: 60")
                                        .replace("name: requests_per_second", "name: request_rate"))
    service = (broken / "service.yaml").read_text()
    (broken / "service.yaml").write_text(service.replace("port: 8000", 'port: "eight thousand"', 1))
    result = validate(broken)
    assert result.returncode == 1, result.stdout
    errors = result.stderr
    assert "terminationGracePeriodSeconds 10 < preStop 5 s + --exit-timeout-secs 30" in errors, errors
    assert "target of type Utilization has no averageUtilization" in errors, errors
    assert "External metric request_rate is served by no adapter rule" in errors, errors
    assert re.search(r"Service/inferd: .*port must be integer", errors), errors


def deployment():
    return yaml.safe_load((MANIFESTS / "deployment.yaml").read_text())


def test_the_deployments_flags_are_ones_inferd_serve_knows():
    container = deployment()["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][0] == "serve"
    help_text = subprocess.run([inferd_binary(), "serve", "--help"], capture_output=True, text=True, timeout=30).stdout
    for argument in container["args"][1:]:
        flag = argument.split("=")[0]
        assert re.search(rf"^\s+{re.escape(flag)}\b", help_text, re.M), f"{flag} is not a flag of inferd serve"
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    args = dict(argument.split("=", 1) for argument in container["args"][1:])
    assert ports == {"http": int(args["--http-port"]), "grpc": int(args["--grpc-port"]),
                     "metrics": int(args["--metrics-port"])}


def render(query, series, matchers):
    """The adapter's template, as it fills it for an External metric request."""
    return query.replace("<<.Series>>", series).replace("<<.LabelMatchers>>", matchers)


def prometheus_query(url, expr):
    response = requests.get(url + "/api/v1/query?query=" + urllib.parse.quote(expr), timeout=10)
    assert response.status_code == 200, (expr, response.text)
    return response.json()["data"]["result"]


@pytest.fixture
def scraped_server(tmp_path):
    """inferd and a Prometheus scraping it every second, with the labels the ServiceMonitor's
    relabelling gives a pod (namespace, pod)."""
    server = Inferd(write_repository(tmp_path / "repo", {"identity": (scalar_identity(0, max_batch_size=4), [1])}))
    port = free_port()
    config = {
        "global": {"scrape_interval": "1s"},
        "scrape_configs": [{"job_name": "inferd", "static_configs": [{
            "targets": [server.metrics_url.split("/")[2]], "labels": {"namespace": "inferd", "pod": "inferd-0"}}]}],
    }
    (tmp_path / "prometheus.yml").write_text(json.dumps(config))
    binary = shutil.which("prometheus")
    assert binary, "prometheus missing: scripts/setup.sh installs Debian's prometheus"
    with open(tmp_path / "prometheus.log", "w") as log:
        process = subprocess.Popen([binary, f"--config.file={tmp_path / 'prometheus.yml'}",
                                    f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                    f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if requests.get(url + "/-/ready", timeout=1).status_code == 200:
                break
        except requests.ConnectionError:
            pass
        time.sleep(0.2)
    else:
        raise AssertionError("prometheus did not become ready:\n" + (tmp_path / "prometheus.log").read_text())
    yield server, url
    process.terminate()
    process.wait(timeout=30)
    server.kill()


def test_the_adapters_queries_give_the_hpa_the_request_rate(scraped_server):
    server, url = scraped_server
    configmap = yaml.safe_load((MANIFESTS / "prometheus-adapter" / "configmap.yaml").read_text())
    rules = {rule["name"]["as"]: rule for rule in yaml.safe_load(configmap["data"]["config.yaml"])["externalRules"]}
    assert set(rules) == {"requests_per_second", "predicted_requests_per_second"}
    body = {"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}]}
    infer_url = f"{server.url}/v2/models/identity/infer"
    assert requests.post(infer_url, json=body, timeout=10).status_code == 200
    time.sleep(3)  # the counter's series is scraped before the traffic: rate() sees all of it

    # 40 requests a second for 12 s, paced, on a thread; the forecast is read while they arrive.
    sent = [1]

    def paced_traffic():
        start = time.time()
        while time.time() - start < 12:
            assert requests.post(infer_url, json=body, timeout=10).status_code == 200
            sent[0] += 1
            time.sleep(max(0.0, start + (sent[0] - 1) / 40 - time.time()))

    traffic = threading.Thread(target=paced_traffic)
    traffic.start()
    time.sleep(10)
    matchers = 'namespace="inferd",model="identity"'
    predicted_series = requests.get(url + "/api/v1/series", timeout=10, params={
        "match[]": rules["predicted_requests_per_second"]["seriesQuery"]}).json()["data"]
    assert any(s.get("model") == "identity" for s in predicted_series), predicted_series
    predicted = prometheus_query(url, render(rules["predicted_requests_per_second"]["metricsQuery"],
                                             "inferd_predicted_requests_per_second", matchers))
    traffic.join()
    assert len(predicted) == 1, predicted
    # The forecast follows the 40/s the clients send (it sees the same arrivals, a second at a time).
    assert 20 < float(predicted[0]["value"][1]) < 80, predicted
    sent = sent[0]
    time.sleep(2.5)

    # The per-pod rule, as the adapter fills it for the pods of a `type: Pods` metric.
    pod_rule = yaml.safe_load(configmap["data"]["config.yaml"])["rules"][0]
    assert pod_rule["name"]["as"] == "queue_depth"
    depth = prometheus_query(url, pod_rule["metricsQuery"].replace("<<.GroupBy>>", "pod").replace(
        "<<.Series>>", "inferd_queue_depth").replace("<<.LabelMatchers>>", 'namespace="inferd",pod=~"inferd-0"'))
    assert [r["metric"] for r in depth] == [{"pod": "inferd-0"}] and float(depth[0]["value"][1]) >= 0, depth

    # What the adapter's discovery finds: the seriesQuery matches inferd's series for the model.
    series = requests.get(url + "/api/v1/series", params={"match[]": rules["requests_per_second"]["seriesQuery"]},
                          timeout=10).json()["data"]
    assert any(s.get("model") == "identity" and s.get("namespace") == "inferd" for s in series), series

    # What the HPA's External metric (selector model=identity, in namespace inferd) reads.
    result = prometheus_query(url, render(rules["requests_per_second"]["metricsQuery"], "inferd_requests_total", matchers))
    assert len(result) == 1, result
    # rate over 1 m, and every request of the run is in that minute: the value is sent / 60.
    assert float(result[0]["value"][1]) == pytest.approx(sent / 60, rel=0.2), (result, sent)

