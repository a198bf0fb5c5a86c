"""Three inferd replicas behind HAProxy (Debian's haproxy), which health-checks /v2/health/ready,
under continuous HTTP load: a rolling restart with SIGTERM loses no request, and a SIGKILL loses at
most the requests in flight at the killed replica. The counts are printed (pytest -s) and recorded
in docs/DEPLOYMENT.md."""
import concurrent.futures
import shutil
import subprocess
import threading
import time

import pytest
import requests

from inferd_harness import Inferd, free_port, scalar_identity, write_repository

REPLICAS = 3
CLIENTS = 6
# On SIGTERM a replica says "not ready" for this long while it still serves, then drains: HAProxy,
# polling readiness every 200 ms, has taken it out of rotation before it refuses anything.
DRAIN_DELAY = ["--drain-delay-secs", "1"]


def haproxy_config(port, replicas):
    servers = "\n".join(f"    server r{i} 127.0.0.1:{r.http_port} check" for i, r in enumerate(replicas))
    return f"""
global
    maxconn 512
defaults
    mode http
    timeout connect 1s
    timeout client 30s
    timeout server 30s
    # A connection refused (a replica gone before a check saw it) is retried on another replica.
    retries 3
    option redispatch 1
frontend inferd
    bind 127.0.0.1:{port}
    default_backend replicas
backend replicas
    balance roundrobin
    option httpchk GET /v2/health/ready
    http-check expect status 200
    default-server inter 200ms fall 1 rise 2
{servers}
"""


class Load:
    """CLIENTS threads sending requests through the balancer until stopped; counts outcomes."""

    def __init__(self, url):
        self.url = url + "/v2/models/identity/infer"
        self.body = {"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}]}
        self.lock = threading.Lock()
        self.ok = 0
        self.failures = []  # (time, what)
        self.stopping = threading.Event()
        self.pool = concurrent.futures.ThreadPoolExecutor(CLIENTS)
        self.futures = [self.pool.submit(self.client) for _ in range(CLIENTS)]

    def client(self):
        session = requests.Session()
        while not self.stopping.is_set():
            try:
                answer = session.post(self.url, json=self.body, timeout=10)
                failed = None if answer.status_code == 200 else f"HTTP {answer.status_code}: {answer.text[:200]}"
            except requests.RequestException as error:
                failed = f"{type(error).__name__}: {error}"
            with self.lock:
                if failed:
                    self.failures.append((time.time(), failed))
                else:
                    self.ok += 1

    def counts(self):
        with self.lock:
            return self.ok, list(self.failures)

    def stop(self):
        self.stopping.set()
        for future in self.futures:
            future.result()
        self.pool.shutdown()


@pytest.fixture
def cluster(tmp_path):
    binary = shutil.which("haproxy")
    assert binary, "haproxy missing: scripts/setup.sh installs Debian's haproxy"
    repository = write_repository(tmp_path / "repo", {"identity": (scalar_identity(
        2000, "dynamic_batching { max_queue_delay_microseconds: 1000 }", max_batch_size=8), [1])})
    replicas = [Inferd(repository, *DRAIN_DELAY) for _ in range(REPLICAS)]
    port = free_port()
    (tmp_path / "haproxy.cfg").write_text(haproxy_config(port, replicas))
    log = open(tmp_path / "haproxy.log", "w")
    balancer = subprocess.Popen([binary, "-f", str(tmp_path / "haproxy.cfg"), "-db"], stdout=log,
                                stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: requests.get(url + "/v2/health/ready", timeout=1).status_code == 200, "haproxy up")
    time.sleep(1)  # every replica passes its first two checks
    yield repository, replicas, url
    balancer.terminate()
    balancer.wait(timeout=10)
    log.close()
    for replica in replicas:
        replica.kill()


def wait_until(condition, what, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if condition():
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def served_by_each(replicas):
    """Successful requests each replica has answered so far."""
    counts = []
    for replica in replicas:
        stats = requests.get(replica.url + "/v2/models/identity/stats", timeout=5).json()
        counts.append(stats["model_stats"][0]["inference_stats"]["success"]["count"])
    return counts


def test_a_rolling_restart_loses_no_request_and_a_sigkill_only_those_in_flight(cluster):
    repository, replicas, url = cluster
    load = Load(url)
    try:
        wait_until(lambda: all(count > 0 for count in served_by_each(replicas)), "HAProxy balancing over all three")

        # The rolling update: each replica in turn gets SIGTERM, drains, exits 0 and comes back on
        # its ports; the next goes only once HAProxy sends to the new one.
        for i, old in enumerate(replicas):
            assert old.stop() == 0, old.logs()
            assert "not ready, still serving for 1 s before draining" in old.logs()
            replicas[i] = Inferd(repository, *DRAIN_DELAY, ports=(old.http_port, old.metrics_port, old.grpc_port))
            wait_until(lambda: served_by_each([replicas[i]])[0] > 0, f"traffic at the new replica {i}")
        ok_after_rolling, failures = load.counts()
        print(f"\nrolling restart of {REPLICAS} replicas under load: {ok_after_rolling} requests answered, "
              f"{len(failures)} failed")
        assert failures == [], failures[:5]

        # SIGKILL: the requests in flight at that replica may fail (at most one per client, when
        # they fail); those sent after, to its closed port, are retried elsewhere by HAProxy.
        killed_at = time.time()
        replicas[0].kill()
        time.sleep(3)
        ok_total, failures = load.counts()
        print(f"SIGKILL of one replica under load: {ok_total - ok_after_rolling} requests answered in the 3 s "
              f"after, {len(failures)} failed: {sorted({what for _, what in failures})}")
        assert len(failures) <= CLIENTS, failures
        assert all(killed_at <= when <= killed_at + 2 for when, _ in failures), failures
        # Afterwards the two left serve everything.
        before = load.counts()[0]
        time.sleep(1)
        assert load.counts()[0] > before and len(load.counts()[1]) == len(failures)
    finally:
        load.stop()
