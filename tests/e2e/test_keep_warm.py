"""Keep-warm (keep_warm_interval_seconds) and the per-version load, warmup and first-request
times: in /metrics, in the repository index and in `inferd models`."""
import time

import requests

from inferd_harness import Inferd, scalar_identity, write_repository


def keep_warm_config(interval, warmup=""):
    return scalar_identity(cost_us=200) + (
        f'parameters {{ key: "keep_warm_interval_seconds" value: {{ string_value: "{interval}" }} }}\n' + warmup)


def runs(server, model):
    try:
        return server.metric("inferd_keep_warm_runs_total", model=model, version="1")
    except KeyError:
        return 0


def infer(server, model):
    response = server.infer(model, [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}])
    assert response.status_code == 200, response.text


def test_an_idle_model_is_kept_warm_and_a_busy_one_is_left_alone(tmp_path):
    repo = write_repository(tmp_path / "repo", {"warm": (keep_warm_config(1), [1]),
                                               "cold": (scalar_identity(cost_us=200), [1])})
    server = Inferd(repo)
    try:
        time.sleep(3.6)
        idle_runs = runs(server, "warm")
        assert 2 <= idle_runs <= 4, idle_runs  # about one per second of idleness
        assert runs(server, "cold") == 0
        stats = server.stats("warm")[0]
        assert stats["inference_count"] == 0 and stats["inference_stats"]["success"]["count"] == 0  # not requests
        # Busy (a request every 0.2 s): never idle for a second, so no keep-warm run.
        before = runs(server, "warm")
        for _ in range(15):
            infer(server, "warm")
            time.sleep(0.2)
        assert runs(server, "warm") == before
        assert server.stats("warm")[0]["inference_stats"]["success"]["count"] == 15
    finally:
        server.stop()


def test_a_model_whose_inputs_cannot_be_zeros_needs_a_warmup_sample(tmp_path):
    config = ('backend: "identity"\nmax_batch_size: 0\n'
              'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
              'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
              'parameters { key: "keep_warm_interval_seconds" value: { string_value: "1" } }\n')
    sample = ('model_warmup [ { name: "one" batch_size: 1 inputs { key: "INPUT0" value: '
              '{ data_type: TYPE_FP32 dims: [ 3 ] zero_data: true } } } ]\n')
    bad_value = scalar_identity() + 'parameters { key: "keep_warm_interval_seconds" value: { string_value: "soon" } }\n'
    repo = write_repository(tmp_path / "repo", {"variable": (config, [1]), "sampled": (config + sample, [1]),
                                               "badvalue": (bad_value, [1])})
    server = Inferd(repo, "--strict-readiness", "false")
    try:
        index = {e["name"]: e for e in requests.post(server.url + "/v2/repository/index", json={}, timeout=5).json()}
        assert index["variable"]["state"] == "UNAVAILABLE"
        assert "model_warmup sample" in index["variable"]["reason"]
        assert index["badvalue"]["state"] == "UNAVAILABLE" and "keep_warm_interval_seconds" in index["badvalue"]["reason"]
        assert index["sampled"]["state"] == "READY"
        time.sleep(2.5)
        assert runs(server, "sampled") >= 1
    finally:
        server.stop()


def test_load_warmup_and_first_request_times_per_version(tmp_path):
    warmup = ('model_warmup [ { name: "w" batch_size: 1 count: 5 inputs { key: "INPUT0" value: '
              '{ data_type: TYPE_FP32 dims: [ 1 ] zero_data: true } } } ]\n')
    repo = write_repository(tmp_path / "repo", {"timed": (scalar_identity(cost_us=20000) + warmup, [1])})
    server = Inferd(repo)
    try:
        entry = requests.post(server.url + "/v2/repository/index", json={}, timeout=5).json()[0]
        assert entry["load_seconds"] >= entry["warmup_seconds"] >= 0.1  # 5 warmup runs of 20 ms
        assert entry["first_request_seconds"] == -1
        assert server.metric("inferd_model_warmup_duration_seconds", model="timed", version="1") >= 0.1
        try:
            server.metric("inferd_model_first_request_duration_seconds", model="timed")
            raise AssertionError("the first request's time is exported before any request")
        except KeyError:
            pass
        infer(server, "timed")
        infer(server, "timed")
        first = server.metric("inferd_model_first_request_duration_seconds", model="timed", version="1")
        assert 0.02 <= first < 5
        entry = requests.post(server.url + "/v2/repository/index", json={}, timeout=5).json()[0]
        assert abs(entry["first_request_seconds"] - first) < 1e-6
    finally:
        server.stop()
