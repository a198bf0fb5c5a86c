"""Traffic splits, version labels and canary rollouts between a model's versions, under load from
HTTP and gRPC clients: a healthy version reaches 100% by itself, a failing or 3x slower one is
rolled back within one dwell period, and no request to the healthy versions is lost. With an
agreement guard, mirrored requests compare the two versions' answers: a version that answers
differently is rolled back though it neither fails nor slows down.

Every request sends x = 10: version V of `plus` answers 10 + V (version 5 answers like version 1,
within float rounding)."""
import subprocess
import threading
import time

import grpc
import numpy as np
import pytest
import requests
from onnx import TensorProto, helper, numpy_helper

from inferd_harness import Inferd, inferd_binary

X = 10.0
CONFIG = ('platform: "onnxruntime_onnx"\nmax_batch_size: 8\nversion_policy { all {} }\n'
          'parameters { key: "traffic_split" value: { string_value: "1:100" } }\n'
          'parameters { key: "version_labels" value: { string_value: "stable:1,canary:2" } }\n'
          'parameters { key: "rollback_retention_seconds" value: { string_value: "3" } }\n')


def make_model(nodes, initializers):
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def plus(constant):
    """y = x + constant: the answer tells which version served."""
    return make_model([helper.make_node("Add", ["x", "c"], ["y"])],
                      [numpy_helper.from_array(np.array([constant], np.float32), "c")])


def failing():
    """Loads and warms up (planning runs it on zeros), but fails on every real request: x = 10 is
    out of range as an index into its table of 4."""
    return make_model([helper.make_node("Cast", ["x"], ["i"], to=TensorProto.INT64),
                       helper.make_node("Gather", ["table", "i"], ["y"], axis=0)],
                      [numpy_helper.from_array(np.arange(4, dtype=np.float32), "table")])


def slow(constant, width=512, layers=16):
    """y = x + constant, after a stack of matmuls whose result is multiplied by 0: the same answers
    as plus(constant) at many times the cost."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Expand", ["x", "wide"], ["h0"])]
    initializers = [numpy_helper.from_array(np.array([1, width], np.int64), "wide"),
                    numpy_helper.from_array(np.array([constant], np.float32), "c"),
                    numpy_helper.from_array(np.zeros(1, np.float32), "zero")]
    for i in range(layers):
        initializers.append(numpy_helper.from_array(rng.standard_normal((width, width)).astype(np.float32) / width, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [f"h{i}", f"w{i}"], [f"h{i + 1}"]))
    nodes += [helper.make_node("ReduceMean", [f"h{layers}"], ["r"], axes=[1], keepdims=1),
              helper.make_node("Mul", ["r", "zero"], ["r0"]),
              helper.make_node("Add", ["x", "c"], ["s"]),
              helper.make_node("Add", ["s", "r0"], ["y"])]
    return make_model(nodes, initializers)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("rollout") / "repo"
    models = {1: plus(1.0), 2: plus(2.0), 3: failing(), 4: slow(4.0), 5: plus(1.0000001)}
    for version, model in models.items():
        (root / "plus" / str(version)).mkdir(parents=True)
        (root / "plus" / str(version) / "model.onnx").write_bytes(model)
    (root / "plus" / "config.pbtxt").write_text(CONFIG)
    server = Inferd(root, "--model-control-mode", "explicit", "--load-model", "plus")
    yield server
    server.stop()


def http_infer(server, request_id=None, version=None, timeout=10):
    body = {"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [X]}]}
    if request_id is not None:
        body["id"] = request_id
    path = f"/v2/models/plus/versions/{version}/infer" if version else "/v2/models/plus/infer"
    return requests.post(server.url + path, json=body, timeout=timeout)


def answer(response):
    response.raise_for_status()
    return response.json()["outputs"][0]["data"][0]


def traffic(server, body=None):
    if body is None:
        return requests.get(server.url + "/v2/models/plus/traffic", timeout=5)
    return requests.post(server.url + "/v2/models/plus/traffic", json=body, timeout=5)


def rollout(server, body=None):
    if body is None:
        return requests.get(server.url + "/v2/models/plus/rollout", timeout=5)
    return requests.post(server.url + "/v2/models/plus/rollout", json=body, timeout=5)


@pytest.fixture
def baseline(server):
    """Every test starts with version 1 taking all traffic and no rollout running."""
    rollout(server, {"action": "rollback"})
    response = traffic(server, {"split": {"1": 100}, "labels": {"stable": 1, "canary": 2}})
    assert response.status_code == 200, response.text
    return server


class Load:
    """HTTP and gRPC client threads sending requests that name no version, recording answers."""

    def __init__(self, server, grpc_stubs, http_threads=2, grpc_threads=1):
        self.server, self.pb = server, grpc_stubs[0]
        self.stub = grpc_stubs[1].GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_target))
        self.stop_event = threading.Event()
        self.answers, self.failures = [], []
        self.threads = [threading.Thread(target=self._run, args=(self._http,)) for _ in range(http_threads)]
        self.threads += [threading.Thread(target=self._run, args=(self._grpc,)) for _ in range(grpc_threads)]
        for thread in self.threads:
            thread.start()

    def _http(self):
        return answer(http_infer(self.server))

    def _grpc(self):
        request = self.pb.ModelInferRequest(model_name="plus")
        request.inputs.add(name="x", datatype="FP32", shape=[1, 1])
        request.raw_input_contents.append(np.full(1, X, np.float32).tobytes())
        response = self.stub.ModelInfer(request, timeout=10)
        return float(np.frombuffer(response.raw_output_contents[0], np.float32)[0])

    def _run(self, call):
        deadline = time.time() + 120
        while not self.stop_event.is_set() and time.time() < deadline:
            try:
                self.answers.append(call())
            except Exception as error:  # noqa: BLE001 - every failure counts
                self.failures.append(repr(error))

    def stop(self):
        self.stop_event.set()
        for thread in self.threads:
            thread.join()


def wait_for_state(server, states, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        status = rollout(server).json()
        if status["state"] in states:
            return status
        time.sleep(0.1)
    raise AssertionError(f"rollout did not reach {states}: {rollout(server).json()}")


def test_split_is_sticky_per_request_id_and_random_without_one(baseline):
    server = baseline
    assert traffic(server).json() == {"model": "plus", "split": {"1": 100}, "labels": {"stable": 1, "canary": 2}}
    assert {answer(http_infer(server)) for _ in range(10)} == {11.0}
    assert traffic(server, {"split": {"1": 50, "2": 50}}).json()["split"] == {"1": 50, "2": 50}
    by_id = {f"user-{i}": answer(http_infer(server, f"user-{i}")) for i in range(60)}
    assert set(by_id.values()) == {11.0, 12.0}
    for request_id, value in list(by_id.items())[:20]:
        assert answer(http_infer(server, request_id)) == value  # the same id, the same version
    anonymous = [answer(http_infer(server)) for _ in range(60)]
    assert 10 <= anonymous.count(12.0) <= 50
    assert answer(http_infer(server, version=1)) == 11.0  # a named version bypasses the split
    assert answer(http_infer(server, "user-0", version=2)) == 12.0
    # Moving to 100% keeps every id the canary had at 50%.
    traffic(server, {"split": {"2": 100}})
    assert {answer(http_infer(server, request_id)) for request_id, value in by_id.items() if value == 12.0} == {12.0}


def test_bad_traffic_requests_are_rejected_and_change_nothing(baseline):
    server = baseline
    for body, status in [({"split": {"9": 100}}, 400), ({"split": {"1": 0}}, 400), ({"split": {"x": 1}}, 400),
                         ({"labels": {"stable": 9}}, 400), ({"what": 1}, 400), ([1], 400)]:
        response = traffic(server, body)
        assert response.status_code == status, (body, response.text)
        assert "error" in response.json()
    assert requests.post(server.url + "/v2/models/plus/traffic", data="{", timeout=5).status_code == 400
    assert requests.get(server.url + "/v2/models/nope/traffic", timeout=5).status_code == 404
    assert requests.put(server.url + "/v2/models/plus/traffic", json={}, timeout=5).status_code == 405
    assert traffic(server).json()["split"] == {"1": 100}
    assert answer(http_infer(server)) == 11.0


def test_moving_a_label_is_an_atomic_switch_for_tf_serving_clients(baseline):
    server = baseline
    predict = lambda: requests.post(server.url + "/v1/models/plus/labels/stable:predict",  # noqa: E731
                                    json={"instances": [[X]]}, timeout=5).json()["predictions"][0][0]
    assert predict() == 11.0
    assert traffic(server, {"labels": {"stable": 2, "canary": 4}}).status_code == 200
    assert predict() == 12.0
    assert traffic(server).json()["split"] == {"1": 100}  # labels and the split are separate


def test_traffic_and_rollouts_over_grpc(baseline, lifecycle_stubs):
    pb, services = lifecycle_stubs
    stub = services.LifecycleStub(grpc.insecure_channel(baseline.grpc_target))
    assert dict(stub.GetTraffic(pb.TrafficRequest(model_name="plus")).split.weights) == {1: 100}
    response = stub.SetTraffic(pb.TrafficRequest(model_name="plus", split=pb.TrafficSplit(weights={1: 90, 2: 10})))
    assert dict(response.split.weights) == {1: 90, 2: 10}
    assert dict(response.labels.labels) == {"stable": 1, "canary": 2}  # not in the request: unchanged
    with pytest.raises(grpc.RpcError) as error:
        stub.SetTraffic(pb.TrafficRequest(model_name="plus", split=pb.TrafficSplit(weights={9: 10})))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as error:
        stub.GetTraffic(pb.TrafficRequest(model_name="nope"))
    assert error.value.code() == grpc.StatusCode.NOT_FOUND
    started = stub.StartRollout(pb.StartRolloutRequest(
        model_name="plus", plan=pb.RolloutPlan(version=2, baseline=1, steps=[10, 100], dwell_seconds=60)))
    assert (started.state, started.percent, started.plan.retention_seconds) == ("running", 10, 3)
    with pytest.raises(grpc.RpcError) as error:  # the rollout drives the split now
        stub.SetTraffic(pb.TrafficRequest(model_name="plus", split=pb.TrafficSplit(weights={1: 100})))
    assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    rolled_back = stub.RollbackRollout(pb.RolloutRequest(model_name="plus"))
    assert (rolled_back.state, rolled_back.percent) == ("rolled_back", 0)
    guarded = stub.StartRollout(pb.StartRolloutRequest(
        model_name="plus", plan=pb.RolloutPlan(version=5, baseline=1, steps=[10, 100], dwell_seconds=60,
                                               agreement=pb.AgreementGuard(min=0.9, compare="argmax"))))
    assert (guarded.plan.agreement.min, guarded.plan.agreement.mirror_percent) == (0.9, 10)
    assert guarded.plan.agreement.compare == "argmax" and guarded.HasField("mirrored")
    stub.RollbackRollout(pb.RolloutRequest(model_name="plus"))
    with pytest.raises(grpc.RpcError) as error:
        stub.StartRollout(pb.StartRolloutRequest(model_name="plus", plan=pb.RolloutPlan(
            version=5, agreement=pb.AgreementGuard(min=0.9, compare="cosine"))))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert dict(stub.GetTraffic(pb.TrafficRequest(model_name="plus")).split.weights) == {1: 100}
    with pytest.raises(grpc.RpcError) as error:
        stub.StartRollout(pb.StartRolloutRequest(model_name="plus", plan=pb.RolloutPlan(version=2, steps=[5, 20])))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_bad_rollout_plans_are_rejected(baseline):
    for body in [{"version": 9}, {"version": 2, "steps": [50, 20, 100]}, {"version": 2, "baseline": 2},
                 {"version": 2, "dwell_seconds": 0}, {"version": 2, "speed": 1}, {"action": "promote"},
                 {"version": 2, "agreement": {"min": 1.5}}, {"version": 2, "agreement": {"mirror_percent": 10}}]:
        response = rollout(baseline, body)
        assert response.status_code in (400, 404), (body, response.text)
        assert "error" in response.json()
    assert requests.get(baseline.url + "/v2/models/nope/rollout", timeout=5).status_code == 404


def test_a_failing_version_is_rolled_back_within_one_dwell(baseline, grpc_stubs):
    server = baseline
    load = Load(server, grpc_stubs)
    try:
        time.sleep(0.5)
        started = time.time()
        response = rollout(server, {"version": 3, "baseline": 1, "steps": [30, 100], "dwell_seconds": 10,
                                    "min_requests": 5, "max_error_rate": 0.05})
        assert response.status_code == 200, response.text
        status = wait_for_state(server, {"rolled_back", "completed"}, timeout=10)
        elapsed = time.time() - started
        time.sleep(0.5)
    finally:
        load.stop()
    assert status["state"] == "rolled_back", status
    assert elapsed < 10  # within the first dwell
    assert "error rate" in status["reason"], status
    assert traffic(server).json()["split"] == {"1": 100}
    assert set(load.answers) == {11.0}  # every answer came from the baseline; the failures were the canary's
    assert load.failures, "the canary's errors reached its clients"
    assert server.metric("inferd_rollout_rollbacks_total", model="plus", version="3", cause="error_rate") == 1
    assert server.metric("inferd_rollout_state", model="plus", version="3", state="rolled_back") == 1
    assert server.metric("inferd_rollout_traffic_percent", model="plus", version="3") == 0
    assert server.metric("inferd_requests_total", model="plus", version="3", outcome="failed") >= 5


def test_a_slow_version_is_rolled_back_on_its_p99(baseline, grpc_stubs):
    server = baseline
    load = Load(server, grpc_stubs)
    try:
        time.sleep(0.5)
        started = time.time()
        response = rollout(server, {"version": 4, "baseline": 1, "steps": [40, 100], "dwell_seconds": 10,
                                    "min_requests": 20, "max_p99_ratio": 3})
        assert response.status_code == 200, response.text
        status = wait_for_state(server, {"rolled_back", "completed"}, timeout=10)
        elapsed = time.time() - started
    finally:
        load.stop()
    assert status["state"] == "rolled_back", status
    assert elapsed < 10
    assert "p99" in status["reason"], status
    assert status["observed"]["p99_ms"] > 3 * status["baseline_observed"]["p99_ms"] > 0, status
    assert load.failures == []  # slow, not wrong: nothing failed
    assert set(load.answers) <= {11.0, 14.0}
    assert traffic(server).json()["split"] == {"1": 100}


def test_a_healthy_version_reaches_all_traffic_then_the_old_one_is_retired(baseline, grpc_stubs):
    server = baseline
    load = Load(server, grpc_stubs)
    try:
        response = rollout(server, {"version": 2, "steps": [20, 50, 100], "dwell_seconds": 1, "min_requests": 5,
                                    "max_p99_ratio": 20, "max_error_rate": 0})
        assert response.status_code == 200, response.text
        assert response.json()["baseline"] == 1  # the busiest version
        status = wait_for_state(server, {"rolled_back", "completed"}, timeout=30)
        assert status["state"] == "completed", status
        time.sleep(0.3)
    finally:
        load.stop()
    assert load.failures == []
    assert set(load.answers) == {11.0, 12.0}
    assert traffic(server).json()["split"] == {"2": 100}
    assert answer(http_infer(server, version=1)) == 11.0  # retained for an instant rollback...
    deadline = time.time() + 15
    while time.time() < deadline and http_infer(server, version=1).status_code == 200:
        time.sleep(0.2)
    assert http_infer(server, version=1).status_code == 404  # ...then unloaded after its retention
    assert rollout(server).json()["baseline_retired"] is True
    assert answer(http_infer(server)) == 12.0
    assert rollout(server, {"action": "rollback"}).status_code == 400
    # Bring version 1 back for the tests after this one: an explicit load puts it back.
    assert requests.post(server.url + "/v2/repository/models/plus/load", json={}, timeout=60).status_code == 200


def test_a_version_that_answers_differently_is_rolled_back_on_agreement(baseline, grpc_stubs):
    server = baseline
    load = Load(server, grpc_stubs)
    try:
        time.sleep(0.5)
        started = time.time()
        response = rollout(server, {"version": 2, "baseline": 1, "steps": [20, 100], "dwell_seconds": 10,
                                    "min_requests": 10, "max_p99_ratio": 50,
                                    "agreement": {"min": 0.9, "mirror_percent": 50}})
        assert response.status_code == 200, response.text
        assert response.json()["agreement"] == {"min": 0.9, "mirror_percent": 50, "compare": "close",
                                                "tolerance": 1e-4}
        status = wait_for_state(server, {"rolled_back", "completed"}, timeout=10)
        elapsed = time.time() - started
    finally:
        load.stop()
    assert status["state"] == "rolled_back", status
    assert elapsed < 10  # within the first dwell
    assert "agreement" in status["reason"], status
    assert status["mirrored"]["compared"] >= 10 and status["mirrored"]["agreed"] == 0, status
    assert load.failures == []  # a mirrored answer never reaches the client
    assert set(load.answers) <= {11.0, 12.0}
    assert traffic(server).json()["split"] == {"1": 100}
    assert server.metric("inferd_rollout_rollbacks_total", model="plus", version="2", cause="agreement") == 1
    assert server.metric("inferd_rollout_mirrored_total", model="plus", version="2", outcome="disagreed") >= 10
    # Mirroring stopped with the rollout: the counters stand still.
    disagreed = server.metric("inferd_rollout_mirrored_total", model="plus", version="2", outcome="disagreed")
    for _ in range(20):
        answer(http_infer(server))
    assert server.metric("inferd_rollout_mirrored_total", model="plus", version="2", outcome="disagreed") == disagreed


def test_a_version_that_answers_alike_passes_the_agreement_guard(baseline, grpc_stubs):
    server = baseline
    load = Load(server, grpc_stubs)
    try:
        response = rollout(server, {"version": 5, "baseline": 1, "steps": [50, 100], "dwell_seconds": 1,
                                    "min_requests": 5, "max_p99_ratio": 50, "retention_seconds": 600,
                                    "agreement": {"min": 0.99, "mirror_percent": 50}})
        assert response.status_code == 200, response.text
        seen = []
        deadline = time.time() + 30
        while time.time() < deadline:
            status = rollout(server).json()
            seen.append(status)
            if status["state"] != "running":
                break
            time.sleep(0.1)
    finally:
        load.stop()
    assert status["state"] == "completed", status
    assert load.failures == []
    # Each step was judged on mirrored pairs, every one of which agreed.
    judged = [s["mirrored"] for s in seen if s["state"] == "running" and s["mirrored"]["compared"] > 0]
    assert judged and all(m["agreed"] == m["compared"] for m in judged), judged
    assert server.metric("inferd_rollout_mirrored_total", model="plus", version="5", outcome="agreed") >= 10
    assert server.metric("inferd_rollout_mirrored_total", model="plus", version="5", outcome="disagreed") == 0
    # Requests mirrored at 100% went to the retained baseline; a rollback within retention is instant.
    assert rollout(server, {"action": "rollback"}).json()["state"] == "rolled_back"
    assert traffic(server).json()["split"] == {"1": 100}


def cli(*args, timeout=60):
    return subprocess.run([inferd_binary(), *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_traffic_and_rollout_from_the_command_line(baseline, grpc_stubs, protocol):
    server = baseline
    target = ["-u", server.grpc_target if protocol == "grpc" else f"127.0.0.1:{server.http_port}", "-i", protocol]
    shown = cli("traffic", "plus", *target)
    assert shown.returncode == 0, shown.stderr
    assert "split  1:100" in shown.stdout and "stable=1" in shown.stdout
    changed = cli("traffic", "plus", "--split", "1:70,2:30", "--label", "stable=2", "--label", "canary=4", *target)
    assert changed.returncode == 0, changed.stderr
    assert "split  1:70,2:30" in changed.stdout and "canary=4,stable=2" in changed.stdout
    refused = cli("traffic", "plus", "--split", "1:70,9:30", *target)
    assert refused.returncode == 1 and "version 9" in refused.stderr
    assert cli("traffic", "plus", "--split", "1:100", *target).returncode == 0
    load = Load(server, grpc_stubs, http_threads=1, grpc_threads=1)
    try:
        watched = cli("rollout", "plus", "--version", "2", "--steps", "50,100", "--dwell", "0.5", "--min-requests", "3",
                      "--max-p99-ratio", "50", "--retention", "600", "--watch", *target)
    finally:
        load.stop()
    assert watched.returncode == 0, watched.stdout + watched.stderr
    assert "running, step 1 of 2 (50%)" in watched.stdout
    assert "completed" in watched.stdout and "stays loaded" in watched.stdout
    assert load.failures == []
    status = cli("rollout", "plus", *target)
    assert status.returncode == 0 and "completed" in status.stdout
    rolled_back = cli("rollout", "plus", "--rollback", *target)  # within the retention: instant
    assert rolled_back.returncode == 0, rolled_back.stderr
    assert "rolled_back" in rolled_back.stdout and "rolled back on request" in rolled_back.stdout
    assert answer(http_infer(server)) == 11.0
    load = Load(server, grpc_stubs, http_threads=1, grpc_threads=1)
    try:
        guarded = cli("rollout", "plus", "--version", "2", "--steps", "50,100", "--dwell", "30", "--min-requests", "3",
                      "--max-p99-ratio", "50", "--min-agreement", "0.9", "--mirror-percent", "100", "--watch", *target)
    finally:
        load.stop()
    assert guarded.returncode == 3, guarded.stdout + guarded.stderr  # a watched rollout that rolled back
    assert "mirrored 100%" in guarded.stdout and "rolled back: agreement" in guarded.stdout, guarded.stdout
    bad = cli("rollout", "plus", "--version", "2", "--steps", "20,50", *target)
    assert bad.returncode == 1 and "steps" in bad.stderr
