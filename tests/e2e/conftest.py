import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from inferd_harness import Inferd, scalar_identity, write_repository  # noqa: E402


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test shows the log of any server that died under it (a crash is otherwise only
    'connection refused' in the next request)."""
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for server in Inferd.crashed():
            logs = server.logs()
            # A sanitizer's report is longer than the tail kept: keep it whole, from its start.
            start = logs.find("ERROR: AddressSanitizer")
            if start < 0:
                start = logs.find("runtime error:")
            shown = logs[max(0, logs.rfind("\n", 0, start)):][:30000] if start >= 0 else logs[-6000:]
            report.sections.append((f"inferd exited with {server.process.returncode}", shown))


def pytest_addoption(parser):
    parser.addoption("--shard", default="1/1", metavar="K/N",
                     help="run only the K-th of N groups of test files (ctest runs the groups side by side)")


def pytest_collection_modifyitems(config, items):
    """Files are dealt to N groups in name order, whole, so a file's session fixtures are made in one
    group only; a file added later joins a group by itself."""
    index, count = (int(part) for part in config.getoption("--shard").split("/"))
    if not 1 <= index <= count:
        raise pytest.UsageError(f"--shard {index}/{count}: K must be between 1 and N")
    files = sorted({item.path for item in items})
    group = {path: position % count + 1 for position, path in enumerate(files)}
    kept = [item for item in items if group[item.path] == index]
    config.hook.pytest_deselected(items=[item for item in items if group[item.path] != index])
    items[:] = kept


# The models every end-to-end test can use. Costs are real busy time in the built-in backends.
MODELS = {
    "identity_fp32": ("""
        backend: "identity"
        max_batch_size: 8
        input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
        output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
        dynamic_batching { }
        """, [1]),
    "all_types": ("""
        backend: "identity"
        max_batch_size: 0
        input [ { name: "B", data_type: TYPE_BOOL, dims: [ -1 ] },
                { name: "U8", data_type: TYPE_UINT8, dims: [ -1 ] },
                { name: "I64", data_type: TYPE_INT64, dims: [ -1 ] },
                { name: "F16", data_type: TYPE_FP16, dims: [ -1 ] },
                { name: "F64", data_type: TYPE_FP64, dims: [ -1 ] },
                { name: "S", data_type: TYPE_STRING, dims: [ -1 ] } ]
        output [ { name: "B_OUT", data_type: TYPE_BOOL, dims: [ -1 ] },
                 { name: "U8_OUT", data_type: TYPE_UINT8, dims: [ -1 ] },
                 { name: "I64_OUT", data_type: TYPE_INT64, dims: [ -1 ] },
                 { name: "F16_OUT", data_type: TYPE_FP16, dims: [ -1 ] },
                 { name: "F64_OUT", data_type: TYPE_FP64, dims: [ -1 ] },
                 { name: "S_OUT", data_type: TYPE_STRING, dims: [ -1 ] } ]
        """, [1]),
    "add_sub": ("""
        backend: "add_sub"
        max_batch_size: 32
        version_policy { all {} }
        input [ { name: "INPUT0", data_type: TYPE_INT32, dims: [ 4 ] },
                { name: "INPUT1", data_type: TYPE_INT32, dims: [ 4 ] } ]
        output [ { name: "OUTPUT0", data_type: TYPE_INT32, dims: [ 4 ] },
                 { name: "OUTPUT1", data_type: TYPE_INT32, dims: [ 4 ] } ]
        dynamic_batching { }
        parameters { key: "version_labels" value: { string_value: "stable:1,canary:2" } }
        """, [1, 2]),
    "batched_slow": ("""
        backend: "add_sub"
        max_batch_size: 32
        input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 4 ] },
                { name: "INPUT1", data_type: TYPE_FP32, dims: [ 4 ] } ]
        output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 4 ] },
                 { name: "OUTPUT1", data_type: TYPE_FP32, dims: [ 4 ] } ]
        dynamic_batching { max_queue_delay_microseconds: 20000 }
        parameters { key: "cost" value: { string_value: "fixed_us=20000,per_item_us=100" } }
        """, [1]),
    "queue_one": (scalar_identity(400000, "dynamic_batching { default_queue_policy { max_queue_size: 1 } }"), [1]),
    "timeout_reject": (scalar_identity(400000, """dynamic_batching { default_queue_policy {
        timeout_action: REJECT default_timeout_microseconds: 100000 } }"""), [1]),
    "timeout_override": (scalar_identity(400000, """dynamic_batching { default_queue_policy {
        default_timeout_microseconds: 5000000 allow_timeout_override: true } }"""), [1]),
    "timeout_delay": (scalar_identity(300000, """dynamic_batching { default_queue_policy {
        timeout_action: DELAY default_timeout_microseconds: 100000 } }"""), [1]),
    "slow": (scalar_identity(600000, max_batch_size=4, instances=4), [1]),
}


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"


@pytest.fixture(scope="session")
def repository(tmp_path_factory):
    repo = write_repository(tmp_path_factory.mktemp("repo"), MODELS)
    shutil.copytree(EXAMPLES / "mlp_onnx", repo / "mlp_onnx")  # an ONNX model with no config.pbtxt
    return repo


@pytest.fixture(scope="session")
def server(repository):
    process = Inferd(repository, "--http-max-body-bytes", str(1 << 20))
    yield process
    assert process.stop() == 0, process.logs()


@pytest.fixture
def fresh_server(repository):
    """A server of the test's own, for tests that stop it."""
    processes = []

    def start(*args, repo=None):
        process = Inferd(repo or repository, *args)
        processes.append(process)
        return process

    yield start
    for process in processes:
        process.kill()


@pytest.fixture(scope="session")
def grpc_stubs(tmp_path_factory):
    """Python stubs made at test time from our protos by protoc + grpc_python_plugin, as any client
    of the public grpc_service.proto would make them: (messages, services, health, health_services)."""
    import importlib
    import subprocess
    out = tmp_path_factory.mktemp("grpc_stubs")
    proto_dir = Path(__file__).resolve().parents[2] / "proto"
    subprocess.run(["protoc", f"-I{proto_dir}", f"--python_out={out}", f"--grpc_python_out={out}",
                    "--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin",
                    *(str(proto_dir / name) for name in ("model_config.proto", "grpc_service.proto", "health.proto"))],
                   check=True)
    sys.path.insert(0, str(out))
    return tuple(importlib.import_module(name) for name in
                 ("grpc_service_pb2", "grpc_service_pb2_grpc", "health_pb2", "health_pb2_grpc"))


@pytest.fixture(scope="session")
def lifecycle_stubs(tmp_path_factory):
    """Python stubs of inferd's own lifecycle service (proto/lifecycle.proto): (messages, services)."""
    import importlib
    import subprocess
    out = tmp_path_factory.mktemp("lifecycle_stubs")
    proto_dir = Path(__file__).resolve().parents[2] / "proto"
    subprocess.run(["protoc", f"-I{proto_dir}", f"--python_out={out}", f"--grpc_python_out={out}",
                    "--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin", str(proto_dir / "lifecycle.proto")],
                   check=True)
    sys.path.insert(0, str(out))
    return tuple(importlib.import_module(name) for name in ("lifecycle_pb2", "lifecycle_pb2_grpc"))
