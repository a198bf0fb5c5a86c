"""/metrics as a whole: promtool (Debian's prometheus package) accepts the exposition of a server
with a batching model, an ensemble and a router that have all served; the families inferd declares
are exactly the ones docs/METRICS.md lists; the Prometheus rules and the Grafana dashboard's
queries parse (promtool) and read only exported metrics; a request that does not match its model counts as
outcome="invalid"; client connections show per listener."""
import json
import re
import shutil
import socket
import subprocess
import time

import grpc
import pytest
import requests

from inferd_harness import REPO_ROOT, Inferd, scalar_identity, write_repository

IDENTITY4 = """
    backend: "identity"
    max_batch_size: 8
    input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 4 ] } ]
    output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 4 ] } ]
    dynamic_batching { }
    """

TWO_STEPS = """
    platform: "ensemble"
    max_batch_size: 8
    input [ { name: "A", data_type: TYPE_FP32, dims: [ 4 ] } ]
    output [ { name: "B", data_type: TYPE_FP32, dims: [ 4 ] } ]
    ensemble_scheduling { step [
      { model_name: "first" model_version: -1
        input_map { key: "INPUT0" value: "A" } output_map { key: "OUTPUT0" value: "mid" } },
      { model_name: "second" model_version: -1
        input_map { key: "INPUT0" value: "mid" } output_map { key: "OUTPUT0" value: "B" } }
    ] }
    """

ROUTER = """
    platform: "router"
    max_batch_size: 8
    input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 4 ] } ]
    output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 4 ] } ]
    parameters { key: "route.1" value { string_value: "param.tier == 'big' -> model second" } }
    parameters { key: "route.default" value { string_value: "model first" } }
    """


def four(name="INPUT0"):
    return [{"name": name, "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = write_repository(tmp_path_factory.mktemp("repo"), {
        "first": (IDENTITY4, [1]), "second": (IDENTITY4, [1]), "pair": (TWO_STEPS, [1]),
        "pick": (ROUTER, [1]), "scalar": (scalar_identity(), [1])})
    inferd = Inferd(root)
    yield inferd
    inferd.kill()


def serve_a_little_of_everything(server):
    assert server.infer("pair", four("A")).status_code == 200
    assert server.infer("pick", four()).status_code == 200
    assert server.infer("pick", four(), parameters={"tier": "big"}).status_code == 200
    assert server.infer("first", four()).status_code == 200


def declared_families(text):
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}


def documented_families():
    text = (REPO_ROOT / "docs" / "METRICS.md").read_text()
    return set(re.findall(r"^\| `(inferd_[a-z_]+)` \|", text, flags=re.MULTILINE))


def test_promtool_accepts_the_exposition_and_docs_list_every_family(server):
    serve_a_little_of_everything(server)
    text = requests.get(server.metrics_url, timeout=5).text
    for series in ("inferd_ensemble_step_requests_total", "inferd_router_target_requests_total",
                   "inferd_batch_size_bucket", "inferd_open_connections"):
        assert re.search(rf"^{series}{{", text, flags=re.MULTILINE), f"{series} has no series"
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: scripts/setup.sh installs Debian's prometheus package"
    check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    # promtool prints lint problems (naming, units, missing help) and exits 1 on any.
    assert check.returncode == 0, check.stdout + check.stderr
    assert (check.stdout + check.stderr).strip() == ""
    declared, documented = declared_families(text), documented_families()
    assert declared - documented == set(), "exported but not in docs/METRICS.md"
    assert documented - declared == set(), "in docs/METRICS.md but not exported"


def test_the_prometheus_rules_read_only_exported_metrics(server):
    declared = declared_families(requests.get(server.metrics_url, timeout=5).text)
    rules = (REPO_ROOT / "deploy" / "prometheus" / "inferd-rules.yml").read_text()
    # Raw metric names, not the recorded series' names (level:metric:operation).
    raw = re.findall(r"(?<![:\w])(inferd_[a-z_]+)(?![:\w])", rules)
    used = {re.sub(r"_(bucket|sum|count)$", "", name) for name in raw}
    assert used and used - declared == set()


def dashboard_queries():
    """Every PromQL query of deploy/grafana/inferd.json (panels, rows' panels, the model variable)."""
    dashboard = json.loads((REPO_ROOT / "deploy" / "grafana" / "inferd.json").read_text())
    panels = [p for top in dashboard["panels"] for p in [top, *top.get("panels", [])]]
    queries = []
    for panel in panels:
        if panel["type"] == "row":
            continue
        assert panel["targets"], f"panel {panel['title']!r} has no query"
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"])
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}"
        queries += [t["expr"] for t in panel["targets"]]
    for variable in dashboard["templating"]["list"]:
        queries.append(re.fullmatch(r"label_values\((.*), \w+\)", variable["query"]["query"]).group(1))
    return queries


def test_the_grafana_dashboard_parses_as_promql_over_exported_metrics(server, tmp_path):
    declared = declared_families(requests.get(server.metrics_url, timeout=5).text)
    queries = dashboard_queries()
    assert len(queries) >= 15
    raw = {name for query in queries for name in re.findall(r"(?<![:\w$])(inferd_[a-z_]+)(?![:\w])", query)}
    assert raw and {re.sub(r"_(bucket|sum|count)$", "", name) for name in raw} - declared == set()
    # promtool parses each query as a recording rule, Grafana's variables filled in as it would.
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query{i}", "expr": q.replace("$__rate_interval", "1m").replace("$model", ".*")}
        for i, q in enumerate(queries)]}]}
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(json.dumps(rules))  # JSON is YAML
    check = subprocess.run([shutil.which("promtool"), "check", "rules", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_request_that_does_not_match_its_model_counts_as_invalid(server):
    before = server.metric("inferd_requests_total", model="scalar", outcome="invalid")
    wrong_shape = [{"name": "INPUT0", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}]
    response = server.infer("scalar", wrong_shape)
    assert response.status_code == 400 and "error" in response.json()
    wrong_type = [{"name": "INPUT0", "shape": [1, 1], "datatype": "INT32", "data": [1]}]
    assert server.infer("scalar", wrong_type).status_code == 400
    assert server.metric("inferd_requests_total", model="scalar", outcome="invalid") == before + 2
    assert server.metric("inferd_requests_total", model="scalar", outcome="failed") == 0
    # An ensemble refuses a bad request before any step: counted on the ensemble.
    assert server.infer("pair", wrong_shape).status_code == 400
    assert server.metric("inferd_requests_total", model="pair", outcome="invalid") >= 1
    assert server.infer("scalar", [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [1]}]).status_code == 200


def wait_until(predicate, timeout=5):
    deadline = time.time() + timeout
    while not predicate() and time.time() < deadline:
        time.sleep(0.05)
    return predicate()


def test_open_connections_are_counted_per_listener(server):
    def http_connections():
        return server.metric("inferd_open_connections", listener="http")

    port = int(server.url.rsplit(":", 1)[1])
    grpc_before = server.metric("inferd_open_connections", listener="grpc")
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
    channel = grpc.insecure_channel(server.grpc_target)
    try:
        grpc.channel_ready_future(channel).result(timeout=10)
        assert wait_until(lambda: http_connections() >= 3)
        assert wait_until(lambda: server.metric("inferd_open_connections", listener="grpc") >= grpc_before + 1)
        # The scrape itself is a connection to the metrics listener.
        assert server.metric("inferd_open_connections", listener="metrics") >= 1
    finally:
        channel.close()
        for connection in idle:
            connection.close()
    assert wait_until(lambda: http_connections() < 3)
    assert wait_until(lambda: server.metric("inferd_open_connections", listener="grpc") <= grpc_before)
