"""Triton's load API with overrides (explicit mode): a config given in the request instead of
config.pbtxt, and a model's files given in the request, over HTTP and gRPC; a swap through the API
under load drops no request; malformed overrides get a clear error and change nothing."""
import base64
import json
import time

import grpc
import pytest
import requests

from inferd_harness import Inferd
from test_poll_mode import CONFIG, Load, http_answer, plus_model, write_version

EXPLICIT = ("--model-control-mode", "explicit", "--load-model", "plus")
PLUS_CONFIG_JSON = json.dumps({"platform": "onnxruntime_onnx", "max_batch_size": 8, "dynamic_batching": {}})


def load(server, name, parameters=None, body=None):
    data = body if body is not None else json.dumps({"parameters": parameters or {}})
    return requests.post(f"{server.url}/v2/repository/models/{name}/load", data=data, timeout=60)


def files(version, constant):
    return {f"file:{version}/model.onnx": base64.b64encode(plus_model(constant)).decode()}


@pytest.fixture
def server(tmp_path):
    (tmp_path / "plus").mkdir()
    (tmp_path / "plus" / "config.pbtxt").write_text(CONFIG)
    write_version(tmp_path / "plus", 1, 1.0, tmp_path / "staging")
    process = Inferd(tmp_path, *EXPLICIT)
    yield process
    process.kill()


def test_a_config_override_replaces_config_pbtxt(server):
    assert requests.get(server.url + "/v2/models/plus/config", timeout=5).json()["max_batch_size"] == 8
    config = json.dumps({"platform": "onnxruntime_onnx", "max_batch_size": 2})
    assert load(server, "plus", {"config": config}).status_code == 200
    assert requests.get(server.url + "/v2/models/plus/config", timeout=5).json()["max_batch_size"] == 2
    assert http_answer(server) == 1.0


def test_a_model_given_as_files_loads_without_the_repository(server, grpc_stubs):
    response = load(server, "uploaded", {"config": PLUS_CONFIG_JSON, **files(3, 7.0)})
    assert response.status_code == 200, response.text
    answer = server.infer("uploaded", [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [1]}])
    assert answer.json()["model_version"] == "3" and answer.json()["outputs"][0]["data"] == [8.0]
    # The same over gRPC, where a file travels as bytes_param.
    pb, services = grpc_stubs[0], grpc_stubs[1]
    stub = services.GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_target))
    request = pb.RepositoryModelLoadRequest(model_name="uploaded_grpc")
    request.parameters["config"].string_param = PLUS_CONFIG_JSON
    request.parameters["file:1/model.onnx"].bytes_param = plus_model(4.0)
    stub.RepositoryModelLoad(request, timeout=60)
    answer = server.infer("uploaded_grpc", [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [1]}])
    assert answer.json()["outputs"][0]["data"] == [5.0]


def test_a_swap_through_the_api_under_load_drops_nothing(server, grpc_stubs):
    traffic = Load(server, grpc_stubs)
    try:
        traffic.wait_for(1.0)
        time.sleep(0.5)  # requests in flight and queued when the swap comes
        response = load(server, "plus", {"config": PLUS_CONFIG_JSON, **files(2, 2.0)})
        assert response.status_code == 200, response.text
        traffic.wait_for(2.0)
        time.sleep(0.5)
    finally:
        traffic.stop()
    traffic.assert_nothing_failed_and_answers_moved_forward({1.0, 2.0})
    assert {1.0, 2.0} <= {value for seen in traffic.answers for value in seen}
    # Version 1 (the repository's) is gone: the model now is what the files held.
    assert requests.get(server.url + "/v2/models/plus/versions/1/ready", timeout=5).status_code != 200


@pytest.mark.parametrize("parameters,body,message", [
    (None, "{not json", "not a JSON object"),
    (None, json.dumps({"params": {}}), "unknown field 'params'"),
    ({"shiny": "yes"}, None, "unknown load parameter 'shiny'"),
    ({"config": {"max_batch_size": 2}}, None, "must be a string"),
    ({"config": json.dumps({"max_batch_size": 2, "shiny": 1})}, None, "shiny"),
    ({"config": json.dumps({"name": "other"})}, None, "does not match"),
    (files(1, 1.0), None, "need a config override"),
    ({"config": PLUS_CONFIG_JSON, "file:../escape/model.onnx": "AAAA"}, None, "inside a version folder"),
    ({"config": PLUS_CONFIG_JSON, "file:model.onnx": "AAAA"}, None, "inside a version folder"),
    ({"config": PLUS_CONFIG_JSON, "file:1/model.onnx": "not base64!"}, None, "base64"),
])
def test_malformed_overrides_get_a_clear_error_and_change_nothing(server, parameters, body, message):
    response = load(server, "plus", parameters, body)
    assert response.status_code == 400, response.text
    assert message in response.json()["error"], response.json()
    assert http_answer(server) == 1.0
    assert requests.get(server.url + "/v2/models/plus/config", timeout=5).json()["max_batch_size"] == 8


def test_a_model_name_that_leaves_the_private_folder_is_refused(server, grpc_stubs):
    # gRPC carries any name as it is (HTTP clients fold ".." out of the path).
    pb, services = grpc_stubs[0], grpc_stubs[1]
    stub = services.GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_target))
    for name in ("..", "a/b"):
        request = pb.RepositoryModelLoadRequest(model_name=name)
        request.parameters["config"].string_param = PLUS_CONFIG_JSON
        request.parameters["file:1/model.onnx"].bytes_param = plus_model(4.0)
        with pytest.raises(grpc.RpcError) as error:
            stub.RepositoryModelLoad(request, timeout=60)
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT, name
        assert "cannot be the name" in error.value.details()
    assert http_answer(server) == 1.0


def test_grpc_rejects_unknown_or_mistyped_load_parameters(server, grpc_stubs):
    pb, services = grpc_stubs[0], grpc_stubs[1]
    stub = services.GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_target))
    for key, field, value in (("shiny", "string_param", "x"), ("config", "bytes_param", b"{}"),
                              ("file:1/model.onnx", "string_param", "x")):
        request = pb.RepositoryModelLoadRequest(model_name="plus")
        setattr(request.parameters[key], field, value)
        with pytest.raises(grpc.RpcError) as error:
            stub.RepositoryModelLoad(request, timeout=10)
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT, key
        assert key in error.value.details() or "config" in error.value.details()
    assert http_answer(server) == 1.0
