"""Ground-truth feedback (metrics/quality_tracker.h) end to end: predictions of requests with ids,
over HTTP and gRPC, joined with labels sent to POST /v2/models/M/feedback (single and batched,
class indices and label-file names, one label per row of a batched request) give TP/FP/FN,
accuracy, precision and recall at GET /v2/models/M/quality and in /metrics; a regression output
gives its MAE; unknown, duplicate and malformed items are counted without losing the rest; bad
bodies, models without the parameter, unknown models and a bad parameter get clear errors, and
the server keeps serving."""
import grpc
import numpy as np
import pytest
import requests

from inferd_harness import Inferd, write_repository

CLASSIFIER = """
    backend: "identity"
    max_batch_size: 8
    input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 3 ] } ]
    output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 3 ], label_filename: "labels.txt" } ]
    parameters { key: "quality" value { string_value: "output=OUTPUT0,task=classification,window=100" } }
    """

REGRESSOR = """
    backend: "identity"
    max_batch_size: 8
    input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 1 ] } ]
    output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 1 ] } ]
    parameters { key: "quality" value { string_value: "output=OUTPUT0,task=regression" } }
    """

PLAIN = """
    backend: "identity"
    max_batch_size: 8
    input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 1 ] } ]
    output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 1 ] } ]
    """

BAD_PARAMETER = PLAIN + """
    parameters { key: "quality" value { string_value: "output=NOPE,task=classification" } }
    """


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = write_repository(tmp_path_factory.mktemp("repo"), {
        "animals": (CLASSIFIER, [1]), "price": (REGRESSOR, [1]), "plain": (PLAIN, [1]), "broken": (BAD_PARAMETER, [1])})
    (root / "animals" / "labels.txt").write_text("cat\ndog\nbird\n")
    inferd = Inferd(root)
    yield inferd
    inferd.kill()


def predict(server, model, rows, request_id):
    response = requests.post(f"{server.url}/v2/models/{model}/infer", timeout=10, json={
        "id": request_id,
        "inputs": [{"name": "INPUT0", "shape": [len(rows), len(rows[0])], "datatype": "FP32",
                    "data": [v for row in rows for v in row]}]})
    assert response.status_code == 200, response.text
    assert response.json()["id"] == request_id
    return response


def feedback(server, model, body, status=200):
    response = requests.post(f"{server.url}/v2/models/{model}/feedback", json=body, timeout=10)
    assert response.status_code == status, response.text
    return response.json()


def quality(server, model):
    response = requests.get(f"{server.url}/v2/models/{model}/quality", timeout=10)
    assert response.status_code == 200, response.text
    [version] = response.json()["versions"]
    return version


def test_classification_feedback_gives_the_confusion_counts(server, grpc_stubs):
    predict(server, "animals", [[0.9, 0.05, 0.05]], "a")  # cat
    predict(server, "animals", [[0.1, 0.8, 0.1]], "b")    # dog
    predict(server, "animals", [[0.2, 0.5, 0.3], [0.1, 0.2, 0.7]], "batch")  # dog, bird
    # Over gRPC: the id travels in ModelInferRequest.id.
    pb, services = grpc_stubs[0], grpc_stubs[1]
    stub = services.GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_target))
    request = pb.ModelInferRequest(model_name="animals", id="over-grpc")
    request.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 3]).contents.fp32_contents.extend([0, 0, 1])  # bird
    assert stub.ModelInfer(request, timeout=10).id == "over-grpc"

    one = feedback(server, "animals", {"id": "a", "label": "cat"})
    assert one["joined"] == 1 and one["results"] == [{"id": "a", "outcome": "joined"}]
    batch = feedback(server, "animals", {"feedback": [
        {"id": "b", "label": 1},                   # dog, right
        {"id": "batch", "label": ["bird", 2]},     # row 1 wrong (dog for bird), row 2 right
        {"id": "over-grpc", "label": 0},           # bird for cat: wrong
        {"id": "never-sent", "label": 0},          # unknown
        {"id": "a", "label": 0},                   # duplicate
        {"label": 1},                              # no id: invalid
        {"id": "b2", "label": {"class": 1}},       # not a label: invalid
    ]})
    assert [r["outcome"] for r in batch["results"]] == [
        "joined", "joined", "joined", "unknown", "duplicate", "invalid", "invalid"]
    assert (batch["joined"], batch["unknown"], batch["duplicate"], batch["invalid"]) == (3, 1, 1, 2)

    report = quality(server, "animals")
    assert report["task"] == "classification" and report["output"] == "OUTPUT0"
    assert report["pairs"] == 5  # a, b, two rows of batch, over-grpc
    assert report["predictions_tracked"] == 4
    assert report["feedback"] == {"joined": 4, "unknown": 1, "expired": 0, "duplicate": 1, "invalid": 2}
    assert report["accuracy"] == pytest.approx(3 / 5)
    classes = {c["label"]: c for c in report["classes"]}
    assert (classes["cat"]["true_positives"], classes["cat"]["false_negatives"]) == (1, 1)
    assert (classes["dog"]["true_positives"], classes["dog"]["false_positives"]) == (1, 1)
    assert (classes["bird"]["true_positives"], classes["bird"]["false_positives"], classes["bird"]["false_negatives"]) == (1, 1, 1)
    # Macro precision over predicted classes (cat 1/1, dog 1/2, bird 1/2); recall over true classes
    # (cat 1/2, dog 1/1, bird 1/2).
    assert report["precision"] == pytest.approx((1 + 0.5 + 0.5) / 3)
    assert report["recall"] == pytest.approx((0.5 + 1 + 0.5) / 3)
    assert server.metric("inferd_quality_accuracy_ratio", model="animals") == pytest.approx(0.6)
    assert server.metric("inferd_quality_false_positives_total", model="animals", **{"class": "bird"}) == 1
    assert server.metric("inferd_feedback_total", model="animals", outcome="unknown") == 1


def test_regression_feedback_gives_the_mean_absolute_error(server):
    predict(server, "price", [[10.0]], "p1")
    predict(server, "price", [[4.0], [6.0]], "p2")
    result = feedback(server, "price", {"feedback": [{"id": "p1", "label": 12}, {"id": "p2", "label": [3, 6]}]})
    assert result["joined"] == 2
    report = quality(server, "price")
    assert report["task"] == "regression" and report["pairs"] == 3
    assert report["mean_absolute_error"] == pytest.approx((2 + 1 + 0) / 3)
    assert "accuracy" not in report
    assert server.metric("inferd_quality_mean_absolute_error", model="price") == pytest.approx(1.0)
    # A request without an id cannot be joined: nothing remembered.
    requests.post(f"{server.url}/v2/models/price/infer", timeout=10, json={
        "inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [1]}]})
    assert quality(server, "price")["predictions_tracked"] == 2


def error(response, status):
    assert response.status_code == status, response.text
    message = response.json()["error"]
    assert message
    return message


def test_bad_feedback_gets_clear_errors_and_the_server_keeps_serving(server):
    url = server.url + "/v2/models/{}/feedback"
    assert "not a JSON object" in error(requests.post(url.format("animals"), data="{oops", timeout=5), 400)
    assert "'id'" in error(requests.post(url.format("animals"), json={"label": 1}, timeout=5), 400)
    assert "'feedback'" in error(requests.post(url.format("animals"), json={"feedback": {"id": "a"}}, timeout=5), 400)
    assert "at most" in error(requests.post(url.format("animals"), timeout=10,
                                            json={"feedback": [{"id": "x", "label": 1}] * 10001}), 400)
    assert "quality" in error(requests.post(url.format("plain"), json={"id": "a", "label": 1}, timeout=5), 400)
    assert "quality" in error(requests.get(server.url + "/v2/models/plain/quality", timeout=5), 400)
    error(requests.post(url.format("nobody"), json={"id": "a", "label": 1}, timeout=5), 404)
    assert requests.get(url.format("animals"), timeout=5).status_code == 405
    assert requests.post(server.url + "/v2/models/animals/quality", timeout=5).status_code == 405
    # A load with a quality parameter naming no output fails with the reason; the rest serve.
    index = {e["name"]: e for e in requests.post(server.url + "/v2/repository/index", timeout=5).json()}
    assert "no output 'NOPE'" in index["broken"]["reason"]
    predict(server, "animals", [[0, 1, 0]], "after-errors")
    assert feedback(server, "animals", {"id": "after-errors", "label": "dog"})["joined"] == 1


def test_a_window_bounds_what_is_remembered(server):
    for i in range(120):  # the window holds 100
        predict(server, "animals", [list(np.eye(3)[i % 3])], f"w{i}")
    assert quality(server, "animals")["predictions_tracked"] == 100
    result = feedback(server, "animals", {"feedback": [{"id": "w0", "label": 0}, {"id": "w119", "label": 2}]})
    assert [r["outcome"] for r in result["results"]] == ["unknown", "joined"]
