"""--model-control-mode poll: the server follows the repository. Under continuous load from HTTP and
gRPC clients, a version copied in, a model file replaced in place and a broken version are each
handled without a failed request; new and removed models are loaded and unloaded."""
import shutil
import threading
import time

import grpc
import numpy as np
import pytest
import requests
from onnx import TensorProto, helper

from inferd_harness import Inferd, plus_model

POLL_ARGS = ("--model-control-mode", "poll", "--repository-poll-secs", "1")




CONFIG = 'platform: "onnxruntime_onnx"\nmax_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 500 }\n'


def write_version(model_dir, version, constant, staging):
    """Writes the version elsewhere, then copies it in file by file, as `cp -r` would."""
    source = staging / f"{model_dir.name}-{version}-{constant}"
    source.mkdir(parents=True)
    (source / "model.onnx").write_bytes(plus_model(constant))
    shutil.copytree(source, model_dir / str(version), dirs_exist_ok=True)


def unsupported_model():
    """Parses as ONNX (the config completes from it) but fails to load: no kernel for its op."""
    graph = helper.make_graph(
        [helper.make_node("NoSuchOp", ["x"], ["y"])], "unsupported",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def http_answer(server):
    response = server.infer("plus", [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [0]}], timeout=10)
    response.raise_for_status()
    return response.json()["outputs"][0]["data"][0]


class Load:
    """Client threads sending requests without a version until stopped, recording every answer."""

    def __init__(self, server, grpc_stubs, http_threads=2, grpc_threads=2):
        self.server, self.pb = server, grpc_stubs[0]
        self.stub = grpc_stubs[1].GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_target))
        self.stop_event = threading.Event()
        self.answers = []   # per thread: the values seen, in order
        self.failures = []
        self.threads = [threading.Thread(target=self._run, args=(self._http,)) for _ in range(http_threads)]
        self.threads += [threading.Thread(target=self._run, args=(self._grpc,)) for _ in range(grpc_threads)]
        for thread in self.threads:
            thread.start()

    def _http(self):
        return http_answer(self.server)

    def _grpc(self):
        request = self.pb.ModelInferRequest(model_name="plus")
        request.inputs.add(name="x", datatype="FP32", shape=[1, 1])
        request.raw_input_contents.append(np.zeros(1, np.float32).tobytes())
        response = self.stub.ModelInfer(request, timeout=10)
        return float(np.frombuffer(response.raw_output_contents[0], np.float32)[0])

    def _run(self, call):
        seen = []
        self.answers.append(seen)
        deadline = time.time() + 120  # bounded even if the test forgets to stop it
        while not self.stop_event.is_set() and time.time() < deadline:
            try:
                seen.append(call())
            except Exception as error:  # noqa: BLE001 - every failure counts, whatever its kind
                self.failures.append(repr(error))

    def latest(self):
        return [seen[-1] for seen in self.answers if seen]

    def wait_for(self, value, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.latest() and all(v == value for v in self.latest()):
                return
            time.sleep(0.1)
        raise AssertionError(f"answers did not become {value}: {self.latest()}")

    def stop(self):
        self.stop_event.set()
        for thread in self.threads:
            thread.join()

    def assert_nothing_failed_and_answers_moved_forward(self, values):
        """No request failed, and each client saw the versions in the order they came (never an
        old one again), only these values, and more than a few answers."""
        assert self.failures == []
        for seen in self.answers:
            assert len(seen) >= 2, seen  # it was sending throughout (slowly under sanitizers)
            assert seen == sorted(seen), seen
            assert set(seen) <= set(values), seen


def load_failure_reasons(server, name):
    index = requests.post(server.url + "/v2/repository/index", json={}, timeout=5).json()
    return [entry["reason"] for entry in index if entry["name"] == name and entry.get("reason")]


def wait_until(predicate, timeout=30, what=""):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    (root / "plus").mkdir(parents=True)
    (root / "plus" / "config.pbtxt").write_text(CONFIG)
    write_version(root / "plus", 1, 1.0, tmp_path / "staging")
    return root


def test_new_and_replaced_versions_swap_in_under_load_without_a_failed_request(repo, tmp_path, grpc_stubs):
    server = Inferd(repo, *POLL_ARGS)
    try:
        assert http_answer(server) == 1.0
        load = Load(server, grpc_stubs)
        try:
            write_version(repo / "plus", 2, 2.0, tmp_path / "staging")  # a new version folder
            load.wait_for(2.0)
            time.sleep(1.5)  # the old version drains while load goes on
            (repo / "plus" / "2" / "model.onnx").write_bytes(plus_model(3.0))  # replaced in place
            load.wait_for(3.0)
            time.sleep(0.5)
        finally:
            load.stop()
        load.assert_nothing_failed_and_answers_moved_forward({1.0, 2.0, 3.0})
        # version_policy latest{1}: version 1 was unloaded once 2 served.
        assert requests.get(server.url + "/v2/models/plus/versions/1/ready", timeout=5).status_code != 200
        assert "repository poll: model 'plus' changed in versions 2, loading" in server.logs()
        assert server.stop() == 0, server.logs()
    finally:
        server.kill()


def test_a_broken_version_or_config_keeps_the_old_one_serving(repo, tmp_path, grpc_stubs):
    server = Inferd(repo, *POLL_ARGS)
    try:
        load = Load(server, grpc_stubs, http_threads=1, grpc_threads=1)
        try:
            # A version that fails to load must not retire the one it was to replace.
            (repo / "plus" / "3").mkdir()
            (repo / "plus" / "3" / "model.onnx").write_bytes(unsupported_model())
            wait_until(lambda: any("NoSuchOp" in r for r in load_failure_reasons(server, "plus")),
                       what="version 3's failure in the index")
            shutil.rmtree(repo / "plus" / "3")
            (repo / "plus" / "2").mkdir()
            (repo / "plus" / "2" / "model.onnx").write_bytes(b"not an onnx file")
            wait_until(lambda: any("not an ONNX model" in r for r in load_failure_reasons(server, "plus")),
                       what="version 2's failure in the index")
            assert server.metric("inferd_model_load_failures_total", model="plus") >= 2
            (repo / "plus" / "config.pbtxt").write_text("max_batch_size: [ oops\n")
            wait_until(lambda: server.metric("inferd_model_load_failures_total", model="plus") >= 3,
                       what="the broken config's failure")
            time.sleep(0.5)
        finally:
            load.stop()
        assert load.failures == []
        assert set(load.latest()) == {1.0}
        # The model still serves what it served, so readiness holds (a bad push must not take
        # the replica out of service).
        assert requests.get(server.url + "/v2/health/ready", timeout=5).status_code == 200
        assert requests.get(server.url + "/v2/models/plus/ready", timeout=5).status_code == 200
        # Fixed: the next polls load it.
        (repo / "plus" / "config.pbtxt").write_text(CONFIG)
        (repo / "plus" / "2" / "model.onnx").write_bytes(plus_model(2.0))
        wait_until(lambda: http_answer(server) == 2.0, what="the fixed version 2")
        assert server.stop() == 0, server.logs()
    finally:
        server.kill()


def test_models_that_appear_and_disappear_are_loaded_and_unloaded(repo, tmp_path):
    server = Inferd(repo, *POLL_ARGS)
    try:
        late = repo / "late"
        late.mkdir()
        (late / "config.pbtxt").write_text(CONFIG)
        write_version(late, 1, 5.0, tmp_path / "staging")
        wait_until(lambda: requests.get(server.url + "/v2/models/late/ready", timeout=5).status_code == 200,
                   what="model 'late' to load")
        response = server.infer("late", [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [1]}])
        assert response.json()["outputs"][0]["data"] == [6.0]
        shutil.rmtree(late)
        wait_until(lambda: requests.get(server.url + "/v2/models/late", timeout=5).status_code == 404,
                   what="model 'late' to unload")
        assert http_answer(server) == 1.0  # the other model never noticed
        assert requests.get(server.url + "/v2/health/ready", timeout=5).status_code == 200
        assert server.stop() == 0, server.logs()
    finally:
        server.kill()


def test_explicit_load_api_is_refused_in_poll_mode(repo):
    server = Inferd(repo, *POLL_ARGS)
    try:
        response = requests.post(server.url + "/v2/repository/models/plus/load", json={}, timeout=5)
        assert 400 <= response.status_code < 500 and "error" in response.json()
        assert server.stop() == 0, server.logs()
    finally:
        server.kill()
