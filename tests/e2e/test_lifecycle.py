"""Start-up with broken models, explicit model control, and the SIGTERM drain."""
import threading
import time

import requests

from inferd_harness import scalar_identity, write_repository

IDENTITY = scalar_identity(max_batch_size=4)

ONE = [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [3]}]


def test_broken_models_are_reported_and_the_rest_serve(fresh_server, tmp_path):
    repo = write_repository(tmp_path, {
        "good": (IDENTITY, [1]),
        "unknown_field": (IDENTITY + "\nshiny: true\n", [1]),
        "no_version": (IDENTITY, []),
        "missing_file": (IDENTITY + '\ndefault_model_filename: "model.onnx"\n', [1]),
        "bad_dims": (IDENTITY.replace('"INPUT0", data_type: TYPE_FP32, dims: [ 1 ]', '"INPUT0", data_type: TYPE_FP32, dims: [ 0 ]'), [1]),
    })
    server = fresh_server(repo=repo)
    assert server.infer("good", ONE).status_code == 200
    assert requests.get(server.url + "/v2/health/ready").status_code == 503
    index = {e["name"]: e for e in requests.post(server.url + "/v2/repository/index").json()}
    assert index["good"]["state"] == "READY"
    expectations = {"unknown_field": "shiny", "no_version": "no version folder",
                    "missing_file": "model.onnx", "bad_dims": "input 'INPUT0'"}
    for name, text in expectations.items():
        assert index[name]["state"] == "UNAVAILABLE", name
        assert text in index[name]["reason"], index[name]
        ready = requests.get(f"{server.url}/v2/models/{name}/ready")
        assert ready.status_code == 503 and ready.json()["ready"] is False
        assert text in server.logs()
    assert "config.pbtxt" in index["unknown_field"]["reason"]  # names the file


def test_explicit_mode_load_and_unload(fresh_server, tmp_path):
    repo = write_repository(tmp_path, {"a": (IDENTITY, [1]), "b": (IDENTITY, [1])})
    server = fresh_server("--model-control-mode", "explicit", "--load-model", "a", repo=repo)
    assert server.infer("a", ONE).status_code == 200
    assert server.infer("b", ONE).status_code == 404
    index = {e["name"]: e for e in requests.post(server.url + "/v2/repository/index").json()}
    assert index["a"]["state"] == "READY" and "state" not in index["b"]
    assert requests.post(server.url + "/v2/repository/models/b/load").status_code == 200
    assert server.infer("b", ONE).json()["outputs"][0]["data"] == [3.0]
    assert requests.post(server.url + "/v2/repository/models/a/unload").status_code == 200
    assert server.infer("a", ONE).status_code == 404
    assert requests.post(server.url + "/v2/repository/models/zzz/load").status_code == 404
    # a new version appears on disk and a load picks it up
    (tmp_path / "b" / "2").mkdir()
    assert requests.post(server.url + "/v2/repository/models/b/load").status_code == 200
    assert server.infer("b", ONE).json()["model_version"] == "2"
    assert server.stop() == 0


def test_sigterm_drains_in_flight_requests(fresh_server):
    server = fresh_server()
    results = []

    def call(value):
        response = server.infer("slow", [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [value]}])
        results.append((value, response.status_code, response.json()))

    threads = [threading.Thread(target=call, args=(v,)) for v in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(0.25)  # all four are executing (600 ms each)
    server.process.send_signal(15)
    time.sleep(0.1)
    # draining: no new connections
    try:
        requests.get(server.url + "/v2/health/live", timeout=1)
        refused = False
    except requests.ConnectionError:
        refused = True
    assert refused
    for thread in threads:
        thread.join()
    assert server.process.wait(timeout=20) == 0, server.logs()
    assert sorted(v for v, code, _ in results if code == 200) == [0, 1, 2, 3], results
    for value, _, body in results:
        assert body["outputs"][0]["data"] == [float(value)]


def test_drain_delay_leaves_rotation_before_refusing_anything(fresh_server, tmp_path):
    """--drain-delay-secs: after SIGTERM, readiness says 503 while inferences are still answered;
    a second SIGTERM ends the wait, and the drain exits 0."""
    repo = write_repository(tmp_path, {"quick": (scalar_identity(0), [1])})
    server = fresh_server("--drain-delay-secs", "30", repo=repo)
    server.process.send_signal(15)
    deadline = time.time() + 10
    while requests.get(server.url + "/v2/health/ready", timeout=2).status_code != 503:
        assert time.time() < deadline, "readiness did not turn false"
        time.sleep(0.05)
    for _ in range(5):  # still served on new connections, as a load balancer's last requests are
        answer = server.infer("quick", ONE)
        assert answer.status_code == 200, answer.text
    assert requests.get(server.url + "/v2/health/live", timeout=2).status_code == 200
    started = time.time()
    server.process.send_signal(15)
    assert server.process.wait(timeout=20) == 0, server.logs()
    assert time.time() - started < 10  # not the 30 s delay
    assert "received signal 15 again: draining now" in server.logs()


def test_exit_timeout_cancels_what_is_still_queued(fresh_server, tmp_path):
    repo = write_repository(tmp_path, {"one_at_a_time": (scalar_identity(500000, "dynamic_batching { }"), [1])})
    server = fresh_server("--exit-timeout-secs", "1", repo=repo)
    codes = []

    def call():
        codes.append(server.infer("one_at_a_time", ONE).status_code)

    threads = [threading.Thread(target=call) for _ in range(6)]  # 3 s of work, queued one by one
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    started = time.time()
    server.process.send_signal(15)
    assert server.process.wait(timeout=20) == 0, server.logs()
    assert time.time() - started < 2.5  # 1 s of exit timeout plus the execution then running
    for thread in threads:
        thread.join()
    assert len(codes) == 6  # every client got an answer
    assert 200 in codes and 503 in codes, codes
    assert "cancelling queued" in server.logs()


def test_strict_readiness_decides_server_readiness_on_every_surface(fresh_server, grpc_stubs, tmp_path):
    """A model that fails to load keeps the server not ready by default (Triton's --strict-readiness
    true); with false the server is ready once up, and the broken model alone reports not ready."""
    import grpc
    pb, services, health, health_services = grpc_stubs
    repo = write_repository(tmp_path, {"good": (IDENTITY, [1]), "broken": (IDENTITY + "\nshiny: true\n", [1])})
    for strict, ready in (("true", False), ("false", True)):
        server = fresh_server("--strict-readiness", strict, repo=repo)
        channel = grpc.insecure_channel(server.grpc_target)
        http_ready = requests.get(server.url + "/v2/health/ready")
        assert http_ready.status_code == (200 if ready else 503), strict
        assert http_ready.json() == {"ready": ready}
        assert services.GRPCInferenceServiceStub(channel).ServerReady(pb.ServerReadyRequest()).ready == ready
        status = health_services.HealthStub(channel).Check(health.HealthCheckRequest()).status
        assert status == (health.HealthCheckResponse.SERVING if ready else health.HealthCheckResponse.NOT_SERVING)
        # The models' own readiness does not depend on the flag.
        assert requests.get(server.url + "/v2/models/good/ready").status_code == 200
        assert requests.get(server.url + "/v2/models/broken/ready").status_code == 503
        assert server.infer("good", ONE).status_code == 200
        channel.close()
        assert server.stop() == 0


def test_model_readiness_is_answered_from_memory(fresh_server, tmp_path):
    """Probes never list the repository: with its folder gone, every model keeps its answer."""
    import shutil
    repo = write_repository(tmp_path / "repo", {"good": (IDENTITY, [1]), "broken": (IDENTITY + "\nshiny: true\n", [1]),
                                                "idle": (IDENTITY, [1])})
    server = fresh_server("--model-control-mode", "explicit", "--load-model", "good", "--load-model", "broken",
                          repo=repo)
    shutil.rmtree(repo)
    assert requests.get(server.url + "/v2/models/good/ready").status_code == 200
    broken = requests.get(server.url + "/v2/models/broken/ready")
    assert broken.status_code == 503 and "shiny" in broken.json()["error"]
    idle = requests.get(server.url + "/v2/models/idle/ready")
    assert idle.status_code == 503 and "not loaded" in idle.json()["error"]
    assert requests.get(server.url + "/v2/models/nope/ready").status_code == 404
    assert requests.get(server.url + "/v1/models/good").json()["model_version_status"][0]["state"] == "AVAILABLE"
    assert requests.get(server.url + "/v1/models/nope").status_code == 404
