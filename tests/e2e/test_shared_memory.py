"""Triton's system shared-memory extension over HTTP and gRPC: regions a client creates with
POSIX shared memory (Python's multiprocessing.shared_memory, as tritonclient.utils.shared_memory
does), registered with the server, then named by requests for their inputs and outputs."""
import json
import os
import subprocess
from multiprocessing import shared_memory

import grpc
import numpy as np
import pytest
import requests

from inferd_harness import Inferd, inferd_binary


@pytest.fixture(scope="module")
def shm_server(repository):
    process = Inferd(repository, "--allow-client-shm", "true")
    yield process
    assert process.stop() == 0, process.logs()


@pytest.fixture
def region():
    """A 64 KiB shared-memory object of this test's own, removed afterwards."""
    memory = shared_memory.SharedMemory(name=f"inferd_e2e_{os.getpid()}", create=True, size=1 << 16)
    yield memory
    memory.close()
    memory.unlink()


def register(server, name, key, byte_size, offset=0):
    return requests.post(f"{server.url}/v2/systemsharedmemory/region/{name}/register",
                         json={"key": key, "offset": offset, "byte_size": byte_size})


def put(memory, offset, array):
    memory.buf[offset:offset + array.nbytes] = array.tobytes()


def get(memory, offset, dtype, count):
    return np.frombuffer(bytes(memory.buf[offset:offset + count * np.dtype(dtype).itemsize]), dtype=dtype)


def shm_parameters(region_name, byte_size, offset=0):
    return {"shared_memory_region": region_name, "shared_memory_byte_size": byte_size, "shared_memory_offset": offset}


def test_http_inputs_read_from_and_outputs_written_to_a_region(shm_server, region):
    key = "/" + region.name
    assert register(shm_server, "io", key, 1 << 16).status_code == 200
    status = requests.get(f"{shm_server.url}/v2/systemsharedmemory/status").json()
    assert status == [{"name": "io", "key": key, "offset": 0, "byte_size": 1 << 16}]
    put(region, 0, np.array([[1, 2, 3, 4]], np.int32))
    body = {
        "inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "INT32", "parameters": shm_parameters("io", 16)},
                   {"name": "INPUT1", "shape": [1, 4], "datatype": "INT32", "data": [10, 10, 10, 10]}],
        "outputs": [{"name": "OUTPUT0", "parameters": shm_parameters("io", 64, offset=256)},
                    {"name": "OUTPUT1"}]}
    response = requests.post(f"{shm_server.url}/v2/models/add_sub/infer", json=body)
    assert response.status_code == 200, response.text
    outputs = {o["name"]: o for o in response.json()["outputs"]}
    # The shared-memory output names where it went and how many bytes, and carries no data.
    assert outputs["OUTPUT0"]["parameters"] == {"shared_memory_region": "io", "shared_memory_byte_size": 16,
                                                "shared_memory_offset": 256}
    assert "data" not in outputs["OUTPUT0"] and outputs["OUTPUT0"]["shape"] == [1, 4]
    assert list(get(region, 256, np.int32, 4)) == [11, 12, 13, 14]
    assert outputs["OUTPUT1"]["data"] == [-9, -8, -7, -6]

    # A larger tensor through a region registered at an offset of its object, read back the same.
    image = np.random.default_rng(1).standard_normal(4096).astype(np.float32)
    put(region, 8192 + 128, image)
    assert register(shm_server, "late", key, 40000, offset=8192).status_code == 200
    response = requests.post(f"{shm_server.url}/v2/models/identity_fp32/infer", json={
        "inputs": [{"name": "INPUT0", "shape": [1, 4096], "datatype": "FP32",
                    "parameters": shm_parameters("late", image.nbytes, offset=128)}],
        "outputs": [{"name": "OUTPUT0", "parameters": shm_parameters("late", image.nbytes, offset=128 + image.nbytes)}]})
    assert response.status_code == 200, response.text
    assert np.array_equal(get(region, 8192 + 128 + image.nbytes, np.float32, 4096), image)

    assert requests.post(f"{shm_server.url}/v2/systemsharedmemory/region/late/unregister").status_code == 200
    assert [r["name"] for r in requests.get(f"{shm_server.url}/v2/systemsharedmemory/status").json()] == ["io"]
    assert requests.post(f"{shm_server.url}/v2/systemsharedmemory/unregister").status_code == 200
    assert requests.get(f"{shm_server.url}/v2/systemsharedmemory/status").json() == []


def test_grpc_inputs_read_from_and_outputs_written_to_a_region(shm_server, grpc_stubs, region):
    pb, services = grpc_stubs[0], grpc_stubs[1]
    stub = services.GRPCInferenceServiceStub(grpc.insecure_channel(shm_server.grpc_target))
    key = "/" + region.name
    stub.SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(name="g", key=key, offset=0, byte_size=4096))
    status = stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest(name="g"))
    assert status.regions["g"].key == key and status.regions["g"].byte_size == 4096
    put(region, 0, np.array([[5, 6, 7, 8]], np.int32))
    request = pb.ModelInferRequest(model_name="add_sub")
    shared = request.inputs.add(name="INPUT0", datatype="INT32", shape=[1, 4])
    shared.parameters["shared_memory_region"].string_param = "g"
    shared.parameters["shared_memory_byte_size"].int64_param = 16
    request.inputs.add(name="INPUT1", datatype="INT32", shape=[1, 4])
    request.raw_input_contents.append(np.ones(4, np.int32).tobytes())  # only for the input not in shm
    out = request.outputs.add(name="OUTPUT1")
    out.parameters["shared_memory_region"].string_param = "g"
    out.parameters["shared_memory_byte_size"].int64_param = 16
    out.parameters["shared_memory_offset"].int64_param = 1024
    request.outputs.add(name="OUTPUT0")
    response = stub.ModelInfer(request)
    names = [o.name for o in response.outputs]
    raw = dict(zip(names, response.raw_output_contents))
    assert len(response.raw_output_contents) == len(response.outputs)  # positions kept for clients
    assert raw["OUTPUT1"] == b"" and list(get(region, 1024, np.int32, 4)) == [4, 5, 6, 7]
    assert list(np.frombuffer(raw["OUTPUT0"], np.int32)) == [6, 7, 8, 9]
    written = response.outputs[names.index("OUTPUT1")].parameters
    assert written["shared_memory_region"].string_param == "g" and written["shared_memory_byte_size"].int64_param == 16

    with pytest.raises(grpc.RpcError) as unknown:
        stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest(name="nope"))
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as outside:
        shared.parameters["shared_memory_offset"].int64_param = 4090
        stub.ModelInfer(request)
    assert outside.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "out of range" in outside.value.details()
    with pytest.raises(grpc.RpcError) as missing:
        shared.parameters["shared_memory_region"].string_param = "nope"
        stub.ModelInfer(request)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest(name=""))
    assert len(stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest()).regions) == 0


def test_bad_regions_get_clear_errors_and_the_server_keeps_serving(shm_server, region):
    key = "/" + region.name
    url = shm_server.url

    def error(response, status):
        assert response.status_code == status, response.text
        return response.json()["error"]

    assert "cannot open shared memory object" in error(register(shm_server, "x", "/inferd_no_such_key", 10), 400)
    assert "beyond the 65536 bytes" in error(register(shm_server, "x", key, 1 << 17), 400)
    assert "needs a 'key'" in error(requests.post(f"{url}/v2/systemsharedmemory/region/x/register",
                                                  json={"byte_size": 10}), 400)
    assert "unknown field" in error(requests.post(f"{url}/v2/systemsharedmemory/region/x/register",
                                                  json={"key": key, "byte_size": 10, "size": 3}), 400)
    assert register(shm_server, "x", key, 64).status_code == 200
    assert "already registered" in error(register(shm_server, "x", key, 64), 409)
    assert "no shared memory region 'y'" in error(requests.post(f"{url}/v2/systemsharedmemory/region/y/unregister"), 404)
    assert "no shared memory region 'y'" in error(requests.get(f"{url}/v2/systemsharedmemory/region/y/status"), 404)

    def infer(input_parameters, output_parameters=None, data=None):
        entry = {"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "parameters": input_parameters}
        if data is not None:
            entry["data"] = data
        body = {"inputs": [entry]}
        if output_parameters is not None:
            body["outputs"] = [{"name": "OUTPUT0", "parameters": output_parameters}]
        return requests.post(f"{url}/v2/models/identity_fp32/infer", json=body)

    assert "no shared memory region 'nope'" in error(infer(shm_parameters("nope", 16)), 404)
    assert "out of range" in error(infer(shm_parameters("x", 16, offset=56)), 400)
    assert "needs both" in error(infer({"shared_memory_region": "x"}), 400)
    assert "must be absent" in error(infer(shm_parameters("x", 16), data=[1, 2, 3, 4]), 400)
    # The input's byte size must match its shape, as for every other way of sending it.
    assert error(infer(shm_parameters("x", 12)), 400)
    # The output is larger than the room the request gave it: refused after running, nothing written.
    put(region, 0, np.arange(4, dtype=np.float32))
    put(region, 32, np.full(4, -1, np.float32))
    too_small = error(infer(shm_parameters("x", 16), shm_parameters("x", 8, offset=32)), 400)
    assert "output 'OUTPUT0' holds 16 bytes; its shared_memory_byte_size is 8" in too_small
    assert list(get(region, 32, np.float32, 4)) == [-1] * 4
    # And it still serves, from shared memory and from the body.
    good = infer(shm_parameters("x", 16), shm_parameters("x", 16, offset=32))
    assert good.status_code == 200, good.text
    assert list(get(region, 32, np.float32, 4)) == [0, 1, 2, 3]
    plain = requests.post(f"{url}/v2/models/identity_fp32/infer", json={
        "inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": "FP32", "data": [7, 8]}]})
    assert plain.json()["outputs"][0]["data"] == [7, 8]
    assert requests.post(f"{url}/v2/systemsharedmemory/unregister").status_code == 200


def test_a_server_without_the_flag_refuses_shared_memory(server, region):
    response = register(server, "x", "/" + region.name, 64)
    assert response.status_code == 400 and "--allow-client-shm" in response.json()["error"]
    refused = requests.post(f"{server.url}/v2/models/identity_fp32/infer", json={
        "inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "parameters": shm_parameters("x", 16)}]})
    assert refused.status_code == 400 and "--allow-client-shm" in refused.json()["error"]
    assert "system_shared_memory" in requests.get(server.url + "/v2").json()["extensions"]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_bench_through_shared_memory(shm_server, protocol):
    url = shm_server.url if protocol == "http" else shm_server.grpc_target
    result = subprocess.run([inferd_binary(), "bench", "-u", url, "-i", protocol, "-m", "identity_fp32",
                             "--shape", "INPUT0:1024", "--shared-memory", "system", "--concurrency", "2",
                             "--duration", "0.5", "--warmup-ms", "100", "--format", "json"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    row = json.loads(result.stdout)[0]
    assert row["requests"] > 0 and row["errors"] == 0, row
    # The bench unregisters its region and removes the object when it ends.
    assert requests.get(f"{shm_server.url}/v2/systemsharedmemory/status").json() == []
    assert not [name for name in os.listdir("/dev/shm") if name.startswith("inferd_bench_")]
