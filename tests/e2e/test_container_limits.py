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
