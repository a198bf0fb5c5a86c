"""`inferd tune`: sweeps instance count x max_batch_size x queue delay (and the latency-target
batcher) on its own server over a copy of the model's folder, prints throughput and p99 per
config and writes the best config that meets the target."""
import subprocess

from inferd_harness import inferd_binary, scalar_identity

# 2 ms + 0.5 ms per row: batching pays, so a batched config must beat one row at a time.
COST = 'parameters { key: "cost" value: { string_value: "fixed_us=2000,per_item_us=500" } }\n'


def tune(repo, *args, timeout=300):
    return subprocess.run([inferd_binary(), "tune", "--model-repository", str(repo), *args],
                          capture_output=True, text=True, timeout=timeout)


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
    # Columns: the config (52 wide), concurrency, infer/s, p99 ms, within target.
    throughput = {line[:52].strip(): float(line[52:].split()[1]) for line in table.splitlines() if line.endswith("yes")}
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
