"""Isolation between models by CPU placement and priority: parameters[cpus] pins a model's
instance threads (named "i:MODEL") to its CPUs, split evenly among the instances, and sizes their
OpenMP teams to match; other models' threads keep the whole mask. parameters[nice] sets the
instance threads' nice value. A CPU the process may not use fails the load.
parameters[intra_op_thread_count] (Triton's ONNX Runtime backend's name) sets the team size.
parameters[cpu_weight] puts the instance threads in a cgroup of that weight where the process can
manage one (cgroup v2 delegated, or v1's cpu hierarchy, as on this project's machines), and
otherwise sets their nice value from the weight; the start log says which."""
import os
from pathlib import Path

import pytest
import requests

from inferd_harness import Inferd, plus_model, scalar_identity

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to place models apart")

FIRST, LAST = min(os.sched_getaffinity(0)), max(os.sched_getaffinity(0))


def cpus_parameter(cpus):
    return f'parameters {{ key: "cpus" value: {{ string_value: "{cpus}" }} }}\n'


def threads_parameter(count):
    return f'parameters {{ key: "intra_op_thread_count" value: {{ string_value: "{count}" }} }}\n'


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("placement_repo")
    models = {
        "pinned": scalar_identity(instances=2) + cpus_parameter(LAST),
        "onnx_pinned": 'platform: "onnxruntime_onnx"\nmax_batch_size: 8\n' + cpus_parameter(LAST),
        "free": scalar_identity(),
        "background": scalar_identity() + 'parameters { key: "nice" value: { string_value: "12" } }\n',
        "elsewhere": scalar_identity() + cpus_parameter("1000"),
        "onnx_threads": 'platform: "onnxruntime_onnx"\nmax_batch_size: 8\n' + threads_parameter(3),
        "no_threads": scalar_identity() + threads_parameter(0),
        "weighted": scalar_identity() + 'parameters { key: "cpu_weight" value: { string_value: "400" } }\n',
        "weight_and_nice": scalar_identity() + 'parameters { key: "cpu_weight" value: { string_value: "400" } }\n'
                           + 'parameters { key: "nice" value: { string_value: "5" } }\n',
    }
    for name, config in models.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(config)
    (repo / "onnx_pinned" / "1" / "model.onnx").write_bytes(plus_model(1))
    (repo / "onnx_threads" / "1" / "model.onnx").write_bytes(plus_model(1))
    process = Inferd(repo, "--model-control-mode", "explicit",
                     *[arg for model in ("pinned", "onnx_pinned", "free", "background", "onnx_threads", "weighted")
                       for arg in ("--load-model", model)])
    yield process
    assert process.stop() == 0, process.logs()


def cpu_list(cpus):
    """Linux's list format, as /proc/PID/status writes it: 0-3,8."""
    runs, cpus = [], sorted(cpus)
    for cpu in cpus:
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def nice_values(server, name):
    """The nice value (field 19 of /proc/PID/task/TID/stat) of each thread called `name`."""
    values = []
    for task in Path(f"/proc/{server.process.pid}/task").iterdir():
        if (task / "comm").read_text().strip() == name:
            values.append(int((task / "stat").read_text().rsplit(")", 1)[1].split()[16]))
    return values


def threads(server):
    """{thread name: [allowed CPU list, ...]} of the server process."""
    found = {}
    for task in Path(f"/proc/{server.process.pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            allowed = next(line.split(":")[1].strip() for line in (task / "status").read_text().splitlines()
                           if line.startswith("Cpus_allowed_list"))
        except (FileNotFoundError, ProcessLookupError):
            continue
        found.setdefault(name, []).append(allowed)
    return found


def test_instances_run_only_on_their_cpus(server):
    assert server.infer("pinned", [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [3]}]).status_code == 200
    response = server.infer("onnx_pinned", [{"name": "x", "shape": [2, 1], "datatype": "FP32", "data": [1, 2]}])
    assert response.status_code == 200 and response.json()["outputs"][0]["data"] == [2, 3]
    named = threads(server)
    assert named["i:pinned"] == [str(LAST)] * 2, named          # two instances, both on the last CPU
    assert named["i:onnx_pinned"] == [str(LAST)], named
    assert named["i:free"] == [cpu_list(os.sched_getaffinity(0))], named  # unplaced: the whole mask
    assert "instances on CPUs" in server.logs()


def test_a_nice_model_runs_its_instances_at_that_nice_value(server):
    assert server.infer("background", [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [1]}]).status_code == 200
    assert nice_values(server, "i:background") == [12]
    assert nice_values(server, "i:free") == [os.getpriority(os.PRIO_PROCESS, 0)]


def test_a_cpu_the_process_may_not_use_fails_the_load(server):
    response = requests.post(f"{server.url}/v2/repository/models/elsewhere/load", timeout=60)
    assert response.status_code == 400, response.text
    assert "parameters[cpus] names CPUs 1000" in response.json()["error"], response.text
    assert server.infer("free", [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [1]}]).status_code == 200


def test_intra_op_thread_count_sets_the_team_and_a_bad_count_fails_the_load(server):
    assert "model 'onnx_threads': loaded" in server.logs()
    assert next(line for line in server.logs().splitlines()
                if "model 'onnx_threads': loaded" in line).endswith("3 intra-op threads")
    response = requests.post(f"{server.url}/v2/repository/models/no_threads/load", timeout=60)
    assert response.status_code == 400, response.text
    assert "parameters[intra_op_thread_count]" in response.json()["error"], response.text
    assert "from 1 to 1024, got '0'" in response.json()["error"], response.text


def thread_ids(server, name):
    return [task.name for task in Path(f"/proc/{server.process.pid}/task").iterdir()
            if (task / "comm").read_text().strip() == name]


def cpu_cgroup_of(pid, tid):
    """The thread's group in the hierarchy holding cpu: (version, path) from /proc/PID/task/TID/cgroup."""
    lines = Path(f"/proc/{pid}/task/{tid}/cgroup").read_text().splitlines()
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return 1, path
    return 2, next(line.split(":", 2)[2] for line in lines if line.startswith("0::"))


def test_cpu_weight_puts_the_instances_in_a_weighted_cgroup_or_says_why_not(server):
    assert server.infer("weighted", [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [1]}]).status_code == 200
    startup = next(line for line in server.logs().splitlines() if "cpu_weight: " in line)
    pid = server.process.pid
    tids = thread_ids(server, "i:weighted")
    assert tids
    if "no cgroup to manage" in startup:
        # The fallback: the same CFS weight per thread, nice = -log(4) / log(1.25) = -6.
        assert "model 'weighted' v1: cpu_weight 400 applied as nice -6" in server.logs()
        assert nice_values(server, "i:weighted") == [-6]
        return
    if "an instance runs outside its cgroup" in server.logs():
        # The hierarchy looked manageable but the kernel refused the groups (v2: another process
        # shares the process's group): the same fallback, with the kernel's reason in the log.
        assert nice_values(server, "i:weighted") == [-6]
        return
    assert "instance threads in a cgroup of cpu_weight 400" in server.logs()
    version, path = cpu_cgroup_of(pid, tids[0])
    assert path.endswith(f"/inferd-{pid}/model-weighted"), path
    mount = startup.split(" groups under ")[1].split(f"/inferd-{pid}")[0]
    group = Path(mount) / f"inferd-{pid}" / "model-weighted"
    if version == 1:
        assert (group / "cpu.shares").read_text().strip() == "4096"  # 400 x 1024 / 100
    else:
        assert (group / "cpu.weight").read_text().strip() == "400"
    # The other threads stay in the process's group, outside any model's.
    assert not cpu_cgroup_of(pid, thread_ids(server, "i:free")[0])[1].endswith("model-weighted")


def test_cpu_weight_and_nice_together_fail_the_load(server):
    response = requests.post(f"{server.url}/v2/repository/models/weight_and_nice/load", timeout=60)
    assert response.status_code == 400, response.text
    assert "parameters[cpu_weight]" in response.json()["error"] and "one of 'cpu_weight' and 'nice'" in response.json()["error"]
