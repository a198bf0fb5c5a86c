"""Batch sizes prepared at load (instances/planned_batches.h): an ONNX model is tuned and planned
for its planned batch sizes before it is ready, so no request pays for that; every batch size
gives each row the answer it gets alone; and the runtime's memory does not grow with the number of
batch sizes it has run."""
import json
import subprocess

import numpy as np
import onnx
import pytest
import requests
from onnx import TensorProto, helper, numpy_helper

from inferd_harness import Inferd, built_with_sanitizers, inferd_binary

MAX_BATCH = 8


def conv_model(channels=8, size=12):
    """x [N, C, S, S] -> Conv 3x3 + Relu -> Conv 3x3 + Relu -> GlobalAveragePool -> [N, C]."""
    rng = np.random.default_rng(7)
    w1 = (rng.standard_normal((channels, channels, 3, 3)) * 0.2).astype(np.float32)
    w2 = (rng.standard_normal((channels, channels, 3, 3)) * 0.2).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c1"], ["a1"]),
         helper.make_node("Conv", ["a1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c2"], ["a2"]),
         helper.make_node("GlobalAveragePool", ["a2"], ["pool"]),
         helper.make_node("Flatten", ["pool"], ["y"])],
        "convs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", channels, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", channels])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def add_model(root, name, planned=None):
    (root / name / "1").mkdir(parents=True)
    (root / name / "1" / "model.onnx").write_bytes(conv_model())
    config = f'platform: "onnxruntime_onnx"\nmax_batch_size: {MAX_BATCH}\n'
    if planned is not None:
        config += f'parameters {{ key: "planned_batch_sizes" value: {{ string_value: "{planned}" }} }}\n'
    (root / name / "config.pbtxt").write_text(config)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("planned_repo")
    add_model(root, "default")                  # every size up to 8
    add_model(root, "planned", planned="8,4,2,1")
    add_model(root, "lazy", planned="none")     # prepared by the first request of each size
    add_model(root, "broken", planned="0,9")    # not a list of sizes in [1, 8]
    inferd = Inferd(root, "--threads", "2")
    yield inferd
    inferd.kill()


def infer(server, model, x):
    response = server.infer(model, [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                     "data": x.flatten().tolist()}])
    assert response.status_code == 200, response.text
    out = response.json()["outputs"][0]
    return np.array(out["data"], dtype=np.float32).reshape(out["shape"])


def test_model_is_ready_only_after_its_batch_sizes_are_prepared(server):
    assert requests.get(server.url + "/v2/models/planned/ready").status_code == 200
    assert requests.get(server.url + "/v2/models/default/ready").status_code == 200
    assert "model 'default': prepared batch sizes 8,7,6,5,4,3,2,1" in server.logs()
    assert "model 'planned': prepared batch sizes 8,4,2,1" in server.logs()
    assert "model 'lazy': prepared batch sizes" not in server.logs()


def test_every_batch_size_gives_each_row_its_answer_alone_and_prepares_nothing(server):
    rng = np.random.default_rng(11)
    rows = rng.standard_normal((MAX_BATCH, 8, 12, 12)).astype(np.float32)
    alone = [infer(server, "planned", rows[i:i + 1])[0] for i in range(MAX_BATCH)]
    # 3, 5, 6, 7 are not planned: they run as planned parts (split, or padded with zero rows).
    for batch in range(1, MAX_BATCH + 1):
        together = infer(server, "planned", rows[:batch])
        assert together.shape == (batch, 8)
        for i in range(batch):
            np.testing.assert_allclose(together[i], alone[i], rtol=1e-4, atol=1e-5, err_msg=f"batch {batch} row {i}")
    assert server.metric("inferd_shape_preparations_total", model="planned") == 0
    for batch in range(1, MAX_BATCH + 1):
        infer(server, "default", rows[:batch])
    assert server.metric("inferd_shape_preparations_total", model="default") == 0


def test_without_planned_sizes_each_new_batch_size_is_prepared_by_a_request(server):
    x = np.ones((MAX_BATCH, 8, 12, 12), dtype=np.float32)
    for batch in (1, 2, 3, 3, 2):
        infer(server, "lazy", x[:batch])
    assert server.metric("inferd_shape_preparations_total", model="lazy") == 3


def test_malformed_planned_sizes_fail_that_model_only_with_the_reason(server):
    assert requests.get(server.url + "/v2/models/broken/ready").status_code != 200
    index = requests.post(server.url + "/v2/repository/index", json={}).json()
    reasons = [entry.get("reason", "") for entry in index if entry["name"] == "broken"]
    assert any("planned_batch_sizes" in reason for reason in reasons), index
    assert requests.get(server.url + "/v2/models/planned/ready").status_code == 200


def run_json(model_path, *args):
    result = subprocess.run([inferd_binary(), "run", str(model_path), "--iterations", "1", "--warmup", "0",
                             "--threads", "2", "--json", *args], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.skipif(built_with_sanitizers(), reason="ASan's quarantine holds freed memory: RSS is not the program's")
def test_runtime_memory_does_not_grow_with_the_batch_sizes_it_has_run(tmp_path):
    # Large activations (a 32x64x64 image is 512 KB), so that buffers kept per batch size would
    # show: 1..15 before 16 add up to 8.5x the buffers of batch 16 alone.
    model = tmp_path / "model.onnx"
    model.write_bytes(conv_model(channels=32, size=64))
    alone = run_json(model, "--batch", "16")
    after_others = run_json(model, "--batch", "16", "--before-batches", "1-15")
    assert after_others["rss_mb"] <= 1.3 * alone["rss_mb"], (alone, after_others)
    assert after_others["peak_rss_mb"] <= 1.3 * alone["peak_rss_mb"], (alone, after_others)
    # By default inferd run keeps one shape set: the other sizes were prepared and forgotten.
    assert (after_others["shape_sets_kept"], after_others["shape_preparations"]) == (1, 16), after_others
    assert after_others["rss_mb"] <= 1.1 * alone["rss_mb"], (alone, after_others)


def test_runtime_keeps_the_shape_sets_it_is_told_to(tmp_path):
    model = tmp_path / "model.onnx"
    model.write_bytes(conv_model())
    kept = run_json(model, "--batch", "4", "--before-batches", "1-3,1-3", "--keep-shapes", "4")
    assert (kept["shape_sets_kept"], kept["shape_preparations"]) == (4, 4), kept
    taking_turns = run_json(model, "--batch", "4", "--before-batches", "1-3,1-3", "--keep-shapes", "2")
    assert (taking_turns["shape_sets_kept"], taking_turns["shape_preparations"]) == (2, 7), taking_turns


def test_run_rejects_a_malformed_batch_list(tmp_path):
    model = tmp_path / "model.onnx"
    model.write_bytes(conv_model())
    result = subprocess.run([inferd_binary(), "run", str(model), "--before-batches", "1-x"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "--before-batches" in result.stderr
