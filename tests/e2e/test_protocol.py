"""KServe v2 REST: health, metadata, inference in JSON and binary, config, stats, repository."""
import http.client
import json
import struct

import requests


def test_health_and_server_metadata(server):
    assert requests.get(server.url + "/v2/health/live").json() == {"live": True}
    ready = requests.get(server.url + "/v2/health/ready")
    assert ready.status_code == 200 and ready.json() == {"ready": True}
    meta = requests.get(server.url + "/v2").json()
    assert meta["name"] == "inferd" and "binary_tensor_data" in meta["extensions"]


def test_model_metadata_and_ready(server):
    meta = requests.get(server.url + "/v2/models/add_sub").json()
    assert meta["name"] == "add_sub"
    assert meta["versions"] == ["1", "2"]
    assert meta["inputs"][0] == {"name": "INPUT0", "datatype": "INT32", "shape": [-1, 4]}
    assert requests.get(server.url + "/v2/models/add_sub/versions/1").status_code == 200
    ready = requests.get(server.url + "/v2/models/add_sub/versions/2/ready")
    assert ready.status_code == 200 and ready.json()["ready"] is True


def test_infer_json_nested_and_flat(server):
    for data in ([[1, 2, 3, 4]], [1, 2, 3, 4]):
        response = server.infer("add_sub", [
            {"name": "INPUT0", "shape": [1, 4], "datatype": "INT32", "data": data},
            {"name": "INPUT1", "shape": [1, 4], "datatype": "INT32", "data": [10, 10, 10, 10]}])
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["model_name"] == "add_sub" and body["model_version"] == "2"
        outputs = {o["name"]: o for o in body["outputs"]}
        assert outputs["OUTPUT0"]["data"] == [11, 12, 13, 14]
        assert outputs["OUTPUT1"]["data"] == [-9, -8, -7, -6]
        assert outputs["OUTPUT0"]["shape"] == [1, 4]


def test_infer_specific_version_and_id_and_output_selection(server):
    response = server.infer("add_sub", [
        {"name": "INPUT0", "shape": [2, 4], "datatype": "INT32", "data": [1] * 8},
        {"name": "INPUT1", "shape": [2, 4], "datatype": "INT32", "data": [2] * 8}],
        version=1, outputs=[{"name": "OUTPUT1"}])
    body = response.json()
    assert body["model_version"] == "1"
    assert [o["name"] for o in body["outputs"]] == ["OUTPUT1"]
    assert body["outputs"][0]["data"] == [-1] * 8 and body["outputs"][0]["shape"] == [2, 4]
    with_id = requests.post(server.url + "/v2/models/identity_fp32/infer", json={
        "id": "abc-1", "inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [0.5]}]})
    assert with_id.json()["id"] == "abc-1"


def binary_request(json_part, tensors, extra_headers=None):
    header = json.dumps(json_part).encode()
    body = header + b"".join(tensors)
    headers = {"Inference-Header-Content-Length": str(len(header)), "Content-Type": "application/octet-stream"}
    headers.update(extra_headers or {})
    return body, headers


def split_binary_response(response):
    length = int(response.headers["Inference-Header-Content-Length"])
    return json.loads(response.content[:length]), response.content[length:]


def test_infer_binary_inputs_and_outputs(server):
    values = [1.5, -2.25, 3.0]
    body, headers = binary_request({
        "inputs": [{"name": "INPUT0", "shape": [1, 3], "datatype": "FP32", "parameters": {"binary_data_size": 12}}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}, [struct.pack("<3f", *values)])
    response = requests.post(server.url + "/v2/models/identity_fp32/infer", data=body, headers=headers)
    assert response.status_code == 200, response.text
    meta, raw = split_binary_response(response)
    assert meta["outputs"][0]["parameters"]["binary_data_size"] == 12
    assert list(struct.unpack("<3f", raw)) == values


def test_binary_output_requested_for_all_outputs(server):
    response = server.infer("add_sub", [
        {"name": "INPUT0", "shape": [1, 4], "datatype": "INT32", "data": [5, 6, 7, 8]},
        {"name": "INPUT1", "shape": [1, 4], "datatype": "INT32", "data": [1, 1, 1, 1]}],
        parameters={"binary_data_output": True})
    meta, raw = split_binary_response(response)
    assert [o["parameters"]["binary_data_size"] for o in meta["outputs"]] == [16, 16]
    assert struct.unpack("<8i", raw) == (6, 7, 8, 9, 4, 5, 6, 7)


def test_all_datatypes_round_trip(server):
    response = server.infer("all_types", [
        {"name": "B", "shape": [2], "datatype": "BOOL", "data": [True, False]},
        {"name": "U8", "shape": [2], "datatype": "UINT8", "data": [0, 255]},
        {"name": "I64", "shape": [2], "datatype": "INT64", "data": [-9007199254740993, 7]},
        {"name": "F16", "shape": [2], "datatype": "FP16", "data": [1.5, -0.25]},
        {"name": "F64", "shape": [2], "datatype": "FP64", "data": [0.1, 1e300]},
        {"name": "S", "shape": [3], "datatype": "BYTES", "data": ["hello", "", "wörld"]}])
    assert response.status_code == 200, response.text
    outputs = {o["name"]: o for o in response.json()["outputs"]}
    assert outputs["B_OUT"]["data"] == [True, False]
    assert outputs["U8_OUT"]["data"] == [0, 255]
    assert outputs["I64_OUT"]["data"] == [-9007199254740993, 7]
    assert outputs["F16_OUT"]["data"] == [1.5, -0.25]
    assert outputs["F64_OUT"]["data"] == [0.1, 1e300]
    assert outputs["S_OUT"]["data"] == ["hello", "", "wörld"]
    assert outputs["S_OUT"]["datatype"] == "BYTES"


def test_bytes_in_binary_form(server):
    items = [b"ab", b"\x00\xff"]
    raw = b"".join(struct.pack("<I", len(s)) + s for s in items)
    json_part = {"inputs": [
        {"name": "B", "shape": [1], "datatype": "BOOL", "data": [True]},
        {"name": "U8", "shape": [1], "datatype": "UINT8", "data": [1]},
        {"name": "I64", "shape": [1], "datatype": "INT64", "data": [1]},
        {"name": "F16", "shape": [1], "datatype": "FP16", "data": [1]},
        {"name": "F64", "shape": [1], "datatype": "FP64", "data": [1]},
        {"name": "S", "shape": [2], "datatype": "BYTES", "parameters": {"binary_data_size": len(raw)}}],
        "outputs": [{"name": "S_OUT", "parameters": {"binary_data": True}}]}
    body, headers = binary_request(json_part, [raw])
    response = requests.post(server.url + "/v2/models/all_types/infer", data=body, headers=headers)
    assert response.status_code == 200, response.text
    _, tail = split_binary_response(response)
    assert tail == raw


def test_config_endpoint_returns_effective_config(server):
    config = requests.get(server.url + "/v2/models/add_sub/config").json()
    assert config["name"] == "add_sub"
    assert config["max_batch_size"] == 32
    assert config["instance_group"][0]["count"] == 1  # filled default
    assert config["input"][0]["data_type"] == "TYPE_INT32"


def test_stats_have_triton_shape(server):
    server.infer("identity_fp32", [{"name": "INPUT0", "shape": [1, 2], "datatype": "FP32", "data": [1, 2]}])
    stats = server.stats("identity_fp32")
    assert stats[0]["name"] == "identity_fp32" and stats[0]["version"] == "1"
    assert stats[0]["inference_count"] >= 1 and stats[0]["execution_count"] >= 1
    for key in ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output"):
        assert set(stats[0]["inference_stats"][key]) == {"count", "ns"}
    assert stats[0]["inference_stats"]["success"]["count"] >= 1
    everything = requests.get(server.url + "/v2/models/stats").json()["model_stats"]
    assert {s["name"] for s in everything} >= {"identity_fp32", "add_sub"}


def test_repository_index_and_control_disabled_in_mode_none(server):
    index = requests.post(server.url + "/v2/repository/index").json()
    ready = {(e["name"], e.get("version")) for e in index if e.get("state") == "READY"}
    assert ("add_sub", "1") in ready and ("add_sub", "2") in ready
    refused = requests.post(server.url + "/v2/repository/models/add_sub/unload")
    assert refused.status_code == 400 and "explicit" in refused.json()["error"]


def test_metrics_exposed(server):
    server.infer("identity_fp32", [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [1]}])
    text = requests.get(server.metrics_url).text
    for family in ("inferd_requests_total", "inferd_inferences_total", "inferd_executions_total",
                   "inferd_request_duration_seconds_bucket", "inferd_queue_duration_seconds_bucket",
                   "inferd_compute_duration_seconds_bucket", "inferd_batch_size_bucket", "inferd_queue_depth",
                   "inferd_inflight_requests", "inferd_model_load_duration_seconds",
                   "inferd_process_cpu_seconds_total", "inferd_process_resident_memory_bytes",
                   "inferd_process_threads", "inferd_process_open_fds"):
        assert family in text, family
    assert server.metric("inferd_requests_total", model="identity_fp32", outcome="success") >= 1
    assert server.metric("inferd_model_max_batch_size", model="identity_fp32", version="1") == 8
    assert server.metric("inferd_process_threads") >= 4  # main, HTTP, gRPC, an instance at least
    assert server.metric("inferd_process_open_fds") >= 5  # stdio and the listening sockets at least


def test_keep_alive_reuses_one_connection(server):
    # http.client reconnects silently when the server closes; the socket object tells if it did.
    connection = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [1]}]})
    first_socket = None
    for _ in range(20):
        connection.request("POST", "/v2/models/identity_fp32/infer", body=body,
                           headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 200
        response.read()
        first_socket = first_socket or connection.sock
        assert connection.sock is first_socket
    connection.close()
