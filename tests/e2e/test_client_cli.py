"""The C++ client library (through examples/client/simple_client) and the `inferd infer`, `models`
and `bench` commands, against the real server over HTTP and gRPC."""
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from inferd_harness import REPO_ROOT, inferd_binary


def url(server, protocol):
    return server.grpc_target if protocol == "grpc" else f"127.0.0.1:{server.http_port}"


def cli(*args, timeout=60):
    return subprocess.run([inferd_binary(), *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_example_client_program(server, protocol):
    program = os.environ.get("INFERD_SIMPLE_CLIENT") or str(REPO_ROOT / "build" / "examples" / "client" / "simple_client")
    result = subprocess.run([program, url(server, protocol), protocol], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "sync: ok" in result.stdout and "async: 8 ok" in result.stdout


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_models_lists_versions_and_states(server, protocol):
    result = cli("models", "-u", url(server, protocol), "-i", protocol)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:6] == ["MODEL", "VERSION", "STATE", "LOAD_S", "WARMUP_S", "FIRST_S"]
    rows = [line.split() for line in lines[1:]]
    assert [row[:3] for row in rows if row[0] == "add_sub"] == [["add_sub", "1", "READY"], ["add_sub", "2", "READY"]]
    for row in rows:
        if row[2] == "READY":
            assert float(row[3]) >= float(row[4]) >= 0, row  # the warmup is part of the load


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_infer_with_npy_and_json_inputs(server, protocol, tmp_path):
    np.save(tmp_path / "a.npy", np.array([[1, 2, 3, 4]], np.int32))
    (tmp_path / "b.json").write_text("[[10, 20, 30, 40]]")
    result = cli("infer", "-u", url(server, protocol), "-i", protocol, "-m", "add_sub", "-v", "1",
                 "--input", f"INPUT0={tmp_path / 'a.npy'}", "--input", f"INPUT1={tmp_path / 'b.json'}",
                 "--output-dir", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert np.load(tmp_path / "out" / "OUTPUT0.npy").tolist() == [[11, 22, 33, 44]]
    assert np.load(tmp_path / "out" / "OUTPUT1.npy").tolist() == [[-9, -18, -27, -36]]
    printed = cli("infer", "-u", url(server, protocol), "-i", protocol, "-m", "add_sub",
                  "--input", f"INPUT0={tmp_path / 'a.npy'}", "--input", f"INPUT1={tmp_path / 'a.npy'}", "--output", "OUTPUT0")
    body = json.loads(printed.stdout)
    assert [o["name"] for o in body["outputs"]] == ["OUTPUT0"] and body["outputs"][0]["data"] == [2, 4, 6, 8]


def test_infer_reports_server_errors(server, tmp_path):
    result = cli("infer", "-u", url(server, "grpc"), "-i", "grpc", "-m", "nope")
    assert result.returncode == 1 and "NOT_FOUND" in result.stderr
    np.save(tmp_path / "x.npy", np.zeros((1, 3), np.int32))
    result = cli("infer", "-u", url(server, "http"), "-m", "add_sub", "--input", f"INPUT0={tmp_path / 'x.npy'}")
    assert result.returncode == 1 and "expected [-1,4]" in result.stderr


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_bench_closed_loop_sweep(server, protocol):
    result = cli("bench", "-u", url(server, protocol), "-i", protocol, "-m", "identity_fp32", "--shape", "INPUT0:16",
                 "--concurrency", "1:2:x2", "--window-ms", "300", "--max-windows", "4", "--warmup-ms", "100",
                 "--format", "json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [row["concurrency"] for row in rows] == [1, 2]
    for row in rows:
        assert row["throughput"] > 0 and row["errors"] == 0 and row["requests"] > 0
        assert 0 < row["p50_ms"] <= row["p90_ms"] <= row["p99_ms"]
        assert row["server_queue_us"] >= 0 and row["server_compute_us"] >= 0  # read from the model's stats
    assert "window 1" in result.stderr  # progress while it runs


def test_bench_open_loop_counts_errors(server):
    ok = cli("bench", "-u", url(server, "http"), "-m", "add_sub", "--request-rate", "100", "--duration", "1",
             "--warmup-ms", "100", "--format", "csv")
    assert ok.returncode == 0, ok.stderr
    header, row = ok.stdout.strip().splitlines()
    assert header.startswith("rate,infer_per_sec") and row.startswith("100,")
    values = dict(zip(header.split(","), row.split(",")))
    assert 50 < float(values["infer_per_sec"]) < 200 and values["errors"] == "0"
    # queue_one takes 400 ms per request and queues one more: at 20 requests/s most are refused.
    failing = cli("bench", "-u", url(server, "grpc"), "-i", "grpc", "-m", "queue_one", "--request-rate", "20",
                  "--duration", "1", "--warmup-ms", "0", "--format", "json")
    assert failing.returncode == 0, failing.stderr
    row = json.loads(failing.stdout)[0]
    assert row["errors"] >= 5 and row["requests"] <= 5, row


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_bench_async_keeps_the_concurrency_in_flight(server, protocol):
    ok = cli("bench", "-u", url(server, protocol), "-i", protocol, "-m", "identity_fp32", "--shape", "INPUT0:16",
             "--async", "--concurrency", "4", "--duration", "0.5", "--warmup-ms", "100", "--format", "json")
    assert ok.returncode == 0, ok.stderr
    row = json.loads(ok.stdout)[0]
    assert row["concurrency"] == 4 and row["requests"] > 0 and row["errors"] == 0, row
    # queue_one runs one request (400 ms) and queues one more: a third in flight is refused at once,
    # so three chains of async calls must see refusals, and one chain none.
    crowded = cli("bench", "-u", url(server, protocol), "-i", protocol, "-m", "queue_one", "--async",
                  "--concurrency", "3", "--duration", "1", "--warmup-ms", "0", "--format", "json")
    assert crowded.returncode == 0, crowded.stderr
    assert json.loads(crowded.stdout)[0]["errors"] > 0
    alone = cli("bench", "-u", url(server, protocol), "-i", protocol, "-m", "queue_one", "--async",
                "--concurrency", "1", "--duration", "1", "--warmup-ms", "0", "--format", "json")
    assert alone.returncode == 0, alone.stderr
    assert json.loads(alone.stdout)[0]["errors"] == 0


def test_bench_rejects_a_model_it_cannot_feed(server):
    result = cli("bench", "-u", url(server, "http"), "-m", "identity_fp32", "--window-ms", "200")
    assert result.returncode == 1 and "--shape INPUT0" in result.stderr


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_client_timeout(server, protocol):
    # `slow` answers after 600 ms; the client gives up at 150 ms and says so.
    result = cli("infer", "-u", url(server, protocol), "-i", protocol, "-m", "slow", "--timeout-ms", "150")
    assert result.returncode == 1 and "DEADLINE_EXCEEDED" in result.stderr, result.stderr


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_health_is_the_images_healthcheck(server, protocol):
    for args, said in (([], "ready"), (["--live"], "live")):
        result = cli("health", "-u", url(server, protocol), "-i", protocol, *args)
        assert (result.returncode, result.stdout.strip()) == (0, said), result.stderr


def test_health_fails_when_nothing_answers():
    from inferd_harness import free_port
    result = cli("health", "-u", f"127.0.0.1:{free_port()}", timeout=30)
    assert result.returncode == 1 and result.stderr.startswith("error: "), (result.stdout, result.stderr)
