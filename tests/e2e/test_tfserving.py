"""TensorFlow Serving REST on the HTTP port: predict in the row and columnar formats, version
labels, model status and metadata, and the errors TF Serving clients expect ({"error": ...})."""
import base64

import requests


def predict(server, path, body):
    return requests.post(server.url + "/v1/models/" + path + ":predict", json=body, timeout=30)


def inference_count(server, model, version):
    stats = requests.get(f"{server.url}/v2/models/{model}/versions/{version}/stats").json()
    return stats["model_stats"][0]["inference_count"]


def test_row_format_with_named_instances(server):
    response = predict(server, "add_sub", {"instances": [
        {"INPUT0": [1, 2, 3, 4], "INPUT1": [10, 10, 10, 10]},
        {"INPUT0": [5, 6, 7, 8], "INPUT1": [1, 1, 1, 1]}]})
    assert response.status_code == 200, response.text
    predictions = response.json()["predictions"]
    assert predictions == [{"OUTPUT0": [11, 12, 13, 14], "OUTPUT1": [-9, -8, -7, -6]},
                           {"OUTPUT0": [6, 7, 8, 9], "OUTPUT1": [4, 5, 6, 7]}]


def test_single_input_shorthand_and_columnar_format(server):
    rows = predict(server, "identity_fp32", {"instances": [[0.5, 1.5], [2.5, 3.5]]})
    assert rows.status_code == 200, rows.text
    assert rows.json() == {"predictions": [[0.5, 1.5], [2.5, 3.5]]}
    columns = predict(server, "identity_fp32", {"inputs": [[0.5, 1.5, 2.5]]})
    assert columns.status_code == 200, columns.text
    assert columns.json() == {"outputs": [[0.5, 1.5, 2.5]]}
    named = predict(server, "add_sub", {"inputs": {"INPUT0": [[1, 1, 1, 1]], "INPUT1": [[2, 2, 2, 2]]}})
    assert named.json() == {"outputs": {"OUTPUT0": [[3, 3, 3, 3]], "OUTPUT1": [[-1, -1, -1, -1]]}}


def test_bytes_as_strings_and_b64(server):
    # all_types has no batch dim: the columnar format gives the exact shape.
    raw = bytes([0, 1, 255])
    body = {"inputs": {"B": [True], "U8": [7], "I64": [-3], "F16": [0.5], "F64": [2.25],
                       "S": ["plain", {"b64": base64.b64encode(raw).decode()}]}}
    response = predict(server, "all_types", body)
    assert response.status_code == 200, response.text
    outputs = response.json()["outputs"]
    assert outputs["B_OUT"] == [True] and outputs["U8_OUT"] == [7] and outputs["I64_OUT"] == [-3]
    assert outputs["F16_OUT"] == [0.5] and outputs["F64_OUT"] == [2.25]
    assert outputs["S_OUT"][0] == "plain"


def test_versions_and_labels_pick_the_version(server):
    body = {"instances": [{"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 1, 1, 1]}]}
    for path, version in (("add_sub/versions/1", 1), ("add_sub/labels/stable", 1), ("add_sub/labels/canary", 2)):
        before = inference_count(server, "add_sub", version)
        response = predict(server, path, body)
        assert response.status_code == 200, response.text
        assert inference_count(server, "add_sub", version) == before + 1, path
    unknown_label = predict(server, "add_sub/labels/nightly", body)
    assert unknown_label.status_code == 404 and "no version label 'nightly'" in unknown_label.json()["error"]


def test_model_status(server):
    status = requests.get(server.url + "/v1/models/add_sub").json()
    assert status == {"model_version_status": [
        {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}},
        {"version": "2", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]}
    one = requests.get(server.url + "/v1/models/add_sub/versions/2").json()
    assert [v["version"] for v in one["model_version_status"]] == ["2"]
    missing = requests.get(server.url + "/v1/models/add_sub/versions/9")
    assert missing.status_code == 404 and "no version 9" in missing.json()["error"]
    unknown = requests.get(server.url + "/v1/models/nope")
    assert unknown.status_code == 404 and "error" in unknown.json()


def test_metadata_describes_the_predict_signature(server):
    meta = requests.get(server.url + "/v1/models/add_sub/versions/1/metadata").json()
    assert meta["model_spec"] == {"name": "add_sub", "signature_name": "", "version": "1"}
    signature = meta["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert signature["method_name"] == "tensorflow/serving/predict"
    assert signature["inputs"]["INPUT0"]["dtype"] == "DT_INT32"
    assert [d["size"] for d in signature["inputs"]["INPUT0"]["tensor_shape"]["dim"]] == ["-1", "4"]
    assert set(signature["outputs"]) == {"OUTPUT0", "OUTPUT1"}


def test_bad_requests_get_tf_serving_errors_and_the_server_keeps_serving(server):
    cases = [
        (requests.post(server.url + "/v1/models/add_sub:predict", data="{not json",
                       headers={"Content-Type": "application/json"}), 400, "malformed JSON"),
        (predict(server, "add_sub", {"instances": [{"INPUT0": [1, 2, 3, 4]}, {"INPUT0": [1, 2]}]}), 400, "ragged"),
        (predict(server, "add_sub", {"instances": [{"INPUTX": [1, 2, 3, 4]}]}), 400, "unknown input 'INPUTX'"),
        (predict(server, "add_sub", {"instances": [{"INPUT0": [1, 2, 3, 4]}]}), 400, "INPUT1"),
        (predict(server, "add_sub", {"instances": [{"INPUT0": [1.5, 2, 3, 4], "INPUT1": [1, 1, 1, 1]}]}), 400,
         "not a valid INT32"),
        (predict(server, "add_sub", {}), 400, "exactly one of 'instances'"),
        (predict(server, "nope", {"instances": [1]}), 404, "nope"),
        (requests.post(server.url + "/v1/models/add_sub:classify", json={"examples": []}), 404, "':classify' is not served"),
        (requests.get(server.url + "/v1/models/add_sub:predict"), 405, "POST"),
    ]
    for response, code, text in cases:
        assert response.status_code == code, (text, response.status_code, response.text)
        assert text in response.json()["error"], (text, response.text)
    ok = predict(server, "identity_fp32", {"instances": [[1.0]]})
    assert ok.status_code == 200 and ok.json() == {"predictions": [[1.0]]}
