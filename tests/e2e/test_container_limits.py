"""Thread counts and memory follow the container's limits, not the node's: the affinity mask and,
where this machine lets root make cgroups, a real CPU quota and memory limit that the server is
started inside (v1 controllers, as on this project's machines, or v2 with the controllers
delegated). The log says what was detected; /metrics exports it."""
import os
import re
from pathlib import Path

import pytest
import requests

from inferd_harness import Inferd, scalar_identity, write_repository


@pytest.fixture
def repository(tmp_path):
    return write_repository(tmp_path / "repo", {"identity": (scalar_identity(0, max_batch_size=4), [1])})


def metric(server, name):
    text = requests.get(server.metrics_url, timeout=5).text
    found = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(found.group(1)) if found else None


def test_threads_follow_the_affinity_mask(repository):
    server = Inferd(repository, preexec=lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}))
    try:
        assert re.search(r"resources: 1 CPUs available \(\d+ online, 1 in the affinity mask", server.logs()), server.logs()
        assert metric(server, "inferd_container_cpus") == 1
        # The request path works with one CPU's worth of threads.
        body = {"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [2.5]}]}
        answer = requests.post(server.url + "/v2/models/identity/infer", json=body, timeout=10)
        assert answer.status_code == 200, answer.text
    finally:
        assert server.stop() == 0, server.logs()


def cgroup_mounts():
    """{controller or 'unified': mount point} from /proc/self/mountinfo."""
    mounts = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split(" ")
        tail = fields[fields.index("-") + 1:]
        if tail[0] == "cgroup":
            for option in tail[2].split(","):
                mounts.setdefault(option, fields[4])
        elif tail[0] == "cgroup2":
            mounts.setdefault("unified", fields[4])
    return mounts


def make_limited_groups(name, quota_us, period_us, memory_bytes):
    """Creates the groups, returns (their directories, a preexec that joins them); skips the test
    where cgroups cannot be made here."""
    mounts = cgroup_mounts()
    try:
        if "cpu" in mounts and "memory" in mounts:  # v1 (or the hybrid: controllers on v1)
            cpu, memory = Path(mounts["cpu"]) / name, Path(mounts["memory"]) / name
            cpu.mkdir()
            memory.mkdir()
            (cpu / "cpu.cfs_period_us").write_text(str(period_us))
            (cpu / "cpu.cfs_quota_us").write_text(str(quota_us))
            (memory / "memory.limit_in_bytes").write_text(str(memory_bytes))
            groups = [cpu, memory]
        elif "unified" in mounts:
            root = Path(mounts["unified"])
            if not {"cpu", "memory"} <= set((root / "cgroup.subtree_control").read_text().split()):
                pytest.skip("cgroup v2 without the cpu and memory controllers delegated here")
            group = root / name
            group.mkdir()
            (group / "cpu.max").write_text(f"{quota_us} {period_us}")
            (group / "memory.max").write_text(str(memory_bytes))
            groups = [group]
        else:
            pytest.skip("no cgroup hierarchy mounted")
    except OSError as error:
        pytest.skip(f"cannot make cgroups here: {error}")

    def join():
        for group in groups:
            (group / "cgroup.procs").write_text(str(os.getpid()))
    return groups, join


def test_a_cgroup_quota_and_memory_limit_size_the_server(repository):
    groups, join = make_limited_groups(f"inferd_e2e_{os.getpid()}", quota_us=50000, period_us=100000,
                                       memory_bytes=1 << 30)
    try:
        server = Inferd(repository, "--log-verbose", preexec=join)
        try:
            logs = server.logs()
            assert re.search(r"resources: 1 CPUs available \(\d+ online, \d+ in the affinity mask, cgroup quota 0.5 CPUs from "
                             r"\S+(cpu.cfs_quota_us|cpu.max)\); memory: cgroup limit 1024 MiB", logs), logs
            assert metric(server, "inferd_container_cpus") == 1
            assert metric(server, "inferd_container_memory_limit_bytes") == 1 << 30
            working_set = metric(server, "inferd_container_memory_working_set_bytes")
            assert working_set is not None and 0 < working_set < 1 << 30
        finally:
            assert server.stop() == 0, server.logs()
    finally:
        for group in groups:
            group.rmdir()  # empty once the server has exited


def test_oom_score_adj_is_written_at_start(repository):
    server = Inferd(repository, "--oom-score-adj", "500")
    try:
        assert Path(f"/proc/{server.process.pid}/oom_score_adj").read_text().strip() == "500"
        assert "oom_score_adj set to 500" in server.logs()
    finally:
        assert server.stop() == 0, server.logs()


@pytest.mark.parametrize("value", ["1001", "-2000"])
def test_an_oom_score_adj_out_of_range_stops_the_server_with_a_clear_error(repository, value):
    with pytest.raises(RuntimeError, match=r"must be within -1000\.\.1000"):
        Inferd(repository, "--oom-score-adj", value)


def write_heavy_model(repository, name, instances, columns=6144):
    """A MatMul whose weight is 4096 x columns fp32 (96 MiB by default), `instances` instances."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    weight = np.random.default_rng(5).standard_normal((4096, columns)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="fc")], name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4096])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, columns])],
        [numpy_helper.from_array(weight, "w")])
    folder = repository / name / "1"
    folder.mkdir(parents=True)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(folder / "model.onnx"))
    (repository / name / "config.pbtxt").write_text(
        f'platform: "onnxruntime_onnx"\nmax_batch_size: 0\ninstance_group [ {{ count: {instances} kind: KIND_CPU }} ]\n'
        'parameters { key: "tune" value: { string_value: "off" } }\n')


def test_a_load_the_memory_limit_has_no_room_for_is_refused_and_the_server_keeps_serving(repository):
    """In a 1 GiB memory cgroup: one instance of a 96 MiB model loads; twelve would need several GiB,
    and their load is refused once the next instance would pass 0.9 GiB, with the numbers in the
    error, instead of the OOM killer ending the process."""
    write_heavy_model(repository, "heavy_one", 1)
    write_heavy_model(repository, "heavy_many", 12)
    groups, join = make_limited_groups(f"inferd_e2e_admit_{os.getpid()}", quota_us=200000, period_us=100000,
                                       memory_bytes=1 << 30)
    try:
        server = Inferd(repository, "--model-control-mode", "explicit", "--load-model", "identity", preexec=join)
        try:
            loaded = requests.post(server.url + "/v2/repository/models/heavy_one/load", timeout=120)
            assert loaded.status_code == 200, loaded.text
            refused = requests.post(server.url + "/v2/repository/models/heavy_many/load", timeout=120)
            assert refused.status_code == 400, refused.text
            error = refused.json()["error"]
            assert re.search(r"model 'heavy_many' version 1, instance \d+ of 12, needs about \d+ MiB \(weights \d+ MiB "
                             r"\+ working memory \d+ MiB, as instance 1 holds\), but the process uses \d+ MiB of its "
                             r"1024 MiB memory limit, and --memory-limit-fraction 0.9 leaves \d+ MiB: load refused",
                             error), error
            assert server.process.poll() is None
            # What served before still serves, and the refused model is reported unavailable.
            x = [0.5] * 4096
            answer = requests.post(server.url + "/v2/models/heavy_one/infer", timeout=30, json={
                "inputs": [{"name": "x", "shape": [1, 4096], "datatype": "FP32", "data": x}]})
            assert answer.status_code == 200, answer.text
            body = {"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [2.5]}]}
            assert requests.post(server.url + "/v2/models/identity/infer", json=body, timeout=10).status_code == 200
            index = {m["name"]: m for m in requests.post(server.url + "/v2/repository/index", timeout=10).json()}
            assert index["heavy_many"]["state"] == "UNAVAILABLE"
            assert "load refused" in index["heavy_many"]["reason"]
            working_set = metric(server, "inferd_container_memory_working_set_bytes")
            assert working_set < 0.9 * (1 << 30)
        finally:
            assert server.stop() == 0, server.logs()
    finally:
        for group in groups:
            group.rmdir()


def test_without_the_check_the_same_load_is_oom_killed(repository):
    """The control: --memory-limit-fraction 0 lets the twelve instances load until the kernel's OOM
    killer ends the whole server, and every model in it."""
    write_heavy_model(repository, "heavy_many", 12)
    groups, join = make_limited_groups(f"inferd_e2e_oom_{os.getpid()}", quota_us=200000, period_us=100000,
                                       memory_bytes=1 << 30)
    try:
        server = Inferd(repository, "--model-control-mode", "explicit", "--load-model", "identity",
                        "--memory-limit-fraction", "0", preexec=join)
        try:
            with pytest.raises(requests.ConnectionError):
                requests.post(server.url + "/v2/repository/models/heavy_many/load", timeout=120)
            assert server.process.wait(timeout=30) == -9  # SIGKILL from the OOM killer
        finally:
            if server.process.poll() is None:
                server.stop()
    finally:
        for group in groups:
            group.rmdir()
