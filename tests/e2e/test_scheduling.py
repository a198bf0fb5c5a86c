"""Dynamic batching, queue limits and timeouts, observed from outside through /stats and /metrics."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import requests


def slow_request(server, value):
    return server.infer("batched_slow", [
        {"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": [value] * 4},
        {"name": "INPUT1", "shape": [1, 4], "datatype": "FP32", "data": [1] * 4}])


def test_concurrent_requests_are_batched_and_answers_stay_per_request(server):
    before = server.stats("batched_slow")[0]
    with ThreadPoolExecutor(max_workers=16) as pool:
        responses = list(pool.map(lambda v: slow_request(server, v), range(48)))
    for value, response in enumerate(responses):
        assert response.status_code == 200, response.text
        outputs = {o["name"]: o["data"] for o in response.json()["outputs"]}
        assert outputs["OUTPUT0"] == [value + 1.0] * 4  # every client gets its own rows back
        assert outputs["OUTPUT1"] == [value - 1.0] * 4
    after = server.stats("batched_slow")[0]
    requests_done = after["inference_count"] - before["inference_count"]
    executions = after["execution_count"] - before["execution_count"]
    assert requests_done == 48
    assert executions < requests_done / 3, f"{executions} executions for {requests_done} requests"
    assert server.metric("inferd_batch_size_count", model="batched_slow") == after["execution_count"]


def one_value(server, model, timeout=None, results=None, key=None):
    parameters = {"timeout": timeout} if timeout else None
    response = server.infer(model, [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [1]}],
                            parameters=parameters)
    if results is not None:
        results[key] = response
    return response


def run_concurrently(server, model, count, stagger=0.05):
    results = {}
    threads = []
    for i in range(count):
        thread = threading.Thread(target=one_value, args=(server, model, None, results, i))
        thread.start()
        threads.append(thread)
        time.sleep(stagger)
    for thread in threads:
        thread.join()
    return [results[i] for i in range(count)]


def test_full_queue_answers_503_at_once(server):
    # One request executes (400 ms), one waits in the queue (max_queue_size 1), the third is refused.
    start = time.time()
    responses = run_concurrently(server, "queue_one", 3)
    codes = sorted(r.status_code for r in responses)
    assert codes == [200, 200, 503], [r.text for r in responses]
    refused = next(r for r in responses if r.status_code == 503)
    assert "full" in refused.json()["error"]
    assert refused.elapsed.total_seconds() < 0.2  # rejected at once, not after waiting
    assert time.time() - start < 5
    assert server.metric("inferd_requests_total", model="queue_one", outcome="rejected") >= 1


def test_queue_timeout_reject_and_delay(server):
    # REJECT: the second request waits longer than 100 ms behind a 400 ms execution and is expired.
    responses = run_concurrently(server, "timeout_reject", 2)
    assert [r.status_code for r in responses] == [200, 504], [r.text for r in responses]
    assert "timed out" in responses[1].json()["error"]
    assert server.metric("inferd_requests_total", model="timeout_reject", outcome="timeout") >= 1
    # DELAY: the expired request still runs.
    responses = run_concurrently(server, "timeout_delay", 2)
    assert [r.status_code for r in responses] == [200, 200]


def test_per_request_timeout_shortens_the_default(server):
    # timeout_override: default 5 s, overrides allowed, 400 ms per execution.
    results = {}
    first = threading.Thread(target=one_value, args=(server, "timeout_override", None, results, "busy"))
    first.start()
    time.sleep(0.05)
    impatient = one_value(server, "timeout_override", timeout=100_000)  # 100 ms < the 400 ms ahead
    first.join()
    assert results["busy"].status_code == 200
    assert impatient.status_code == 504, impatient.text
    patient = run_concurrently(server, "timeout_override", 2)  # no request timeout: the default holds
    assert [r.status_code for r in patient] == [200, 200]


def test_instances_run_batches_in_parallel(server):
    # "slow": 4 instances, no dynamic batching, 600 ms per execution. Four requests at once finish
    # together, in about one execution time, not four.
    start = time.time()
    with ThreadPoolExecutor(max_workers=4) as pool:
        responses = list(pool.map(lambda v: server.infer("slow", [
            {"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [v]}]), range(4)))
    elapsed = time.time() - start
    assert [r.status_code for r in responses] == [200] * 4
    assert elapsed < 1.5, elapsed
    assert server.stats("slow")[0]["execution_count"] >= 4
