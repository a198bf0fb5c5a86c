"""Drift (metrics/drift_monitor.h) end to end: a model's reference from its first requests or from
.npy files in its folder; traffic like the reference raises nothing; shifting one input feature
raises PSI and KS drift alerts on that feature only, at GET /v2/models/M/drift, GET /v2/alerts and
in /metrics; an output's class histogram drifts when the answers change class; errors are clear."""
import time

import numpy as np
import pytest
import requests

from inferd_harness import Inferd, write_repository

TABULAR = """
    backend: "identity"
    max_batch_size: 8
    input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 2 ] } ]
    output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 2 ] } ]
    parameters { key: "drift" value { string_value: "features=INPUT0,continuous=OUTPUT0,reference_rows=400,window=200" } }
    """

CLASSES = """
    backend: "identity"
    max_batch_size: 8
    input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 3 ] } ]
    output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 3 ] } ]
    parameters { key: "drift" value { string_value: "classes=OUTPUT0,reference=reference,window=40" } }
    """

PLAIN = """
    backend: "identity"
    max_batch_size: 8
    input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 1 ] } ]
    output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 1 ] } ]
    """

BROKEN = PLAIN + """
    parameters { key: "drift" value { string_value: "features=NOPE" } }
    """


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = write_repository(tmp_path_factory.mktemp("repo"), {
        "tabular": (TABULAR, [1]), "classes": (CLASSES, [1]), "plain": (PLAIN, [1]), "broken": (BROKEN, [1])})
    # The reference of `classes`: classes 0 and 1 evenly, never 2.
    (root / "classes" / "reference").mkdir()
    np.save(root / "classes" / "reference" / "OUTPUT0.npy", np.eye(3, dtype=np.float32)[[0, 1] * 50])
    inferd = Inferd(root)
    yield inferd
    inferd.kill()


def send(server, model, rows):
    for start in range(0, len(rows), 8):
        batch = np.asarray(rows[start:start + 8], dtype=np.float32)
        response = requests.post(f"{server.url}/v2/models/{model}/infer", timeout=10, json={
            "inputs": [{"name": "INPUT0", "shape": list(batch.shape), "datatype": "FP32", "data": batch.ravel().tolist()}]})
        assert response.status_code == 200, response.text


def drift(server, model):
    response = requests.get(f"{server.url}/v2/models/{model}/drift", timeout=5)
    assert response.status_code == 200, response.text
    [version] = response.json()["versions"]
    return version


def scored(server, model, rows_expected):
    """The report once the once-a-second evaluation has scored a full window of `rows_expected`."""
    deadline = time.time() + 10
    while time.time() < deadline:
        report = drift(server, model)
        if report["window_rows"] == rows_expected and report["features"]:
            time.sleep(1.2)  # one more tick: the scores are of this window
            return {(f["tensor"], f["feature"], f["method"]): f for f in drift(server, model)["features"]}
        time.sleep(0.2)
    raise AssertionError(f"never scored: {drift(server, model)}")


def test_a_shifted_feature_raises_psi_and_ks_alerts_on_it_alone(server):
    generator = np.random.default_rng(3)
    send(server, "tabular", generator.normal(size=(400, 2)))
    report = drift(server, "tabular")
    assert report["reference"] == {"source": "first_requests", "rows": 400, "complete": True}
    send(server, "tabular", generator.normal(size=(200, 2)))
    same = scored(server, "tabular", 200)
    assert len(same) == 4  # INPUT0 [0] [1] psi, OUTPUT0 [0] [1] ks
    # KS's threshold is its critical value for 400 and 200 values at alpha 0.001, above 0.1.
    assert same[("OUTPUT0", "[0]", "ks")]["threshold"] == pytest.approx(1.9495 * (600 / 80000) ** 0.5, rel=1e-3)
    assert not any(f["alert"] for f in same.values()), same

    shifted = generator.normal(size=(200, 2))
    shifted[:, 0] += 1.5
    send(server, "tabular", shifted)
    time.sleep(1.5)
    after = {(f["tensor"], f["feature"], f["method"]): f for f in drift(server, "tabular")["features"]}
    assert after[("INPUT0", "[0]", "psi")]["alert"] and after[("INPUT0", "[0]", "psi")]["score"] > 0.2
    assert after[("OUTPUT0", "[0]", "ks")]["alert"] and after[("OUTPUT0", "[0]", "ks")]["score"] > 0.1
    assert not after[("INPUT0", "[1]", "psi")]["alert"] and not after[("OUTPUT0", "[1]", "ks")]["alert"]

    alerts = requests.get(server.url + "/v2/alerts", timeout=5).json()["drift"]
    flagged = {(a["model"], a["tensor"], a["feature"], a["method"]) for a in alerts}
    assert flagged == {("tabular", "INPUT0", "[0]", "psi"), ("tabular", "OUTPUT0", "[0]", "ks")}
    assert all(a["since_unix_ms"] <= time.time() * 1000 for a in alerts)
    labels = {"model": "tabular", "tensor": "INPUT0", "feature": "[0]", "method": "psi"}
    assert server.metric("inferd_drift_alert", **labels) == 1
    assert server.metric("inferd_drift_score", **labels) > 0.2
    assert server.metric("inferd_drift_alert", model="tabular", tensor="INPUT0", feature="[1]", method="psi") == 0


def test_the_class_histogram_drifts_from_a_reference_file(server):
    report = drift(server, "classes")
    assert report["reference"] == {"source": "files", "rows": 100, "complete": True}
    send(server, "classes", np.eye(3)[[0, 1] * 20])
    steady = scored(server, "classes", 40)
    assert not steady[("OUTPUT0", "class", "psi")]["alert"], steady
    send(server, "classes", np.eye(3)[[2] * 40])  # answers of a class the reference never had
    time.sleep(1.5)
    [feature] = drift(server, "classes")["features"]
    assert feature["alert"] and feature["score"] > 1, feature


def test_drift_errors_are_clear_and_the_server_keeps_serving(server):
    response = requests.get(server.url + "/v2/models/plain/drift", timeout=5)
    assert response.status_code == 400 and "'drift'" in response.json()["error"]
    response = requests.get(server.url + "/v2/models/nobody/drift", timeout=5)
    assert response.status_code == 404 and response.json()["error"]
    assert requests.post(server.url + "/v2/models/tabular/drift", timeout=5).status_code == 405
    index = {e["name"]: e for e in requests.post(server.url + "/v2/repository/index", timeout=5).json()}
    assert "no tensor 'NOPE'" in index["broken"]["reason"]
    send(server, "plain", [[1.0]])
