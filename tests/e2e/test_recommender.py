"""The 10-model recommender of examples/recommender (ONNX models made by its script) served as one
ensemble: its answer equals the 10 models called one after another by the client, and its
`tabular` step hashes ids and standardises features as a Python reimplementation does."""
import subprocess
import sys
import time

import numpy as np
import pytest
import requests

from inferd_harness import REPO_ROOT, Inferd

pytest.importorskip("torch")


def fnv1a64(text):
    value = 0xCBF29CE484222325
    for byte in text.encode():
        value = ((value ^ byte) * 0x100000001B3) % 2**64
    return value


@pytest.fixture(scope="module")
def recommender(tmp_path_factory):
    repo = tmp_path_factory.mktemp("recommender")
    subprocess.run([sys.executable, str(REPO_ROOT / "examples" / "recommender" / "make_repository.py"), str(repo)],
                   check=True, capture_output=True, timeout=300)
    server = Inferd(repo)
    deadline = time.time() + 300
    while requests.get(server.url + "/v2/models/recommender/ready", timeout=5).status_code != 200:
        assert time.time() < deadline, server.logs()
        time.sleep(0.2)
    yield server
    assert server.stop() == 0


def tensor(name, array):
    datatype = {np.dtype(np.int64): "INT64", np.dtype(np.float32): "FP32"}[array.dtype]
    return {"name": name, "shape": list(array.shape), "datatype": datatype, "data": array.reshape(-1).tolist()}


def call(server, model, arrays):
    response = server.infer(model, [tensor(name, value) for name, value in arrays.items()])
    assert response.status_code == 200, response.text
    return {o["name"]: np.array(o["data"], dtype=np.float32 if o["datatype"] == "FP32" else np.int64).reshape(o["shape"])
            for o in response.json()["outputs"]}


def test_the_ensemble_answers_what_the_chained_models_answer(recommender):
    rng = np.random.default_rng(11)
    inputs = {"user_id": rng.integers(0, 10**12, (2, 1), dtype=np.int64),
              "item_ids": rng.integers(-10**12, 10**12, (2, 100), dtype=np.int64),
              "user_dense": rng.random((2, 8), dtype=np.float32)}
    features = call(recommender, "rec_features", inputs)
    expected_buckets = [[fnv1a64(str(int(i))) % 10000 for i in row] for row in inputs["item_ids"]]
    assert features["item_buckets"].tolist() == expected_buckets
    assert features["user_bucket"].tolist() == [[fnv1a64(str(int(u))) % 10000] for u in inputs["user_id"][:, 0]]
    assert np.allclose(features["dense"], (inputs["user_dense"] - 0.5) / 0.29, atol=1e-6)

    user = call(recommender, "rec_user_tower", {"user_bucket": features["user_bucket"], "dense": features["dense"]})
    items = call(recommender, "rec_item_tower", {"item_buckets": features["item_buckets"]})
    context = call(recommender, "rec_context", {"dense": features["dense"]})
    ctr = {f"ctr_{size}": call(recommender, f"rec_ctr_{size}", {"user_vec": user["user_vec"], "item_vecs": items["item_vecs"],
                                                              "context": context["context"]})["ctr"]
           for size in ("s", "m", "l", "xl")}
    score = call(recommender, "rec_reranker", ctr)["score"]
    top = call(recommender, "rec_topk", {"score": score})

    answer = call(recommender, "recommender", inputs)
    assert answer["TOP_ITEMS"].shape == (2, 10)
    assert answer["TOP_ITEMS"].tolist() == top["TOP_ITEMS"].tolist()
    assert np.allclose(answer["TOP_SCORES"], top["TOP_SCORES"], atol=1e-6)
    assert answer["TOP_ITEMS"].tolist() == np.argsort(-score, axis=1, kind="stable")[:, :10].tolist()
    steps = requests.get(recommender.url + "/v2/models/recommender/stats", timeout=5).json()["model_stats"][0]
    assert len(steps["ensemble_steps"]) == 10 and all(s["success_count"] == 1 for s in steps["ensemble_steps"])
