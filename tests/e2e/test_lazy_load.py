"""load: lazy: the model is ready at once and takes its memory (weights, plans) at its first
execution; model_warmup makes it load up front as an eager one; a bad value fails the load."""
import numpy as np
import requests
from onnx import TensorProto, helper, numpy_helper

from inferd_harness import Inferd

WIDTH = 2048  # a 2048 x 2048 FP32 weight: 16 MB, plain to see in the resident set


def matmul_model():
    weight = np.full((WIDTH, WIDTH), 1.0 / WIDTH, np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "big",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", WIDTH])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", WIDTH])],
                              [numpy_helper.from_array(weight, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def add_model(root, name, extra):
    (root / name / "1").mkdir(parents=True)
    (root / name / "1" / "model.onnx").write_bytes(matmul_model())
    (root / name / "config.pbtxt").write_text('platform: "onnxruntime_onnx"\nmax_batch_size: 2\n' + extra)


def resident_mb(server):
    with open(f"/proc/{server.process.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def infer(server, model):
    x = np.ones((1, WIDTH), np.float32)
    response = server.infer(model, [{"name": "x", "shape": [1, WIDTH], "datatype": "FP32", "data": x.ravel().tolist()}],
                            timeout=120)
    assert response.status_code == 200, response.text
    assert abs(response.json()["outputs"][0]["data"][0] - 1.0) < 1e-4


def test_a_lazy_model_is_ready_at_once_and_loads_at_its_first_request(tmp_path):
    root = tmp_path / "repo"
    add_model(root, "lazy", 'parameters { key: "load" value: { string_value: "lazy" } }\n')
    server = Inferd(root)
    try:
        assert requests.get(server.url + "/v2/models/lazy/ready", timeout=5).status_code == 200
        assert "loaded lazily" not in server.logs()
        before = resident_mb(server)
        infer(server, "lazy")
        assert "loaded lazily at its first execution" in server.logs()
        assert resident_mb(server) - before > 12  # the 16 MB weight (and its prepared copy) came now
        entry = requests.post(server.url + "/v2/repository/index", json={}, timeout=5).json()[0]
        assert entry["first_request_seconds"] > entry["warmup_seconds"]  # the first request paid for the load
        infer(server, "lazy")
        assert server.logs().count("loaded lazily") == 1
    finally:
        server.stop()


def test_warmup_loads_a_lazy_model_up_front_and_a_bad_mode_fails_the_load(tmp_path):
    root = tmp_path / "repo"
    warmup = ('model_warmup [ { name: "w" batch_size: 1 inputs { key: "x" value: '
              f'{{ data_type: TYPE_FP32 dims: [ {WIDTH} ] zero_data: true }} }} }} ]\n')
    add_model(root, "warmed", 'parameters { key: "load" value: { string_value: "lazy" } }\n' + warmup)
    add_model(root, "bad", 'parameters { key: "load" value: { string_value: "later" } }\n')
    server = Inferd(root, "--strict-readiness", "false")
    try:
        assert "model 'warmed': loaded lazily" in server.logs()  # the warmup sample asked for it
        index = {e["name"]: e for e in requests.post(server.url + "/v2/repository/index", json={}, timeout=5).json()}
        assert index["warmed"]["state"] == "READY"
        assert index["bad"]["state"] == "UNAVAILABLE" and "parameters[load]" in index["bad"]["reason"]
        infer(server, "warmed")
    finally:
        server.stop()
