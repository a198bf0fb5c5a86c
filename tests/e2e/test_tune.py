"""`inferd tune`: sweeps instance count x max_batch_size x queue delay (and the latency-target
batcher, then the intra-op threads of ONNX models) on its own server over the repository, or on a
running server with -u, loading each candidate through the load API's "config" parameter; prints
throughput and p99 per config and writes the best config that meets the target. A running server
gets its config back at the end."""
import re
import subprocess

import requests

from inferd_harness import Inferd, inferd_binary, plus_model, scalar_identity

# 2 ms + 0.5 ms per row: batching pays, so a batched config must beat one row at a time.
COST = 'parameters { key: "cost" value: { string_value: "fixed_us=2000,per_item_us=500" } }\n'


def tune(repo, *args, timeout=300):
    return tune_with("--model-repository", str(repo), *args, timeout=timeout)


def tune_with(*args, timeout=300):
    return subprocess.run([inferd_binary(), "tune", *args], capture_output=True, text=True, timeout=timeout)


def rows_within_target(table):
    """config label -> infer/s, for the rows that met the target (columns are 2+ spaces apart)."""
    rows = {}
    for line in table.splitlines():
        if line.endswith("yes"):
            label, _concurrency, throughput, _p99, _yes = re.split(r"\s{2,}", line.strip())
            rows[label] = float(throughput)
    return rows


def make_repo(tmp_path):
    (tmp_path / "slow" / "1").mkdir(parents=True)
    config = scalar_identity(max_batch_size=8) + COST
    (tmp_path / "slow" / "config.pbtxt").write_text(config)
    return tmp_path, config


def test_tune_measures_each_config_and_writes_the_fastest_within_the_target(tmp_path):
    repo, original = make_repo(tmp_path / "repo")
    out = tmp_path / "slow.tuned.pbtxt"
    result = tune(repo, "-m", "slow", "--latency-target-ms", "200", "--batch-sizes", "1,8", "--delays-us", "0",
                  "--max-instances", "1", "--max-concurrency", "8", "--seconds-per-level", "0.4", "--out", str(out))
    assert result.returncode == 0, result.stderr
    table = result.stdout
    for row in ("as configured", "1 instance(s), max_batch_size 1, delay 0 us",
                "1 instance(s), max_batch_size 8, delay 0 us", "1 instance(s), max_batch_size 8, latency_target_ms"):
        assert row in table, table
    throughput = rows_within_target(table)
    assert throughput["1 instance(s), max_batch_size 8, delay 0 us"] > 1.5 * throughput["1 instance(s), max_batch_size 1, delay 0 us"], table
    written = out.read_text()
    assert written.startswith("# inferd tune: 1 instance(s), max_batch_size 8"), written
    assert "max_batch_size: 8" in written and "count: 1" in written and "fixed_us=2000" in written
    assert "configs [" in result.stderr  # the progress bar
    assert (repo / "slow" / "config.pbtxt").read_text() == original  # the repository is left alone


def test_tune_says_when_no_config_meets_the_target(tmp_path):
    repo, _ = make_repo(tmp_path / "repo")
    out = tmp_path / "none.pbtxt"
    result = tune(repo, "-m", "slow", "--latency-target-ms", "0.01", "--batch-sizes", "1", "--max-instances", "1",
                  "--max-concurrency", "1", "--seconds-per-level", "0.2", "--out", str(out))
    assert result.returncode == 2, result.stderr
    assert "no config met a p99 of 0.01 ms" in result.stderr and not out.exists()
    missing = tune(repo, "-m", "absent", "--latency-target-ms", "10")
    assert missing.returncode == 1 and "error:" in missing.stderr


def test_tune_against_a_running_server_gives_it_its_config_back(tmp_path):
    repo, _ = make_repo(tmp_path / "repo")
    server = Inferd(repo, "--model-control-mode", "explicit", "--load-model", "slow")
    try:
        before = requests.get(f"{server.url}/v2/models/slow/config", timeout=10).json()
        out = tmp_path / "remote.pbtxt"
        result = tune_with("-u", server.grpc_target, "-i", "grpc", "-m", "slow", "--latency-target-ms", "200",
                           "--batch-sizes", "1,8", "--delays-us", "0", "--max-instances", "1",
                           "--max-concurrency", "4", "--seconds-per-level", "0.3", "--out", str(out))
        assert result.returncode == 0, result.stderr + server.logs()
        throughput = rows_within_target(result.stdout)
        assert throughput["1 instance(s), max_batch_size 8, delay 0 us"] > throughput["1 instance(s), max_batch_size 1, delay 0 us"]
        assert "max_batch_size: 8" in out.read_text()
        # Each candidate was loaded on the server itself, and what it served before serves again.
        assert "error:" not in result.stdout, result.stdout  # every candidate's config loaded
        assert server.logs().count("loaded model 'slow' version 1") >= 4, server.logs()
        after = requests.get(f"{server.url}/v2/models/slow/config", timeout=10).json()
        assert after == before
        response = server.infer("slow", [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [3]}])
        assert response.status_code == 200 and response.json()["outputs"][0]["data"] == [3]
    finally:
        assert server.stop() == 0, server.logs()


def test_tune_tries_intra_op_thread_counts_on_the_best_onnx_config(tmp_path):
    (tmp_path / "repo" / "plus" / "1").mkdir(parents=True)
    (tmp_path / "repo" / "plus" / "1" / "model.onnx").write_bytes(plus_model(1))
    out = tmp_path / "plus.pbtxt"
    result = tune(tmp_path / "repo", "-m", "plus", "--latency-target-ms", "500", "--batch-sizes", "1",
                  "--max-instances", "1", "--max-threads", "2", "--max-concurrency", "1",
                  "--seconds-per-level", "0.2", "--out", str(out))
    assert result.returncode == 0, result.stderr
    throughput = rows_within_target(result.stdout)
    best_first_pass = max((label for label in throughput if "intra-op" not in label), key=throughput.get)
    for threads in ("1 intra-op thread(s)", "2 intra-op thread(s)"):
        assert f"{best_first_pass}, {threads}" in result.stdout, result.stdout
    if "intra-op" in out.read_text().splitlines()[0]:
        assert 'key: "intra_op_thread_count"' in out.read_text()
    assert not (tmp_path / "repo" / "plus" / "config.pbtxt").exists()  # nothing written to the repository


def test_tune_takes_a_repository_or_a_server_not_both(tmp_path):
    repo, _ = make_repo(tmp_path / "repo")
    both = tune_with("--model-repository", str(repo), "-u", "127.0.0.1:1", "-m", "slow", "--latency-target-ms", "10")
    assert both.returncode != 0 and "excludes" in both.stderr, both.stderr
    neither = tune_with("-m", "slow", "--latency-target-ms", "10")
    assert neither.returncode == 1 and "either --model-repository" in neither.stderr, neither.stderr
    unreachable = tune_with("-u", "127.0.0.1:1", "-m", "slow", "--latency-target-ms", "10")
    assert unreachable.returncode == 1 and "error:" in unreachable.stderr, unreachable.stderr
