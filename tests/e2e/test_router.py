"""Routers (platform "router") end to end: rules on input size, a latency-budget parameter and a
tenant parameter send requests to local models and to a remote pool (a second inferd process, over
gRPC); the answer's routed_to says where; killing the remote mid-load opens the pool's breaker and
requests go to the fallback with nothing hanging past its deadline; a cascade with thresholds 0 and
1 keeps everything on tier 1 or escalates everything; invalid rule syntax is refused at load; the
remote's grpc.health.v1 Watch stream reports its serving status."""
import concurrent.futures
import time

import grpc
import numpy as np
import requests

from inferd_harness import Inferd, write_repository

IDENTITY = """
    backend: "identity"
    max_batch_size: 8
    input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
    output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
    """


def slow_identity(cost_us):
    return IDENTITY + f'parameters {{ key: "cost" value: {{ string_value: "fixed_us={cost_us}" }} }}\n'


def router(name, parameters):
    lines = [f'name: "{name}"', 'platform: "router"', "max_batch_size: 8",
             'input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]',
             'output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]']
    for key, value in parameters.items():
        lines.append(f'parameters {{ key: "{key}" value {{ string_value: "{value}" }} }}')
    return "\n".join(lines) + "\n"


def values(n, value=1.0):
    return [{"name": "INPUT0", "shape": [1, n], "datatype": "FP32", "data": [value] * n}]


def routed_to(response):
    assert response.status_code == 200, response.text
    return response.json()["parameters"]["routed_to"]


def start_remote(tmp_path):
    """The 'cloud': a second inferd serving `cloud_model` (HTTP and gRPC on ports of its own)."""
    repository = write_repository(tmp_path / "remote", {"cloud_model": (IDENTITY, [1])})
    return Inferd(repository)


def edge_repository(tmp_path, remote, extra_routers=None):
    pool = {"pool.cloud": f"grpc://{remote.grpc_target}", "pool_options.cloud": "model=cloud_model,timeout_ms=2000"}
    models = {
        "light": (IDENTITY, [1]),
        "heavy": (IDENTITY, [1]),
        "edge": (router("edge", {
            "route.1": "input_bytes(INPUT0) <= 16 -> model light",
            "route.2": "param.latency_budget_ms > 200 -> pool cloud",
            "route.3": "param.tenant == 'acme' or dim(INPUT0, 1) >= 100 -> model heavy@1",
            "route.default": "model heavy",
            "circuit_breaker.cloud": "consecutive_failures=3,cool_down_seconds=60,fallback=light",
            **pool}), [1]),
    }
    for name, parameters in (extra_routers or {}).items():
        models[name] = (router(name, {**parameters, **pool}), [1])
    return write_repository(tmp_path / "edge", models)


def test_rules_route_by_size_budget_and_parameter_to_local_and_remote_targets(tmp_path, grpc_stubs):
    remote = start_remote(tmp_path)
    edge = Inferd(edge_repository(tmp_path, remote))
    try:
        assert routed_to(edge.infer("edge", values(4))) == "model light"  # 16 bytes
        assert routed_to(edge.infer("edge", values(8), parameters={"latency_budget_ms": 500})) == "pool cloud"
        assert routed_to(edge.infer("edge", values(8), parameters={"latency_budget_ms": 50})) == "model heavy"
        assert routed_to(edge.infer("edge", values(8), parameters={"tenant": "acme"})) == "model heavy@1"
        assert routed_to(edge.infer("edge", values(100))) == "model heavy@1"
        # The remote's answer is the remote model's computation, under the router's name.
        cloud = edge.infer("edge", [{"name": "INPUT0", "shape": [1, 5], "datatype": "FP32", "data": [1, 2, 3, 4, 5]}],
                           parameters={"latency_budget_ms": 1000})
        body = cloud.json()
        assert body["model_name"] == "edge" and body["outputs"][0]["data"] == [1, 2, 3, 4, 5]
        assert remote.stats("cloud_model")[0]["inference_count"] == 2

        # gRPC carries the request parameters in and routed_to out.
        pb, services = grpc_stubs[0], grpc_stubs[1]
        stub = services.GRPCInferenceServiceStub(grpc.insecure_channel(edge.grpc_target))
        request = pb.ModelInferRequest(model_name="edge")
        request.parameters["latency_budget_ms"].int64_param = 300
        tensor = request.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 6])
        tensor.contents.fp32_contents.extend([7] * 6)
        reply = stub.ModelInfer(request, timeout=10)
        assert reply.parameters["routed_to"].string_param == "pool cloud"
        assert np.frombuffer(reply.raw_output_contents[0], dtype=np.float32).tolist() == [7] * 6

        stats = edge.stats("edge")[0]
        matches = {rule["rule"]: rule["matches"] for rule in stats["router_rules"]}
        assert matches == {"route.1": 1, "route.2": 3, "route.3": 2, "route.default": 1}
        targets = {t["target"]: t for t in stats["router_targets"]}
        assert targets["pool cloud"]["requests"] == 3 and targets["pool cloud"]["channel"] == "ready"
        assert targets["pool cloud"]["breaker"] == "closed"
        assert edge.metric("inferd_router_target_requests_total", model="edge", target="pool cloud") == 3
        assert edge.metric("inferd_router_rule_matches_total", model="edge", rule="route.3") == 2
        # A bad request is refused by the router's own config before any target.
        wrong = edge.infer("edge", [{"name": "NOPE", "shape": [1, 2], "datatype": "FP32", "data": [1, 2]}])
        assert wrong.status_code == 400 and "error" in wrong.json()
    finally:
        edge.kill()
        remote.kill()


def test_killing_the_remote_mid_load_opens_the_breaker_and_requests_go_to_the_fallback(tmp_path):
    remote = start_remote(tmp_path)
    edge = Inferd(edge_repository(tmp_path, remote))
    deadline_s = 2.0
    try:
        def call(i):
            start = time.monotonic()
            response = edge.infer("edge", values(8, float(i)), timeout=30,
                                  parameters={"latency_budget_ms": 500, "timeout": int(deadline_s * 1e6)})
            return response, time.monotonic() - start

        concurrency = 8
        with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
            first = [pool.submit(call, i) for i in range(40)]
            results = [f.result() for f in first]
            remote.kill()
            results += [f.result() for f in [pool.submit(call, i) for i in range(80)]]
        before = [r for r, _ in results[:40]]
        assert all(routed_to(r) == "pool cloud" for r in before)
        after = [r for r, _ in results[40:]]
        failed = [r for r in after if r.status_code != 200]
        # Until the breaker opens (3 failures in a row), calls to the dead pool fail fast with 503;
        # then every request goes to the fallback. The calls admitted before it opened fail too:
        # the 2 failures before the 3rd, and the 3rd with the others in flight beside it.
        assert len(failed) <= 2 + concurrency, [r.text for r in failed]
        assert all(r.status_code == 503 and "pool cloud" in r.json()["error"] for r in failed)
        assert [routed_to(r) for r in after[-40:]] == ["model light"] * 40
        # Nothing hung past its deadline.
        assert max(elapsed for _, elapsed in results) < deadline_s + 1.0
        assert edge.metric("inferd_circuit_breaker_state", model="edge", target="pool cloud") == 1
        assert {t["target"]: t for t in edge.stats("edge")[0]["router_targets"]}["pool cloud"]["breaker"] == "open"
    finally:
        edge.kill()
        remote.kill()


def test_a_remote_that_does_not_answer_in_time_is_a_deadline_error(tmp_path):
    remote_repository = write_repository(tmp_path / "remote", {"cloud_model": (slow_identity(1_500_000), [1])})
    remote = Inferd(remote_repository)
    edge = Inferd(edge_repository(tmp_path, remote))
    try:
        start = time.monotonic()
        late = edge.infer("edge", values(8), parameters={"latency_budget_ms": 500, "timeout": 300_000})
        took = time.monotonic() - start
        assert late.status_code == 504, late.text
        assert "router 'edge' target 'pool cloud'" in late.json()["error"]
        assert took < 1.2  # the gRPC deadline was the request's 300 ms, not the remote's 1.5 s
    finally:
        edge.kill()
        remote.kill()


def test_a_cascade_with_threshold_0_stays_local_and_with_1_escalates(tmp_path):
    remote = start_remote(tmp_path)
    cascades = {
        "never": {"cascade.tiers": "model light, pool cloud", "cascade.thresholds": "0",
                  "cascade.confidence": "max_softmax OUTPUT0"},
        "always": {"cascade.tiers": "model light, model heavy, pool cloud", "cascade.thresholds": "1, 1",
                   "cascade.confidence": "margin OUTPUT0"},
    }
    edge = Inferd(edge_repository(tmp_path, remote, cascades))
    try:
        for _ in range(3):
            kept = edge.infer("never", values(4, 0.5))
            assert routed_to(kept) == "model light" and kept.json()["parameters"]["tier"] == 1
            escalated = edge.infer("always", values(4, 0.5))
            assert routed_to(escalated) == "pool cloud" and escalated.json()["parameters"]["tier"] == 3
        assert remote.stats("cloud_model")[0]["inference_count"] == 3
        assert edge.stats("heavy")[0]["inference_count"] == 3
    finally:
        edge.kill()
        remote.kill()


def test_invalid_rule_syntax_is_refused_at_load_naming_the_rule(tmp_path):
    models = {
        "light": (IDENTITY, [1]),
        "broken": (router("broken", {"route.1": "input_bytes < -> model light", "route.default": "model light"}), [1]),
        "unknown_pool": (router("unknown_pool", {"route.default": "pool nowhere"}), [1]),
    }
    server = Inferd(write_repository(tmp_path, models), "--model-control-mode", "explicit", "--load-model", "light")
    try:
        broken = requests.post(server.url + "/v2/repository/models/broken/load", timeout=60)
        assert broken.status_code == 400, broken.text
        assert "router rule 'route.1'" in broken.json()["error"] and "character" in broken.json()["error"]
        unknown = requests.post(server.url + "/v2/repository/models/unknown_pool/load", timeout=60)
        assert unknown.status_code == 400 and "no parameters[pool.nowhere] defines it" in unknown.json()["error"]
        assert requests.get(server.url + "/v2/models/broken/ready", timeout=5).status_code != 200
        assert server.infer("light", values(2)).status_code == 200
    finally:
        server.kill()


def test_health_watch_streams_the_serving_status(tmp_path, grpc_stubs):
    remote = start_remote(tmp_path)
    try:
        health_pb, health_services = grpc_stubs[2], grpc_stubs[3]
        stub = health_services.HealthStub(grpc.insecure_channel(remote.grpc_target))
        stream = stub.Watch(health_pb.HealthCheckRequest(service=""), timeout=10)
        assert next(stream).status == health_pb.HealthCheckResponse.SERVING
        unknown = stub.Watch(health_pb.HealthCheckRequest(service="nothing"), timeout=10)
        assert next(unknown).status == health_pb.HealthCheckResponse.SERVICE_UNKNOWN
        unknown.cancel()
        remote.process.send_signal(15)  # SIGTERM: the server drains, tells its watchers, ends the stream
        assert next(stream).status == health_pb.HealthCheckResponse.NOT_SERVING
        assert remote.process.wait(timeout=20) == 0
    finally:
        remote.kill()


def test_a_remote_that_is_not_ready_leaves_the_rotation_by_health_checking(tmp_path):
    # Strict readiness and a model that fails to load: the remote serves, but grpc.health.v1 says
    # NOT_SERVING, so the pool's channel has no healthy backend and its calls fail without reaching
    # the remote; the breaker then sends them to the fallback.
    broken = 'backend: "no_such_backend"\nmax_batch_size: 1\n'
    remote = Inferd(write_repository(tmp_path / "remote", {"cloud_model": (IDENTITY, [1]), "broken": (broken, [1])}))
    edge = Inferd(edge_repository(tmp_path, remote))
    try:
        assert requests.get(remote.url + "/v2/health/ready", timeout=5).status_code != 200
        answers = [edge.infer("edge", values(8), parameters={"latency_budget_ms": 500, "timeout": 2_000_000})
                   for _ in range(6)]
        assert [a.status_code for a in answers[:3]] == [503] * 3, [a.text for a in answers]
        assert [routed_to(a) for a in answers[3:]] == ["model light"] * 3
        assert remote.stats("cloud_model")[0]["inference_count"] == 0  # never reached
        channel = {t["target"]: t for t in edge.stats("edge")[0]["router_targets"]}["pool cloud"]["channel"]
        assert channel == "transient_failure"
    finally:
        edge.kill()
        remote.kill()


def test_request_rates_are_forecast_per_model(tmp_path):
    server = Inferd(write_repository(tmp_path, {"light": (IDENTITY, [1])}), "--prediction-horizon-secs", "5")
    try:
        end = time.monotonic() + 4.5
        sent = 0
        while time.monotonic() < end:  # about 50 requests a second
            assert server.infer("light", values(2)).status_code == 200
            sent += 1
            time.sleep(0.02)
        predicted = server.metric("inferd_predicted_requests_per_second", model="light", horizon="5")
        rate = sent / 4.5
        assert 0.3 * rate < predicted < 2.0 * rate, (predicted, rate)
    finally:
        server.kill()
