"""ONNX models served on inferd's runtime, and `inferd run`: config completion from the model,
answers checked against numpy, and every load error reported while the other models keep serving."""
import concurrent.futures
import json
import subprocess
import textwrap

import numpy as np
import onnx
import requests
from onnx import TensorProto, helper, numpy_helper

from inferd_harness import inferd_binary

RNG = np.random.default_rng(3)
W = RNG.standard_normal((5, 8)).astype(np.float32)
B = RNG.standard_normal(5).astype(np.float32)


def linear_relu_model(batch_dim="N"):
    """y = relu(x @ W.T + B), x [N, 8] -> y [N, 5]."""
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "W", "B"], ["h"], name="fc", transB=1),
         helper.make_node("Relu", ["h"], ["y"], name="act")],
        "linear_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch_dim, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch_dim, 5])],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "B")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def expected(x):
    return np.maximum(x @ W.T + B, 0)


def add_model(root, name, model_bytes, config=None, version=1):
    folder = root / name / str(version)
    folder.mkdir(parents=True)
    (folder / "model.onnx").write_bytes(model_bytes)
    if config is not None:
        (root / name / "config.pbtxt").write_text(textwrap.dedent(config))


def infer(server, model, x, name="x"):
    return server.infer(model, [{"name": name, "shape": list(x.shape), "datatype": "FP32",
                                 "data": x.flatten().tolist()}])


def test_onnx_models_load_with_completed_configs(fresh_server, tmp_path):
    add_model(tmp_path, "no_config", linear_relu_model().SerializeToString())
    add_model(tmp_path, "partial", linear_relu_model().SerializeToString(), """
        platform: "onnxruntime_onnx"
        max_batch_size: 16
        instance_group [ { count: 2 } ]
        """)
    add_model(tmp_path, "fixed_batch", linear_relu_model(batch_dim=3).SerializeToString())
    server = fresh_server(repo=tmp_path)

    meta = requests.get(server.url + "/v2/models/no_config").json()
    assert meta["platform"] == "onnxruntime_onnx"
    assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 8]}]
    assert meta["outputs"] == [{"name": "y", "datatype": "FP32", "shape": [-1, 5]}]
    config = requests.get(server.url + "/v2/models/no_config/config").json()
    assert config["max_batch_size"] == 4 and "dynamic_batching" in config
    assert requests.get(server.url + "/v2/models/partial/config").json()["max_batch_size"] == 16
    # A fixed first dim is not a batch dim: no batching, exact dims.
    fixed = requests.get(server.url + "/v2/models/fixed_batch/config").json()
    assert fixed["max_batch_size"] == 0 and fixed["input"][0]["dims"] == ["3", "8"]

    for model, rows in (("no_config", 2), ("partial", 16), ("fixed_batch", 3)):
        x = RNG.standard_normal((rows, 8)).astype(np.float32)
        response = infer(server, model, x)
        assert response.status_code == 200, response.text
        out = response.json()["outputs"][0]
        assert out["shape"] == [rows, 5]
        np.testing.assert_allclose(np.array(out["data"]).reshape(rows, 5), expected(x), rtol=1e-5, atol=1e-5)


def test_concurrent_requests_are_batched_and_each_gets_its_answer(fresh_server, tmp_path):
    add_model(tmp_path, "linear", linear_relu_model().SerializeToString(), """
        max_batch_size: 8
        dynamic_batching { max_queue_delay_microseconds: 20000 }
        """)
    server = fresh_server(repo=tmp_path)
    inputs = [RNG.standard_normal((1, 8)).astype(np.float32) for _ in range(24)]
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        responses = list(pool.map(lambda x: infer(server, "linear", x), inputs))
    for x, response in zip(inputs, responses):
        assert response.status_code == 200
        np.testing.assert_allclose(np.array(response.json()["outputs"][0]["data"]).reshape(1, 5), expected(x),
                                   rtol=1e-5, atol=1e-5)
    stats = server.stats("linear")[0]
    assert stats["inference_count"] == 24 and stats["execution_count"] < 24


def test_bad_onnx_models_are_reported_and_the_rest_serve(fresh_server, tmp_path):
    add_model(tmp_path, "good", linear_relu_model().SerializeToString())
    add_model(tmp_path, "corrupt", b"\x08\x07this is not a protobuf\xff\xff")
    unsupported = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["h"], name="ok"),
         helper.make_node("Bernoulli", ["h"], ["y"], name="coin"),
         helper.make_node("StringNormalizer", ["h"], ["z"], name="text")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4])]),
        opset_imports=[helper.make_opsetid("", 13)])
    add_model(tmp_path, "unsupported", unsupported.SerializeToString())
    add_model(tmp_path, "wrong_input", linear_relu_model().SerializeToString(), """
        backend: "onnxruntime"
        max_batch_size: 4
        input [ { name: "not_x", data_type: TYPE_FP32, dims: [ 8 ] } ]
        """)
    add_model(tmp_path, "wrong_type", linear_relu_model().SerializeToString(), """
        backend: "onnxruntime"
        max_batch_size: 4
        input [ { name: "x", data_type: TYPE_INT32, dims: [ 8 ] } ]
        """)
    add_model(tmp_path, "bad_tune", linear_relu_model().SerializeToString(), """
        backend: "onnxruntime"
        parameters { key: "tune" value: { string_value: "sometimes" } }
        """)
    add_model(tmp_path, "bad_precision", linear_relu_model().SerializeToString(), """
        backend: "onnxruntime"
        parameters { key: "precision" value: { string_value: "fp16" } }
        """)
    add_model(tmp_path, "bf16", linear_relu_model().SerializeToString(), """
        backend: "onnxruntime"
        parameters { key: "precision" value: { string_value: "bf16" } }
        """)
    server = fresh_server(repo=tmp_path)
    index = {e["name"]: e for e in requests.post(server.url + "/v2/repository/index").json()}
    assert index["good"]["state"] == "READY"
    reasons = {"corrupt": "not an ONNX model", "unsupported": "Bernoulli (node 'coin')",
               "wrong_input": "'not_x' is not an input", "wrong_type": "TYPE_INT32",
               "bad_tune": "tune mode must be off, fast or full", "bad_precision": "precision must be fp32 or bf16"}
    for name, text in reasons.items():
        assert index[name]["state"] == "UNAVAILABLE", name
        assert text in index[name]["reason"], index[name]
    assert "StringNormalizer (node 'text')" in index["unsupported"]["reason"]  # every unsupported op, at once
    x = RNG.standard_normal((1, 8)).astype(np.float32)
    assert infer(server, "good", x).status_code == 200
    # bf16 runs its MatMul on bf16 inputs and weights where the CPU has native bf16 (runtime/precision.h),
    # elsewhere in fp32: either way within bf16's rounding (8 bits of mantissa) of the fp32 answer.
    assert index["bf16"]["state"] == "READY"
    answer = infer(server, "bf16", x)
    assert answer.status_code == 200, answer.text
    np.testing.assert_allclose(np.array(answer.json()["outputs"][0]["data"]).reshape(1, 5), expected(x), rtol=1e-2, atol=1e-2)


def test_tuning_choices_persist_next_to_the_model(fresh_server, tmp_path):
    """With tuning on (the default), the first executions time the kernels' candidates and the
    choices land in model.onnx.tuning; `tune: off` writes nothing. Answers are right either way."""
    for name, tune in (("tuned", "full"), ("untuned", "off")):
        add_model(tmp_path, name, linear_relu_model().SerializeToString(), f"""
            backend: "onnxruntime"
            max_batch_size: 8
            parameters {{ key: "tune" value: {{ string_value: "{tune}" }} }}
            """)
    server = fresh_server(repo=tmp_path)
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    for name in ("tuned", "untuned"):
        response = infer(server, name, x)
        assert response.status_code == 200, response.text
        y = np.array(response.json()["outputs"][0]["data"], dtype=np.float32).reshape(3, 5)
        np.testing.assert_allclose(y, expected(x), rtol=1e-4, atol=1e-4)
    cache = tmp_path / "tuned" / "1" / "model.onnx.tuning"
    assert cache.exists()
    lines = cache.read_text().splitlines()
    assert lines[0].startswith("# inferd tuning cache") and any(line.startswith("Gemm ") for line in lines[1:])
    assert not (tmp_path / "untuned" / "1" / "model.onnx.tuning").exists()


def test_bad_inputs_get_clear_errors(server):
    wrong_width = infer(server, "mlp_onnx", np.zeros((1, 15), np.float32), name="features")
    assert wrong_width.status_code == 400 and "features" in wrong_width.json()["error"]
    too_big = infer(server, "mlp_onnx", np.zeros((5, 16), np.float32), name="features")
    assert too_big.status_code == 400 and "max_batch_size" in too_big.json()["error"]
    ok = infer(server, "mlp_onnx", np.zeros((2, 16), np.float32), name="features")
    assert ok.status_code == 200
    np.testing.assert_allclose(np.array(ok.json()["outputs"][0]["data"]).reshape(2, 4).sum(axis=1), [1, 1], rtol=1e-5)


def test_inferd_run_writes_outputs_and_reports(tmp_path):
    model = tmp_path / "model.onnx"
    model.write_bytes(linear_relu_model().SerializeToString())
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out_dir = tmp_path / "out"
    result = subprocess.run([inferd_binary(), "run", str(model), "--input", f"x={tmp_path / 'x.npy'}",
                             "--output-dir", str(out_dir), "--iterations", "5", "--json"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["batch"] == 3 and report["iterations"] == 5 and report["p50_ms"] > 0
    assert report["outputs"] == [{"name": "y", "datatype": "FP32", "shape": [3, 5]}]
    np.testing.assert_allclose(np.load(out_dir / "y.npy"), expected(x), rtol=1e-5, atol=1e-5)

    dump = subprocess.run([inferd_binary(), "run", str(model), "--batch", "2", "--dump-graph"],
                          capture_output=True, text=True, timeout=60)
    assert dump.returncode == 0 and "Gemm" in dump.stdout and "onednn" in dump.stdout, dump.stdout

    bad = subprocess.run([inferd_binary(), "run", str(model), "--input", f"nope={tmp_path / 'x.npy'}"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "no input 'nope'" in bad.stderr
