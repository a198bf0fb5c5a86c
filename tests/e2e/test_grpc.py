"""The KServe v2 gRPC API and grpc.health.v1, driven by Python grpcio with stubs generated from our
protos at test time (what an existing Triton/KServe gRPC client does)."""
import threading
import time

import grpc
import numpy as np
import pytest

from inferd_harness import write_repository


@pytest.fixture(scope="module")
def pb(grpc_stubs):
    return grpc_stubs[0]


@pytest.fixture(scope="module")
def stub(server, grpc_stubs):
    channel = grpc.insecure_channel(server.grpc_target)
    yield grpc_stubs[1].GRPCInferenceServiceStub(channel)
    channel.close()


def stub_for(server, grpc_stubs):
    return grpc_stubs[1].GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_target))


def add_sub_request(pb, a=(1, 2, 3, 4), b=(1, 1, 1, 1), request_id="", raw=True, **fields):
    request = pb.ModelInferRequest(model_name="add_sub", id=request_id, **fields)
    for name, values in (("INPUT0", a), ("INPUT1", b)):
        tensor = request.inputs.add(name=name, datatype="INT32", shape=[1, len(values)])
        if raw:
            request.raw_input_contents.append(np.asarray(values, np.int32).tobytes())
        else:
            tensor.contents.int_contents.extend(values)
    return request


def outputs_of(response):
    return {o.name: np.frombuffer(raw, dtype={"INT32": np.int32, "FP32": np.float32}[o.datatype]).reshape(o.shape)
            for o, raw in zip(response.outputs, response.raw_output_contents)}


def assert_still_serving(stub, pb):
    out = outputs_of(stub.ModelInfer(add_sub_request(pb), timeout=10))
    assert out["OUTPUT0"].tolist() == [[2, 3, 4, 5]]


def error_of(call, *args, **kwargs):
    with pytest.raises(grpc.RpcError) as error:
        call(*args, **kwargs)
    return error.value.code(), error.value.details()


def test_server_rpcs(stub, pb):
    assert stub.ServerLive(pb.ServerLiveRequest()).live
    assert stub.ServerReady(pb.ServerReadyRequest()).ready
    metadata = stub.ServerMetadata(pb.ServerMetadataRequest())
    assert metadata.name == "inferd" and "binary_tensor_data" in metadata.extensions


def test_model_rpcs(stub, pb):
    assert stub.ModelReady(pb.ModelReadyRequest(name="add_sub")).ready
    assert stub.ModelReady(pb.ModelReadyRequest(name="add_sub", version="2")).ready
    assert error_of(stub.ModelReady, pb.ModelReadyRequest(name="nope"))[0] == grpc.StatusCode.NOT_FOUND
    assert error_of(stub.ModelReady, pb.ModelReadyRequest(name="add_sub", version="x"))[0] == \
        grpc.StatusCode.INVALID_ARGUMENT
    metadata = stub.ModelMetadata(pb.ModelMetadataRequest(name="add_sub"))
    assert sorted(metadata.versions) == ["1", "2"] and metadata.platform == "add_sub"
    assert [(t.name, t.datatype, list(t.shape)) for t in metadata.inputs] == \
        [("INPUT0", "INT32", [-1, 4]), ("INPUT1", "INT32", [-1, 4])]
    config = stub.ModelConfig(pb.ModelConfigRequest(name="add_sub", version="1")).config
    assert config.max_batch_size == 32 and config.input[0].dims == [4]
    assert config.parameters["version_labels"].string_value == "stable:1,canary:2"
    for call, request in ((stub.ModelMetadata, pb.ModelMetadataRequest(name="nope")),
                          (stub.ModelConfig, pb.ModelConfigRequest(name="add_sub", version="9")),
                          (stub.ModelStatistics, pb.ModelStatisticsRequest(name="nope"))):
        assert error_of(call, request)[0] == grpc.StatusCode.NOT_FOUND


def test_infer_raw_and_typed(stub, pb):
    for raw in (True, False):
        response = stub.ModelInfer(add_sub_request(pb, (5, 6, 7, 8), (1, 2, 3, 4), "r1", raw=raw))
        assert response.id == "r1" and response.model_name == "add_sub" and response.model_version == "2"
        out = outputs_of(response)
        assert out["OUTPUT0"].tolist() == [[6, 8, 10, 12]] and out["OUTPUT1"].tolist() == [[4, 4, 4, 4]]
    # a version and one requested output
    request = add_sub_request(pb, model_version="1")
    request.outputs.add(name="OUTPUT1")
    response = stub.ModelInfer(request)
    assert response.model_version == "1" and [o.name for o in response.outputs] == ["OUTPUT1"]


def test_every_datatype_round_trips(stub, pb):
    request = pb.ModelInferRequest(model_name="all_types")
    arrays = {"B": np.array([True, False]), "U8": np.array([0, 255], np.uint8),
              "I64": np.array([-(1 << 40), 7], np.int64), "F16": np.array([1.5, -2], np.float16),
              "F64": np.array([0.25, -1e300], np.float64)}
    for name, values in arrays.items():
        request.inputs.add(name=name, datatype={"B": "BOOL", "U8": "UINT8", "I64": "INT64", "F16": "FP16",
                                                "F64": "FP64"}[name], shape=[2])
        request.raw_input_contents.append(values.tobytes())
    request.inputs.add(name="S", datatype="BYTES", shape=[2])
    request.raw_input_contents.append(b"\x03\x00\x00\x00abc\x00\x00\x00\x00")
    response = stub.ModelInfer(request)
    raw = {o.name: r for o, r in zip(response.outputs, response.raw_output_contents)}
    for name, values in arrays.items():
        assert np.array_equal(np.frombuffer(raw[name + "_OUT"], values.dtype), values)
    assert raw["S_OUT"] == b"\x03\x00\x00\x00abc\x00\x00\x00\x00"


TYPED = """
    backend: "identity"
    max_batch_size: 0
    input [ { name: "B", data_type: TYPE_BOOL, dims: [ -1 ] }, { name: "I8", data_type: TYPE_INT8, dims: [ -1 ] },
            { name: "U8", data_type: TYPE_UINT8, dims: [ -1 ] }, { name: "I64", data_type: TYPE_INT64, dims: [ -1 ] },
            { name: "U64", data_type: TYPE_UINT64, dims: [ -1 ] }, { name: "F64", data_type: TYPE_FP64, dims: [ -1 ] },
            { name: "S", data_type: TYPE_STRING, dims: [ -1 ] } ]
    output [ { name: "B_OUT", data_type: TYPE_BOOL, dims: [ -1 ] }, { name: "I8_OUT", data_type: TYPE_INT8, dims: [ -1 ] },
             { name: "U8_OUT", data_type: TYPE_UINT8, dims: [ -1 ] }, { name: "I64_OUT", data_type: TYPE_INT64, dims: [ -1 ] },
             { name: "U64_OUT", data_type: TYPE_UINT64, dims: [ -1 ] }, { name: "F64_OUT", data_type: TYPE_FP64, dims: [ -1 ] },
             { name: "S_OUT", data_type: TYPE_STRING, dims: [ -1 ] } ]
    """


def test_typed_contents_of_every_family(fresh_server, grpc_stubs, tmp_path):
    pb = grpc_stubs[0]
    server = fresh_server(repo=write_repository(tmp_path, {"typed": (TYPED, [1])}))
    stub = stub_for(server, grpc_stubs)
    request = pb.ModelInferRequest(model_name="typed")
    fields = {"B": ("BOOL", "bool_contents", [True, False]), "I8": ("INT8", "int_contents", [-128, 127]),
              "U8": ("UINT8", "uint_contents", [0, 255]), "I64": ("INT64", "int64_contents", [-(1 << 40), 3]),
              "U64": ("UINT64", "uint64_contents", [1 << 63, 1]), "F64": ("FP64", "fp64_contents", [0.5, -1e300]),
              "S": ("BYTES", "bytes_contents", [b"hello", b""])}
    for name, (datatype, field, values) in fields.items():
        getattr(request.inputs.add(name=name, datatype=datatype, shape=[2]).contents, field).extend(values)
    response = stub.ModelInfer(request)
    raw = {o.name: r for o, r in zip(response.outputs, response.raw_output_contents)}
    dtypes = {"B": np.bool_, "I8": np.int8, "U8": np.uint8, "I64": np.int64, "U64": np.uint64, "F64": np.float64}
    for name, dtype in dtypes.items():
        assert np.frombuffer(raw[name + "_OUT"], dtype).tolist() == fields[name][2], name
    assert raw["S_OUT"] == b"\x05\x00\x00\x00hello\x00\x00\x00\x00"  # raw BYTES: length-prefixed
    request.inputs[1].contents.int_contents[0] = 200  # does not fit INT8
    code, details = error_of(stub.ModelInfer, request)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "out of range for INT8" in details
    assert server.stop() == 0


def test_fp16_needs_raw_contents(stub, pb):
    request = pb.ModelInferRequest(model_name="all_types")
    request.inputs.add(name="F16", datatype="FP16", shape=[1]).contents.fp32_contents.append(1.0)
    code, details = error_of(stub.ModelInfer, request)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "raw_input_contents" in details


def bad_requests(pb):
    def changed(change):
        request = add_sub_request(pb)
        change(request)
        return request

    def inputs(shape, count):
        request = pb.ModelInferRequest(model_name="add_sub")
        for name in ("INPUT0", "INPUT1"):
            request.inputs.add(name=name, datatype="INT32", shape=shape)
            request.raw_input_contents.append(np.zeros(count, np.int32).tobytes())
        return request

    return [
        ("unknown input", changed(lambda r: setattr(r.inputs[0], "name", "NOPE")), "no input named 'NOPE'"),
        ("missing input", changed(lambda r: (r.inputs.pop(), r.raw_input_contents.pop())),
         "required input 'INPUT1' is missing"),
        ("raw size vs shape", changed(lambda r: r.inputs[0].shape.__setitem__(1, 5)), "INPUT0"),
        ("typed count vs shape", changed(lambda r: (r.ClearField("raw_input_contents"),
                                                     r.inputs[0].contents.int_contents.extend([1, 2, 3]),
                                                     r.inputs[1].contents.int_contents.extend([1, 2, 3, 4]))),
         "needs 4 values, contents.int_contents has 3"),
        ("datatype mismatch", changed(lambda r: setattr(r.inputs[0], "datatype", "FP32")), "expected INT32"),
        ("unknown datatype", changed(lambda r: setattr(r.inputs[0], "datatype", "FLOAT")), "unknown datatype"),
        ("batch above max", inputs([33, 4], 132), "max_batch_size=32"),
        ("negative shape", changed(lambda r: r.inputs[0].shape.__setitem__(0, -1)), "non-negative"),
        ("huge shape", changed(lambda r: r.inputs[0].shape.extend([1 << 40, 1 << 30])), "INPUT0"),
        ("unknown output", changed(lambda r: r.outputs.add(name="NOPE")), "no output named"),
        ("raw and typed mixed", changed(lambda r: r.inputs[0].contents.int_contents.append(1)),
         "contents must be empty"),
        ("raw count", changed(lambda r: r.raw_input_contents.pop()), "raw_input_contents has 1 entries"),
        ("bad priority", changed(lambda r: r.parameters["priority"].CopyFrom(pb.InferParameter(string_param="x"))),
         "parameter 'priority'"),
    ]


def test_bad_requests_are_invalid_argument_and_the_server_keeps_serving(stub, pb):
    for name, request, message in bad_requests(pb):
        code, details = error_of(stub.ModelInfer, request)
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (name, code, details)
        assert message in details, (name, details)
        assert_still_serving(stub, pb)


def test_unknown_model_or_version_is_not_found(stub, pb):
    unknown_model = add_sub_request(pb)
    unknown_model.model_name = "nope"
    for request in (add_sub_request(pb, model_version="9"), unknown_model):
        assert error_of(stub.ModelInfer, request)[0] == grpc.StatusCode.NOT_FOUND
    assert error_of(stub.ModelInfer, add_sub_request(pb, model_version="v1"))[0] == grpc.StatusCode.INVALID_ARGUMENT
    assert_still_serving(stub, pb)


def test_stream_interleaves_good_and_bad_requests(stub, pb):
    def requests():
        for i in range(12):
            if i % 3 == 1:
                yield add_sub_request(pb, request_id=f"bad{i}", model_version="9")  # unknown version
            elif i % 3 == 2:
                yield add_sub_request(pb, (1, 2, 3), request_id=f"bad{i}", raw=False)  # bad shape
            else:
                yield add_sub_request(pb, (i, i, i, i), request_id=f"ok{i}")

    answers = {r.infer_response.id: r for r in stub.ModelStreamInfer(requests(), timeout=30)}
    assert len(answers) == 12
    for request_id, answer in answers.items():
        if request_id.startswith("bad"):
            assert answer.error_message, request_id
        else:
            i = int(request_id[2:])
            assert answer.error_message == ""
            assert outputs_of(answer.infer_response)["OUTPUT0"].tolist() == [[i + 1] * 4]
    assert "9" in answers["bad1"].error_message and "expected [-1,4]" in answers["bad2"].error_message


def test_statistics_and_repository_index(stub, pb):
    stub.ModelInfer(add_sub_request(pb, model_version="1"))
    stats = stub.ModelStatistics(pb.ModelStatisticsRequest(name="add_sub", version="1")).model_stats
    assert len(stats) == 1 and stats[0].version == "1" and stats[0].inference_count >= 1
    assert stats[0].inference_stats.success.count >= 1 and stats[0].inference_stats.success.ns > 0
    everything = stub.ModelStatistics(pb.ModelStatisticsRequest()).model_stats
    assert {"add_sub", "identity_fp32", "slow"} <= {s.name for s in everything}
    index = stub.RepositoryIndex(pb.RepositoryIndexRequest()).models
    assert ("add_sub", "2", "READY") in {(m.name, m.version, m.state) for m in index}
    assert all(m.state == "READY" for m in stub.RepositoryIndex(pb.RepositoryIndexRequest(ready=True)).models)


def test_health_check(server, grpc_stubs):
    _, _, health, health_grpc = grpc_stubs
    check = health_grpc.HealthStub(grpc.insecure_channel(server.grpc_target)).Check
    serving = health.HealthCheckResponse.SERVING
    assert check(health.HealthCheckRequest()).status == serving
    assert check(health.HealthCheckRequest(service="add_sub")).status == serving
    assert error_of(check, health.HealthCheckRequest(service="nope"))[0] == grpc.StatusCode.NOT_FOUND


def test_client_deadline_drops_the_queued_request_unexecuted(stub, pb):
    """timeout_delay would run an expired request late (DELAY); a client deadline drops it instead."""
    def one(value):
        request = pb.ModelInferRequest(model_name="timeout_delay")
        request.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 1]).contents.fp32_contents.append(value)
        return request

    before = stub.ModelStatistics(pb.ModelStatisticsRequest(name="timeout_delay")).model_stats[0]
    busy = stub.ModelInfer.future(one(1.0), timeout=10)  # occupies the one instance for 300 ms
    time.sleep(0.05)
    assert error_of(stub.ModelInfer, one(2.0), timeout=0.05)[0] == grpc.StatusCode.DEADLINE_EXCEEDED
    assert busy.result().outputs[0].name == "OUTPUT0"
    time.sleep(0.5)  # anything still queued would have run by now
    after = stub.ModelStatistics(pb.ModelStatisticsRequest(name="timeout_delay")).model_stats[0]
    assert after.execution_count - before.execution_count == 1
    assert after.inference_stats.fail.count - before.inference_stats.fail.count == 1


def test_full_queue_is_unavailable(stub, pb):
    def one():
        request = pb.ModelInferRequest(model_name="queue_one")
        request.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 1]).contents.fp32_contents.append(1)
        return request

    futures = [stub.ModelInfer.future(one(), timeout=10) for _ in range(4)]
    codes = []
    for future in futures:
        try:
            future.result()
            codes.append(grpc.StatusCode.OK)
        except grpc.RpcError as error:
            codes.append(error.code())
    assert grpc.StatusCode.UNAVAILABLE in codes and grpc.StatusCode.OK in codes, codes


def test_message_size_limit(fresh_server, grpc_stubs):
    pb = grpc_stubs[0]
    server = fresh_server("--grpc-max-message-bytes", str(64 * 1024))
    stub = stub_for(server, grpc_stubs)
    big = pb.ModelInferRequest(model_name="identity_fp32")
    big.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 32 * 1024])
    big.raw_input_contents.append(np.zeros(32 * 1024, np.float32).tobytes())
    assert error_of(stub.ModelInfer, big)[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert_still_serving(stub, pb)
    assert server.stop() == 0


def test_explicit_mode_load_and_unload(fresh_server, grpc_stubs, tmp_path):
    pb, _, health, health_grpc = grpc_stubs
    identity = ('backend: "identity"\nmax_batch_size: 0\n'
                'input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 1 ] } ]\n'
                'output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 1 ] } ]\n')
    repo = write_repository(tmp_path, {"a": (identity, [1])})
    server = fresh_server("--model-control-mode", "explicit", repo=repo)
    stub = stub_for(server, grpc_stubs)
    check = health_grpc.HealthStub(grpc.insecure_channel(server.grpc_target)).Check
    assert not stub.ModelReady(pb.ModelReadyRequest(name="a")).ready
    assert check(health.HealthCheckRequest(service="a")).status == health.HealthCheckResponse.NOT_SERVING
    stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="a"))
    assert stub.ModelReady(pb.ModelReadyRequest(name="a")).ready
    assert check(health.HealthCheckRequest(service="a")).status == health.HealthCheckResponse.SERVING
    assert error_of(stub.RepositoryModelLoad, pb.RepositoryModelLoadRequest(model_name="zzz"))[0] == \
        grpc.StatusCode.NOT_FOUND
    overridden = pb.RepositoryModelLoadRequest(model_name="a")
    overridden.parameters["config"].string_param = "{}"
    assert error_of(stub.RepositoryModelLoad, overridden)[0] == grpc.StatusCode.INVALID_ARGUMENT
    stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="a"))
    assert not stub.ModelReady(pb.ModelReadyRequest(name="a")).ready
    assert server.stop() == 0


def test_load_is_refused_when_models_are_not_explicitly_controlled(stub, pb):
    code, details = error_of(stub.RepositoryModelLoad, pb.RepositoryModelLoadRequest(model_name="add_sub"))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "explicit" in details


def test_sigterm_drains_grpc_calls_and_reports_not_serving(fresh_server, grpc_stubs):
    pb, _, health, health_grpc = grpc_stubs
    server = fresh_server()
    stub = stub_for(server, grpc_stubs)
    check = health_grpc.HealthStub(grpc.insecure_channel(server.grpc_target)).Check
    futures = []
    for value in range(4):
        request = pb.ModelInferRequest(model_name="slow")
        request.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 1]).contents.fp32_contents.append(value)
        futures.append(stub.ModelInfer.future(request, timeout=20))
    time.sleep(0.25)  # all four are executing (600 ms each)
    server.process.send_signal(15)
    time.sleep(0.1)
    assert check(health.HealthCheckRequest(), timeout=2).status == health.HealthCheckResponse.NOT_SERVING
    late = pb.ModelInferRequest(model_name="slow")
    late.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 1]).contents.fp32_contents.append(9)
    assert error_of(stub.ModelInfer, late, timeout=5)[0] == grpc.StatusCode.UNAVAILABLE
    values = [np.frombuffer(f.result().raw_output_contents[0], np.float32).tolist() for f in futures]
    assert values == [[0.0], [1.0], [2.0], [3.0]]
    assert server.process.wait(timeout=20) == 0, server.logs()


def test_streams_left_open_or_abandoned_do_not_hold_the_server(fresh_server, grpc_stubs):
    """A client that cancels a stream with a request still running, and one that keeps an idle
    stream open: the server keeps serving, and on SIGTERM closes the open stream and exits 0."""
    pb = grpc_stubs[0]
    server = fresh_server()
    stub = stub_for(server, grpc_stubs)

    def slow_request(value):
        request = pb.ModelInferRequest(model_name="slow", id=str(value))
        request.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 1]).contents.fp32_contents.append(value)
        return request

    abandoned = stub.ModelStreamInfer(iter([slow_request(1)]), timeout=20)
    time.sleep(0.2)  # the request is executing (600 ms)
    abandoned.cancel()
    assert_still_serving(stub, pb)

    keep_open = threading.Event()

    def idle_after_one():
        yield add_sub_request(pb, request_id="first")
        keep_open.wait(30)  # the stream stays open, idle, until the test ends

    stream = stub.ModelStreamInfer(idle_after_one(), timeout=30)
    assert next(stream).infer_response.id == "first"
    server.process.send_signal(15)
    try:
        assert server.process.wait(timeout=20) == 0, server.logs()
        with pytest.raises(grpc.RpcError) as error:
            list(stream)
        assert error.value.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)
    finally:
        keep_open.set()


def test_concurrent_streams_and_unary_calls(stub, pb):
    errors = []

    def stream(worker):
        try:
            requests = (add_sub_request(pb, (worker, i, 0, 0), request_id=f"{worker}-{i}") for i in range(20))
            answers = {r.infer_response.id: r for r in stub.ModelStreamInfer(requests, timeout=30)}
            for i in range(20):
                out = outputs_of(answers[f"{worker}-{i}"].infer_response)
                assert out["OUTPUT0"].tolist() == [[worker + 1, i + 1, 1, 1]]
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=stream, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for _ in range(20):
        assert_still_serving(stub, pb)
    for thread in threads:
        thread.join()
    assert not errors, errors


def test_grpc_flags(fresh_server, grpc_stubs):
    pb = grpc_stubs[0]
    tuned = fresh_server("--grpc-keepalive-time", "10000", "--grpc-keepalive-timeout", "2000",
                         "--grpc-keepalive-permit-without-calls", "true", "--grpc-http2-max-pings-without-data", "0",
                         "--grpc-http2-min-recv-ping-interval-without-data", "5000", "--grpc-http2-max-ping-strikes", "0",
                         "--grpc-threads", "3")
    assert_still_serving(stub_for(tuned, grpc_stubs), pb)
    assert tuned.stop() == 0
    off = fresh_server("--allow-grpc", "false")
    with pytest.raises(grpc.RpcError) as error:
        stub_for(off, grpc_stubs).ServerLive(pb.ServerLiveRequest(), timeout=2)
    assert error.value.code() == grpc.StatusCode.UNAVAILABLE  # nothing listens on the gRPC port
    assert off.stop() == 0
