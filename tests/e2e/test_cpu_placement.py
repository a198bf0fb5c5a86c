"""Isolation between models by CPU placement and priority: parameters[cpus] pins a model's
instance threads (named "i:MODEL") to its CPUs, split evenly among the instances, and sizes their
OpenMP teams to match; other models' threads keep the whole mask. parameters[nice] sets the
instance threads' nice value. A CPU the process may not use fails the load."""
import os
from pathlib import Path

import pytest
import requests

from inferd_harness import Inferd, plus_model, scalar_identity

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to place models apart")

FIRST, LAST = min(os.sched_getaffinity(0)), max(os.sched_getaffinity(0))


def cpus_parameter(cpus):
    return f'parameters {{ key: "cpus" value: {{ string_value: "{cpus}" }} }}\n'


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("placement_repo")
    models = {
        "pinned": scalar_identity(instances=2) + cpus_parameter(LAST),
        "onnx_pinned": 'platform: "onnxruntime_onnx"\nmax_batch_size: 8\n' + cpus_parameter(LAST),
        "free": scalar_identity(),
        "background": scalar_identity() + 'parameters { key: "nice" value: { string_value: "12" } }\n',
        "elsewhere": scalar_identity() + cpus_parameter("1000"),
    }
    for name, config in models.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(config)
    (repo / "onnx_pinned" / "1" / "model.onnx").write_bytes(plus_model(1))
    process = Inferd(repo, "--model-control-mode", "explicit",
                     *[arg for model in ("pinned", "onnx_pinned", "free", "background") for arg in ("--load-model", model)])
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
