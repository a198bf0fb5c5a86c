"""Every kind of bad input gets a clear error, and the server keeps serving afterwards."""
import json
import socket

import pytest
import requests

GOOD = {"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "INT32", "data": [1, 2, 3, 4]},
                   {"name": "INPUT1", "shape": [1, 4], "datatype": "INT32", "data": [1, 1, 1, 1]}]}


def assert_still_serving(server):
    response = requests.post(server.url + "/v2/models/add_sub/infer", json=GOOD, timeout=10)
    assert response.status_code == 200, response.text
    assert response.json()["outputs"][0]["data"] == [2, 3, 4, 5]


def with_input(**changes):
    body = json.loads(json.dumps(GOOD))
    body["inputs"][0].update(changes)
    return body


CASES = [
    ("malformed json", b'{"inputs": [', 400, "malformed JSON"),
    ("not an object", b"[1, 2, 3]", 400, "JSON object"),
    ("missing inputs", b'{"outputs": []}', 400, "'inputs'"),
    ("unknown input", with_input(name="NOPE"), 400, "no input named 'NOPE'"),
    ("missing required input", {"inputs": GOOD["inputs"][:1]}, 400, "required input 'INPUT1' is missing"),
    ("shape vs data", with_input(shape=[1, 5]), 400, "needs 5 elements"),
    ("datatype mismatch", with_input(datatype="FP32"), 400, "expected INT32"),
    ("batch above max", {"inputs": [
        {"name": "INPUT0", "shape": [33, 4], "datatype": "INT32", "data": [0] * 132},
        {"name": "INPUT1", "shape": [33, 4], "datatype": "INT32", "data": [0] * 132}]}, 400, "max_batch_size=32"),
    ("negative shape", with_input(shape=[-1, 4]), 400, "non-negative"),
    ("huge shape", with_input(shape=[1 << 40, 1 << 20]), 400, "too large"),
    ("unknown output", dict(GOOD, outputs=[{"name": "NOPE"}]), 400, "no output named"),
    ("wrong non-batch dim", {"inputs": [
        {"name": "INPUT0", "shape": [1, 3], "datatype": "INT32", "data": [0] * 3},
        {"name": "INPUT1", "shape": [1, 3], "datatype": "INT32", "data": [0] * 3}]}, 400, "expected [-1,4]"),
]


@pytest.mark.parametrize("name,body,status,message", CASES, ids=[c[0] for c in CASES])
def test_bad_request_gets_clear_error(server, name, body, status, message):
    kwargs = {"data": body} if isinstance(body, bytes) else {"json": body}
    response = requests.post(server.url + "/v2/models/add_sub/infer", timeout=10, **kwargs)
    assert response.status_code == status, response.text
    assert message in response.json()["error"]
    assert_still_serving(server)


def test_unknown_model_and_version_are_404(server):
    for path in ("/v2/models/nope/infer", "/v2/models/add_sub/versions/9/infer"):
        response = requests.post(server.url + path, json=GOOD)
        assert response.status_code == 404 and "error" in response.json()
    assert requests.get(server.url + "/v2/models/nope").status_code == 404
    assert requests.get(server.url + "/v2/models/nope/ready").status_code == 404
    assert requests.get(server.url + "/v2/nothing/here").status_code == 404
    bad_version = requests.post(server.url + "/v2/models/add_sub/versions/x/infer", json=GOOD)
    assert bad_version.status_code == 400
    assert_still_serving(server)


def binary_post(server, header_length, body):
    return requests.post(server.url + "/v2/models/identity_fp32/infer", data=body,
                         headers={"Inference-Header-Content-Length": str(header_length)})


def test_binary_header_longer_than_body(server):
    header = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 4}}]}).encode()
    response = binary_post(server, len(header) + 1000, header + b"\0\0\0\0")
    assert response.status_code == 400 and "larger than the body" in response.json()["error"]
    assert_still_serving(server)


def test_binary_data_size_mismatch(server):
    header = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 8}}]}).encode()
    too_short = binary_post(server, len(header), header + b"\0" * 4)
    assert too_short.status_code == 400 and "exceeds" in too_short.json()["error"]
    too_long = binary_post(server, len(header), header + b"\0" * 12)
    assert too_long.status_code == 400 and "not claimed" in too_long.json()["error"]
    wrong_for_shape = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 3], "datatype": "FP32",
                                              "parameters": {"binary_data_size": 8}}]}).encode()
    response = binary_post(server, len(wrong_for_shape), wrong_for_shape + b"\0" * 8)
    assert response.status_code == 400 and "bytes of data" in response.json()["error"]
    assert_still_serving(server)


def test_body_over_limit_is_413(server):
    # The session server runs with --http-max-body-bytes 1 MiB.
    response = requests.post(server.url + "/v2/models/identity_fp32/infer", data=b"x" * (2 << 20))
    assert response.status_code == 413 and "error" in response.json()
    assert_still_serving(server)


def test_unsupported_method_is_405(server):
    response = requests.get(server.url + "/v2/models/add_sub/infer")
    assert response.status_code == 405 and response.headers["Allow"] == "POST"
    assert requests.delete(server.url + "/v2/health/ready").status_code == 405
    assert requests.post(server.url + "/v2/models/add_sub/config").status_code == 405
    assert_still_serving(server)


def test_oversized_headers_and_garbage_do_not_hurt(server):
    response = requests.get(server.url + "/v2/health/live", headers={"X-Big": "a" * 20000})
    assert response.status_code == 431
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=5) as raw:
        raw.sendall(b"THIS IS NOT HTTP\r\n\r\n")
        assert raw.recv(1024).startswith(b"HTTP/1.1 400")
    assert_still_serving(server)
