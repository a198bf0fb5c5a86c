"""Starts the real inferd binary on free loopback ports and stops it the way Kubernetes would."""
import os
import re
import signal
import socket
import subprocess
import tempfile
import textwrap
import time
import weakref
from pathlib import Path

import requests

REPO_ROOT = Path(__file__).resolve().parents[2]


def inferd_binary():
    path = os.environ.get("INFERD_BIN") or str(REPO_ROOT / "build" / "src" / "server" / "inferd")
    if not Path(path).exists():
        raise RuntimeError(f"inferd binary not found at {path}; build first or set INFERD_BIN")
    return path


def built_with_sanitizers():
    """ASan keeps freed memory in quarantine, so resident memory says nothing about the program."""
    with open(inferd_binary(), "rb") as binary:
        return b"AddressSanitizer" in binary.read()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scalar_identity(cost_us=0, scheduling="", max_batch_size=1, instances=1):
    """config.pbtxt of an identity model on one FP32 value, taking `cost_us` of real work per run."""
    lines = ['backend: "identity"', f"max_batch_size: {max_batch_size}",
             'input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 1 ] } ]',
             'output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 1 ] } ]']
    if scheduling:
        lines.append(scheduling)
    if instances > 1:
        lines.append(f"instance_group [ {{ count: {instances} }} ]")
    if cost_us:
        lines.append(f'parameters {{ key: "cost" value: {{ string_value: "fixed_us={cost_us}" }} }}')
    return "\n".join(lines) + "\n"



def plus_model(constant):
    """An ONNX model y = x + constant, x and y [N, 1] FP32: the answer tells which file served it."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "c"], ["y"])], "plus",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])],
        [numpy_helper.from_array(np.array([constant], np.float32), "c")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()

def write_repository(root, models):
    """models: {name: (config_text, [versions])}"""
    root = Path(root)
    for name, (config, versions) in models.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / "config.pbtxt").write_text(textwrap.dedent(config))
        for version in versions:
            (root / name / str(version)).mkdir(exist_ok=True)
    return root


class Inferd:
    _started = weakref.WeakSet()

    def __init__(self, repository, *extra_args, preexec=None, ports=None):
        """preexec: run in the child before inferd starts (join a cgroup, set the affinity).
        ports: (http, metrics, grpc) to listen on, e.g. a restarted replica's. By default inferd
        binds port 0 and its log says which ports it got: a port found free beforehand could be
        taken by another test's server or an outgoing connection before inferd binds it (CI lost
        that race once: "cannot listen on ...: Address already in use")."""
        self._killed = False
        self.http_port, self.metrics_port, self.grpc_port = ports or (0, 0, 0)
        self.log = tempfile.NamedTemporaryFile(prefix="inferd-", suffix=".log", delete=False)
        self.process = subprocess.Popen(
            [inferd_binary(), "serve", "--model-repository", str(repository),
             "--http-address", "127.0.0.1", "--http-port", str(self.http_port),
             "--metrics-port", str(self.metrics_port),
             "--grpc-address", "127.0.0.1", "--grpc-port", str(self.grpc_port), *extra_args],
            stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=preexec)
        Inferd._started.add(self)
        self._wait_live()

    @property
    def grpc_target(self):
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def url(self):
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def metrics_url(self):
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    # Start-up loads run before the server listens, and a model with planned
    # batch sizes times its kernels per shape: on CI's 2 cores, with the fuzzers
    # running beside the e2e suite, resnet18's load alone passed 20 s.
    def _wait_live(self, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"inferd exited early:\n{self.logs()}")
            if self._read_bound_ports():
                try:
                    if requests.get(self.url + "/v2/health/live", timeout=1).status_code == 200:
                        return
                except requests.RequestException:
                    pass
            time.sleep(0.05)
        raise RuntimeError(f"inferd did not come up:\n{self.logs()}")

    _SERVING = re.compile(r"inferd serving: HTTP on [^:]+:(\d+), (?:gRPC on [^:]+:(\d+), )?metrics on [^:]+:(\d+)/")

    def _read_bound_ports(self):
        """True once inferd has said where it listens (it says so after every listener is bound)."""
        serving = Inferd._SERVING.search(self.logs())
        if not serving:
            return False
        self.http_port = int(serving.group(1))
        self.grpc_port = int(serving.group(2)) if serving.group(2) else self.grpc_port
        self.metrics_port = int(serving.group(3))
        return True

    def logs(self):
        return Path(self.log.name).read_text(errors="replace")

    def stop(self, timeout=90):
        """SIGTERM, then the exit code (must be 0 for a clean drain). The wait is generous: under
        ASan, with another build on the same two cores, a server that had loaded resnet18 once took
        over 30 s to exit (not measured further; LeakSanitizer's heap walk at exit is a likely part)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)

    def kill(self):
        self._killed = True
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    @classmethod
    def crashed(cls):
        """Servers that ended by themselves with a failure (a signal, a non-zero exit): a test that
        then fails sees only a refused connection, so conftest.py adds these servers' logs."""
        return [server for server in list(cls._started)
                if not server._killed and server.process.poll() not in (None, 0)]

    # --- helpers -------------------------------------------------------------------------------
    def infer(self, model, inputs, version=None, outputs=None, parameters=None, timeout=30, **request_kwargs):
        body = {"inputs": inputs}
        if outputs is not None:
            body["outputs"] = outputs
        if parameters is not None:
            body["parameters"] = parameters
        path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/infer"
        return requests.post(self.url + path, json=body, timeout=timeout, **request_kwargs)

    def stats(self, model):
        return requests.get(f"{self.url}/v2/models/{model}/stats", timeout=5).json()["model_stats"]

    def metric(self, name, **labels):
        """Value of one Prometheus series (labels must match exactly the given subset)."""
        text = requests.get(self.metrics_url, timeout=5).text
        for line in text.splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            if all(f'{k}="{v}"' in line for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
        raise KeyError(f"{name} {labels} not in metrics")
