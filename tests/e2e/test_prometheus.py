"""A real Prometheus (Debian's `prometheus`) scraping inferd every second, with
deploy/prometheus/inferd-rules.yml loaded: under known traffic, the dashboard's request-rate,
histogram_quantile and batch-efficiency queries return what the clients and inferd's own
statistics say, and the rule file loads and evaluates."""
import concurrent.futures
import json
import shutil
import subprocess
import time
import urllib.parse

import pytest
import requests

from inferd_harness import REPO_ROOT, Inferd, free_port, write_repository

BATCHED = """
    backend: "identity"
    max_batch_size: 8
    input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 1 ] } ]
    output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 1 ] } ]
    dynamic_batching { max_queue_delay_microseconds: 5000 }
    parameters { key: "cost" value: { string_value: "fixed_us=2000" } }
    """


@pytest.fixture
def stack(tmp_path):
    server = Inferd(write_repository(tmp_path / "repo", {"batched": (BATCHED, [1])}))
    port = free_port()
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(REPO_ROOT / "deploy" / "prometheus" / "inferd-rules.yml")],
        "scrape_configs": [{"job_name": "inferd",
                            "static_configs": [{"targets": [server.metrics_url.split("/")[2]]}]}],
    }
    (tmp_path / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
    binary = shutil.which("prometheus")
    assert binary, "prometheus missing: scripts/setup.sh installs Debian's prometheus"
    log = open(tmp_path / "prometheus.log", "w")
    process = subprocess.Popen([binary, f"--config.file={tmp_path / 'prometheus.yml'}",
                                f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
                               stdout=log, stderr=subprocess.STDOUT)
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
    log.close()
    server.kill()


def query(url, expr):
    response = requests.get(url + "/api/v1/query?query=" + urllib.parse.quote(expr), timeout=10)
    assert response.status_code == 200, response.text
    result = response.json()["data"]["result"]
    assert result, f"no data for {expr}"
    return float(result[0]["value"][1])


def test_dashboard_queries_return_what_the_traffic_was(stack):
    server, url = stack
    body = {"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}]}
    latencies = []
    end = time.time() + 14

    def client():
        while time.time() < end:
            start = time.time()
            assert requests.post(f"{server.url}/v2/models/batched/infer", json=body, timeout=10).status_code == 200
            latencies.append(time.time() - start)

    started = time.time()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for future in [pool.submit(client) for _ in range(8)]:
            future.result()
    client_rate = len(latencies) / (time.time() - started)
    time.sleep(2.5)  # two more scrapes: the last requests are in

    # Over the last 10 s of traffic (it ended 2.5 s ago): the rate the clients saw, within 35%.
    rate = query(url, 'sum(rate(inferd_requests_total{model="batched",outcome!="invalid"}[10s] offset 3s))')
    assert client_rate * 0.65 < rate < client_rate * 1.35, (rate, client_rate)
    # p99 from the buckets: the 2 ms executions plus queueing, and under what the clients measured.
    p99 = query(url, 'histogram_quantile(0.99, sum by (le) (rate(inferd_request_duration_seconds_bucket{model="batched"}[10s] offset 3s)))')
    client_p99 = sorted(latencies)[int(len(latencies) * 0.99)]
    assert 0.002 <= p99 <= client_p99 * 1.5 + 0.005, (p99, client_p99)
    # Batch efficiency as the dashboard computes it, against inferd's statistics over the whole run.
    efficiency = query(url, 'sum(increase(inferd_inferences_total{model="batched"}[1m])) / '
                            'sum(increase(inferd_executions_total{model="batched"}[1m])) / '
                            'max(inferd_model_max_batch_size{model="batched"})')
    stats = server.stats("batched")[0]
    expected = stats["inference_count"] / stats["execution_count"] / 8
    assert efficiency == pytest.approx(expected, rel=0.1), (efficiency, stats)
    assert efficiency > 1 / 8  # 8 clients against 2 ms executions: batches form

    # The rule file loaded, and its recording rules evaluate (the group's interval is 15 s).
    rules = requests.get(url + "/api/v1/rules", timeout=5).json()["data"]["groups"]
    assert {g["name"] for g in rules} == {"inferd-recording", "inferd-anomalies"}
    assert all(r["health"] != "err" for g in rules for r in g["rules"]), rules
