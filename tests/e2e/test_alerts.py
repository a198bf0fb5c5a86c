"""3-sigma alerts (metrics/alert_board.h): a burst in a model's request rate raises a request_rate
alert at GET /v2/alerts and in inferd_anomaly_alert, it clears when the rate is back, a quiet model
stays quiet, and malformed alert flags stop the server with the reason."""
import concurrent.futures
import subprocess
import threading
import time

import requests

from inferd_harness import Inferd, inferd_binary, scalar_identity, write_repository


def one_value(server, model):
    body = {"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}]}
    return requests.post(f"{server.url}/v2/models/{model}/infer", json=body, timeout=10)


def active(server):
    response = requests.get(server.url + "/v2/alerts", timeout=5)
    assert response.status_code == 200, response.text
    return {(a["model"], a["series"]): a for a in response.json()["alerts"]}


def wait_for(predicate, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def test_a_burst_raises_a_request_rate_alert_that_clears(tmp_path):
    root = write_repository(tmp_path, {"steady": (scalar_identity(), [1]), "quiet": (scalar_identity(), [1])})
    server = Inferd(root, "--alert-window-secs", "30", "--alert-min-secs", "5", "--alert-cool-down-secs", "5")
    stop = threading.Event()

    def steady_traffic():  # about 10 requests a second
        while not stop.is_set():
            one_value(server, "steady")
            time.sleep(0.1)

    background = threading.Thread(target=steady_traffic)
    background.start()
    try:
        time.sleep(8)  # the baseline: 5 seconds at least, judged after
        assert active(server) == {}
        assert server.metric("inferd_anomaly_alert", model="steady", series="request_rate") == 0
        burst_end = time.time() + 1.5
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            def hammer():
                while time.time() < burst_end:
                    assert one_value(server, "steady").status_code == 200
            for future in [pool.submit(hammer) for _ in range(8)]:
                future.result()
        assert wait_for(lambda: ("steady", "request_rate") in active(server), 5), active(server)
        alert = active(server)[("steady", "request_rate")]
        assert alert["value"] > alert["mean"] + 3 * alert["stddev"], alert
        assert alert["since_unix_ms"] <= time.time() * 1000
        assert server.metric("inferd_anomaly_alert", model="steady", series="request_rate") == 1
        assert server.metric("inferd_anomaly_alert", model="steady", series="error_ratio") == 0
        assert ("quiet", "request_rate") not in active(server)
        # The rate is back to its baseline: the alert clears.
        assert wait_for(lambda: ("steady", "request_rate") not in active(server), 10), active(server)
        assert server.metric("inferd_anomaly_alert", model="steady", series="request_rate") == 0
        refused = requests.post(server.url + "/v2/alerts", json={}, timeout=5)
        assert refused.status_code == 405 and "error" in refused.json()
    finally:
        stop.set()
        background.join()
        server.kill()


def test_malformed_alert_flags_stop_the_server_with_the_reason(tmp_path):
    result = subprocess.run([inferd_binary(), "serve", "--model-repository", str(tmp_path), "--http-port", "0",
                             "--grpc-port", "0", "--metrics-port", "0", "--alert-window-secs", "10",
                             "--alert-min-secs", "20"], capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert "min_samples" in result.stderr + result.stdout
