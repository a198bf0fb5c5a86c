"""Adaptive batching with a latency target: parameters[latency_target_ms] on a dynamically batched
model. The batcher measures execution times per batch size and the arrival rate, and keeps batches
to what fits the target (scheduler/batch_policy.h); inferd_batch_size_limit shows its choice."""
import json
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from inferd_harness import Inferd, inferd_binary, scalar_identity

# 10 ms + 2 ms per row of real work; a 100 ms target plans with 75 ms, half of it per execution:
# 10 + 2 * 13 = 36 ms, so about 13 rows (fewer while the spread of the timings is still high).
COST = 'parameters { key: "cost" value: { string_value: "fixed_us=10000,per_item_us=2000" } }'
TARGET = 'parameters { key: "latency_target_ms" value: { string_value: "100" } }'
LONG_DELAY = "dynamic_batching { max_queue_delay_microseconds: 300000 }"


def config(extra, scheduling="dynamic_batching { }"):
    return scalar_identity(max_batch_size=64, scheduling=scheduling) + COST + "\n" + extra + "\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("latency_target_repo")
    models = {"targeted": config(TARGET), "untargeted": config(""),
              "targeted_delay": config(TARGET, LONG_DELAY), "untargeted_delay": config("", LONG_DELAY),
              "bad_target": config(TARGET.replace('"100"', '"soon"')),
              "target_without_batcher": scalar_identity(max_batch_size=8) + TARGET + "\n"}
    for name, text in models.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(text)
    process = Inferd(repo, "--model-control-mode", "explicit", *[arg for model in ("targeted", "untargeted", "targeted_delay", "untargeted_delay")
                                                        for arg in ("--load-model", model)])
    yield process
    assert process.stop() == 0, process.logs()


def send(server, model, value):
    response = server.infer(model, [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [value]}])
    assert response.status_code == 200, response.text
    return response.json()["outputs"][0]["data"][0]


def burst(server, model, count=32):
    with ThreadPoolExecutor(max_workers=count) as pool:
        answers = list(pool.map(lambda v: send(server, model, v), range(count)))
    assert answers == list(range(count))  # every client gets its own row back


def largest_batch(server, model):
    """The upper bound of the smallest batch-size histogram bucket holding every execution."""
    text = requests.get(server.metrics_url, timeout=5).text
    buckets = []
    for line in text.splitlines():
        if line.startswith("inferd_batch_size_bucket{") and f'model="{model}"' in line:
            bound = line.split('le="')[1].split('"')[0]
            buckets.append((float("inf") if bound == "+Inf" else float(bound), float(line.rsplit(" ", 1)[1])))
    buckets.sort()
    total = buckets[-1][1]
    return next(bound for bound, count in buckets if count == total)


def test_the_limit_starts_at_max_batch_size_and_settles_on_what_fits_the_target(server):
    # Nothing measured yet: the batcher does not guess.
    assert server.metric("inferd_batch_size_limit", model="targeted", version="1") == 64
    for _ in range(3):
        burst(server, "targeted")
    time.sleep(0.5)  # the burst's arrival rate fades, so the limit is the target's, not overload's
    limit = server.metric("inferd_batch_size_limit", model="targeted", version="1")
    assert 4 <= limit <= 20, limit
    # A model without the parameter keeps Triton's rules and has no such series.
    with pytest.raises(KeyError):
        server.metric("inferd_batch_size_limit", model="untargeted", version="1")


def test_an_open_loop_rate_is_batched_within_the_target(server):
    # 150 requests/s: one row at a time (12 ms) clears 83/s, so the batcher waits for batches, as
    # large as the oldest request can wait for and still finish within the budget (about 8 rows).
    before = server.stats("targeted")[0]
    result = subprocess.run([inferd_binary(), "bench", "-u", server.url.split("//")[1], "-m", "targeted",
                             "--request-rate", "150", "--duration", "3", "--warmup-ms", "500", "--format", "json"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    row = json.loads(result.stdout)[0]
    after = server.stats("targeted")[0]
    assert row["errors"] == 0, row
    rows = after["inference_count"] - before["inference_count"]
    executions = after["execution_count"] - before["execution_count"]
    assert executions * 3 <= rows, (executions, rows)        # batched: 3 rows or more per execution
    assert largest_batch(server, "targeted") <= 32           # bounded by the target, not max_batch_size 64
    # The target, with room for the client and for a sanitized build sharing 2 cores with other tests.
    assert row["p99_ms"] <= 2.5 * 100, row


def test_a_long_queue_delay_yields_to_the_target(server):
    # max_queue_delay 300 ms: without a target every lone request waits it out; with one, a request
    # that no other will join soon goes at once.
    def paced_latency(model):
        send(server, model, 0)
        times = []
        for value in range(6):
            start = time.time()
            assert send(server, model, value) == value
            times.append(time.time() - start)
            time.sleep(0.05)
        return sorted(times)[len(times) // 2]
    assert paced_latency("untargeted_delay") >= 0.3
    assert paced_latency("targeted_delay") < 0.1


def test_a_bad_target_fails_the_load_naming_the_parameter(server):
    for name, expected in (("bad_target", "latency_target_ms"), ("target_without_batcher", "needs dynamic_batching")):
        response = requests.post(f"{server.url}/v2/repository/models/{name}/load", timeout=60)
        assert response.status_code == 400, response.text
        assert expected in response.json()["error"], response.text
    assert send(server, "targeted", 7) == 7  # still serving
