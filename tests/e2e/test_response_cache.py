"""Triton's response cache: `response_cache { enable: true }` in a model's config and --cache-size on
the server. Repeated inputs are answered from memory (not executed), counted in the statistics and
metrics; a reload of the same version never answers with the old load's outputs; the byte budget
holds through evictions."""
import base64
import json
import re

import grpc
import numpy as np
import pytest
import requests

from inferd_harness import Inferd, plus_model




CONFIG = 'name: "plus"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\nresponse_cache { enable: true }\n'


@pytest.fixture(scope="module")
def cached(tmp_path_factory):
    repo = tmp_path_factory.mktemp("cache_repo")
    for name, config in (("plus", CONFIG), ("plus_uncached", CONFIG.replace("plus", "plus_uncached").replace(
            "response_cache { enable: true }\n", ""))):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(config)
        (repo / name / "1" / "model.onnx").write_bytes(plus_model(1))
    process = Inferd(repo, "--cache-size", "64KiB", "--model-control-mode", "explicit",
                     "--load-model", "plus", "--load-model", "plus_uncached")
    yield process
    assert process.stop() == 0, process.logs()


def answer(server, x, model="plus"):
    response = server.infer(model, [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [x]}])
    assert response.status_code == 200, response.text
    return response.json()["outputs"][0]["data"][0]


def stats(server, model="plus"):
    return requests.get(f"{server.url}/v2/models/{model}/stats").json()["model_stats"][0]


def metric(server, name, labels=""):
    text = requests.get(server.metrics_url).text
    found = re.search(rf"^{name}{re.escape(labels)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else None


def test_repeated_inputs_are_answered_from_the_cache(cached, grpc_stubs):
    before = stats(cached)
    assert answer(cached, 0) == 1   # miss: executed
    assert answer(cached, 0) == 1   # hit
    assert answer(cached, 5) == 6   # another input: miss
    pb, services = grpc_stubs[0], grpc_stubs[1]
    stub = services.GRPCInferenceServiceStub(grpc.insecure_channel(cached.grpc_target))
    request = pb.ModelInferRequest(model_name="plus")
    request.inputs.add(name="x", datatype="FP32", shape=[1, 1])
    request.raw_input_contents.append(np.zeros(1, np.float32).tobytes())
    reply = stub.ModelInfer(request)  # the same input over gRPC: a hit too
    assert np.frombuffer(reply.raw_output_contents[0], np.float32)[0] == 1
    after = stats(cached)
    delta = lambda key: after["inference_stats"][key]["count"] - before["inference_stats"][key]["count"]
    assert delta("cache_hit") == 2 and delta("cache_miss") == 2
    assert delta("success") == 4                                        # hits are successes...
    assert after["inference_count"] - before["inference_count"] == 2    # ...but were not executed
    grpc_stats = stub.ModelStatistics(pb.ModelStatisticsRequest(name="plus")).model_stats[0]
    assert grpc_stats.inference_stats.cache_hit.count == after["inference_stats"]["cache_hit"]["count"]
    labels = '{model="plus",version="1"}'
    assert metric(cached, "inferd_cache_hits_total", labels) >= 2
    assert metric(cached, "inferd_cache_misses_total", labels) >= 2
    # A model that does not enable the cache is not cached, and has no cache series.
    assert answer(cached, 0, "plus_uncached") == 1 and answer(cached, 0, "plus_uncached") == 1
    uncached = stats(cached, "plus_uncached")
    assert uncached["inference_count"] == 2 and uncached["inference_stats"]["cache_hit"]["count"] == 0
    assert metric(cached, "inferd_cache_hits_total", '{model="plus_uncached",version="1"}') is None


def test_a_reload_of_the_same_version_never_answers_from_the_old_load(cached):
    assert answer(cached, 0) == 1
    assert answer(cached, 0) == 1  # cached now
    config = {"name": "plus", "platform": "onnxruntime_onnx", "max_batch_size": 8, "response_cache": {"enable": True}}
    reload = requests.post(f"{cached.url}/v2/repository/models/plus/load", json={"parameters": {
        "config": json.dumps(config), "file:1/model.onnx": base64.b64encode(plus_model(100)).decode()}})
    assert reload.status_code == 200, reload.text
    assert answer(cached, 0) == 100  # version 1 again, another load: its own answers only
    assert answer(cached, 0) == 100
    assert stats(cached)["inference_stats"]["cache_hit"]["count"] == 1


def test_the_byte_budget_holds_through_evictions(cached):
    entries_before = metric(cached, "inferd_cache_entries")
    constant = answer(cached, 0)  # 1, or 100 after the reload test
    for x in range(600):
        assert answer(cached, 1000 + x) == 1000 + x + constant
    assert metric(cached, "inferd_cache_evictions_total") > 0
    assert metric(cached, "inferd_cache_bytes") <= 64 * 1024
    assert 0 < metric(cached, "inferd_cache_entries") < 600
    assert entries_before is not None
    # The most recent answers are still there; the first ones were evicted (least recently used).
    hits = stats(cached)["inference_stats"]["cache_hit"]["count"]
    assert answer(cached, 1000 + 599) == 1599 + constant
    assert stats(cached)["inference_stats"]["cache_hit"]["count"] == hits + 1
    assert answer(cached, 1000) == 1000 + constant
    assert stats(cached)["inference_stats"]["cache_hit"]["count"] == hits + 1
