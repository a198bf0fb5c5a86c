#!/usr/bin/env python3
"""HTTP serving benchmarks for inferd, with nginx as the reference in the same run.

  bench/http_bench.py overhead   identity model at concurrency 1, 8, 64 vs nginx returning a
                                 response of the same size to the same POST
  bench/http_bench.py batching   add_sub (cost fixed_us=2000, per_item_us=100, max_batch_size 32)
                                 at concurrency 32, with and without dynamic batching
  bench/http_bench.py observability
                                 identity (1x16 FP32) at concurrency 8, every request with its own
                                 id, with feedback tracking and drift windows on (parameters
                                 quality and drift: 16 PSI features and a class histogram) against
                                 the same model without them, alternating rounds: req/s and the
                                 server's CPU time per request (metrics are always on)
  bench/http_bench.py ab --against OTHER_INFERD
                                 this build against another build of inferd (an earlier commit)
                                 on the identity model at concurrency 8, alternating rounds:
                                 req/s and the server's CPU time per request; with one version,
                                 and with two versions under a traffic split 1:100 (routing per
                                 request; one version serves, as in the other build)

Needs `bash scripts/setup.sh --bench` (wrk, nginx) and `bash scripts/build.sh release`.
Load comes from wrk (Debian package) on loopback; every run is bounded in time. Prints markdown
tables (the format docs/BENCHMARKS.md records).
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INFERD = os.environ.get("INFERD_BIN", str(ROOT / "build" / "src" / "server" / "inferd"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, timeout=120):  # start-up loads of large models (swin_t: 17 s on 2 cores) precede listening
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except Exception:
            time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer")


def post(url, body):
    request = urllib.request.Request(url, data=body.encode(), method="POST")
    return urllib.request.urlopen(request, timeout=10).read()


class Inferd:
    def __init__(self, repo, extra=(), binary=INFERD):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([binary, "serve", "--model-repository", str(repo), "--http-address", "127.0.0.1",
                                      "--http-port", str(self.port), "--metrics-port", str(free_port()),
                                      "--grpc-address", "127.0.0.1", "--grpc-port", str(free_port()), *extra],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_http(self.url + "/v2/health/live")

    def cpu_seconds(self):
        """User + system CPU time of the server process so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)


class Nginx:
    """nginx answering every request on / with a fixed body (POST included), 2 workers."""

    def __init__(self, body):
        self.dir = Path(tempfile.mkdtemp(prefix="inferd-nginx-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        escaped = body.decode().replace("\\", "\\\\").replace("'", "\\'")
        (self.dir / "nginx.conf").write_text(textwrap.dedent(f"""
            worker_processes 2;
            pid {self.dir}/nginx.pid;
            error_log {self.dir}/error.log;
            daemon off;
            events {{ worker_connections 1024; }}
            http {{
              access_log off;
              client_body_temp_path {self.dir};
              proxy_temp_path {self.dir};
              fastcgi_temp_path {self.dir};
              uwsgi_temp_path {self.dir};
              scgi_temp_path {self.dir};
              keepalive_requests 1000000;
              server {{
                listen 127.0.0.1:{self.port};
                location / {{ default_type application/json; return 200 '{escaped}'; }}
              }}
            }}"""))
        self.proc = subprocess.Popen(["nginx", "-c", str(self.dir / "nginx.conf"), "-p", str(self.dir)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_http(self.url + "/")

    def stop(self):
        self.proc.send_signal(signal.SIGQUIT)
        self.proc.wait(timeout=30)


def wrk(url, body, connections, seconds):
    """`body` may hold @ID@: each request then gets its own id there (a counter per wrk thread,
    prefixed by the thread's number)."""
    script = tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False)
    script.write(f'wrk.method = "POST"\nwrk.body = {json.dumps(body)}\nwrk.headers["Content-Type"] = "application/json"\n')
    if "@ID@" in body:
        head, tail = body.split("@ID@")
        script.write(textwrap.dedent(f"""
            local threads, count = 0, 0
            prefix = ""  -- a global: setup() sets it in each thread's own Lua state
            function setup(thread) threads = threads + 1; thread:set("prefix", "t" .. threads .. "-") end
            function request()
              count = count + 1
              return wrk.format(nil, nil, nil, {json.dumps(head)} .. prefix .. count .. {json.dumps(tail)})
            end
            """))
    script.close()
    threads = min(2, connections)
    out = subprocess.run(["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{seconds}s", "--latency",
                          "-s", script.name, url], capture_output=True, text=True, timeout=seconds + 60).stdout
    os.unlink(script.name)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)

    def percentile(p):
        m = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        value, unit = float(m.group(1)), m.group(2)
        return value * {"us": 1e-3, "ms": 1, "s": 1e3}[unit]

    return {"rps": rps, "p50": percentile(50), "p99": percentile(99), "errors": int(errors.group(1)) if errors else 0}


def median_by_rps(results):
    return sorted(results, key=lambda r: r["rps"])[len(results) // 2]


def write_repo(models):
    repo = Path(tempfile.mkdtemp(prefix="inferd-bench-repo-"))
    for name, config in models.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(textwrap.dedent(config))
    return repo


def overhead(args):
    repo = write_repo({"identity": """
        backend: "identity"
        max_batch_size: 64
        input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
        output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
        dynamic_batching { }
        """})
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32",
                                   "data": [0.5 + i for i in range(16)]}]})
    server = Inferd(repo)
    try:
        response = post(server.url + "/v2/models/identity/infer", body)
        nginx = Nginx(response)
        try:
            print(f"identity model, 1x16 FP32 JSON; response {len(response)} bytes; median of {args.rounds} "
                  f"alternating wrk rounds of {args.seconds}s per cell\n")
            print("| concurrency | inferd req/s | inferd p50 ms | inferd p99 ms | nginx req/s | nginx p99 ms | inferd/nginx |")
            print("|---:|---:|---:|---:|---:|---:|---:|")
            for connections in (1, 8, 64):
                # Alternate the two servers for several rounds and keep the median round of each,
                # so a noisy moment on the shared machine does not decide the ratio.
                rounds = [(wrk(server.url + "/v2/models/identity/infer", body, connections, args.seconds),
                           wrk(nginx.url + "/", body, connections, args.seconds)) for _ in range(args.rounds)]
                ours = median_by_rps([r[0] for r in rounds])
                theirs = median_by_rps([r[1] for r in rounds])
                assert all(r[0]["errors"] == 0 for r in rounds), rounds
                print(f"| {connections} | {ours['rps']:.0f} | {ours['p50']:.3f} | {ours['p99']:.3f} | {theirs['rps']:.0f} "
                      f"| {theirs['p99']:.3f} | {ours['rps'] / theirs['rps']:.2f} |", flush=True)
        finally:
            nginx.stop()
    finally:
        server.stop()


def batching(args):
    common = """
        backend: "add_sub"
        max_batch_size: 32
        input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 16 ] },
                { name: "INPUT1", data_type: TYPE_FP32, dims: [ 16 ] } ]
        output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 16 ] },
                 { name: "OUTPUT1", data_type: TYPE_FP32, dims: [ 16 ] } ]
        parameters { key: "cost" value: { string_value: "fixed_us=2000,per_item_us=100" } }
        """
    repo = write_repo({"batched": common + "dynamic_batching { max_queue_delay_microseconds: 2000 }\n",
                       "unbatched": common})
    row = [float(i) for i in range(16)]
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": row},
                                  {"name": "INPUT1", "shape": [1, 16], "datatype": "FP32", "data": row}]})
    server = Inferd(repo)
    try:
        print(f"add_sub, cost fixed_us=2000 per_item_us=100, max_batch_size 32, 1 instance, concurrency 32, "
              f"wrk {args.seconds}s\n")
        print("| scheduling | req/s | p50 ms | p99 ms | mean batch |")
        print("|---|---:|---:|---:|---:|")
        results = {}
        for model in ("unbatched", "batched"):
            result = wrk(f"{server.url}/v2/models/{model}/infer", body, 32, args.seconds)
            stats = json.loads(urllib.request.urlopen(f"{server.url}/v2/models/{model}/stats").read())["model_stats"][0]
            mean_batch = stats["inference_count"] / max(1, stats["execution_count"])
            results[model] = result
            assert result["errors"] == 0, result
            print(f"| {model} | {result['rps']:.0f} | {result['p50']:.2f} | {result['p99']:.2f} | {mean_batch:.1f} |", flush=True)
        speedup = results["batched"]["rps"] / results["unbatched"]["rps"]
        p99_ratio = results["batched"]["p99"] / results["unbatched"]["p99"]
        print(f"\nthroughput batched/unbatched: {speedup:.1f}x; p99 batched/unbatched: {p99_ratio:.2f}")
    finally:
        server.stop()


IDENTITY = """
    backend: "identity"
    max_batch_size: 64
    input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
    output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
    dynamic_batching { }
    """


def alternate_rounds(servers, body, rounds, seconds):
    """The same wrk load on each server in turn, `rounds` times: {name: [result]}, each with the
    server's CPU time per request (cpu_us)."""
    results = {name: [] for name in servers}
    for _ in range(rounds):
        for name, server in servers.items():
            before = server.cpu_seconds()
            result = wrk(server.url + "/v2/models/identity/infer", body, 8, seconds)
            assert result["errors"] == 0, result
            result["cpu_us"] = (server.cpu_seconds() - before) / (result["rps"] * seconds) * 1e6
            results[name].append(result)
    return results


def ab(args):
    """The per-request cost of a change: the same load on two builds, alternated round by round."""
    plain = write_repo({"identity": IDENTITY})
    split = write_repo({"identity": IDENTITY + 'parameters { key: "traffic_split" value: { string_value: "1:100" } }\n'
                        + "version_policy { all {} }\n"})
    (split / "identity" / "2").mkdir()
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32",
                                   "data": [0.5 + i for i in range(16)]}]})
    binaries = {"this build": INFERD, "other": args.against}
    print(f"identity model, 1x16 FP32 JSON, concurrency 8, {args.rounds} alternating rounds of wrk {args.seconds}s; "
          f"other = {args.against}\n")
    print("| repository | build | req/s (median) | server CPU us/request (median) | p99 ms |")
    print("|---|---|---:|---:|---:|")
    for label, repo in (("one version", plain), ("two versions, split 1:100", split)):
        servers = {name: Inferd(repo, binary=binary) for name, binary in binaries.items()}
        try:
            for server in servers.values():
                post(server.url + "/v2/models/identity/infer", body)
            results = alternate_rounds(servers, body, args.rounds, args.seconds)
        finally:
            for server in servers.values():
                server.stop()
        for name in binaries:
            runs = results[name]
            cpu = sorted(r["cpu_us"] for r in runs)[len(runs) // 2]
            middle = median_by_rps(runs)
            print(f"| {label} | {name} | {middle['rps']:.0f} | {cpu:.1f} | {middle['p99']:.3f} |", flush=True)


def observability(args):
    """Feedback tracking and drift windows on against off, the same load, alternated round by round."""
    fixed = IDENTITY.replace("dims: [ -1 ]", "dims: [ 16 ]")
    observed = fixed + textwrap.dedent("""
        parameters { key: "quality" value { string_value: "output=OUTPUT0,task=classification" } }
        parameters { key: "drift" value { string_value: "features=INPUT0,classes=OUTPUT0" } }
        """)
    repos = {"off": write_repo({"identity": fixed}), "quality + drift": write_repo({"identity": observed})}
    body = json.dumps({"id": "@ID@", "inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32",
                                                 "data": [0.5 + i for i in range(16)]}]})
    print(f"identity model, 1x16 FP32 JSON with a request id, concurrency 8, {args.rounds} alternating rounds of "
          f"wrk {args.seconds}s\n")
    print("| tracking | req/s (median) | server CPU us/request (median) | p99 ms | req/s vs off |")
    print("|---|---:|---:|---:|---:|")
    servers = {name: Inferd(repo) for name, repo in repos.items()}
    try:
        for server in servers.values():
            post(server.url + "/v2/models/identity/infer", body.replace("@ID@", "warm"))
        results = alternate_rounds(servers, body, args.rounds, args.seconds)
        tracked = json.load(urllib.request.urlopen(servers["quality + drift"].url + "/v2/models/identity/quality"))
        assert tracked["versions"][0]["predictions_tracked"] > 0, tracked
    finally:
        for server in servers.values():
            server.stop()
    base = median_by_rps(results["off"])["rps"]
    for name, runs in results.items():
        cpu = sorted(r["cpu_us"] for r in runs)[len(runs) // 2]
        middle = median_by_rps(runs)
        print(f"| {name} | {middle['rps']:.0f} | {cpu:.1f} | {middle['p99']:.3f} | {middle['rps'] / base:.3f} |",
              flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("which", choices=["overhead", "batching", "ab", "observability", "all"])
    parser.add_argument("--against", help="ab: the other inferd binary")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per overhead cell")
    args = parser.parse_args()
    missing = [tool for tool in ("wrk", "nginx") if not shutil.which(tool) and not Path("/usr/sbin/" + tool).exists()]
    if missing:
        sys.exit(f"missing {', '.join(missing)}: run `bash scripts/setup.sh --bench` first")
    if not Path(INFERD).exists():
        sys.exit(f"build inferd first (scripts/build.sh release) or set INFERD_BIN; {INFERD} is missing")
    if args.which in ("overhead", "all"):
        overhead(args)
        print()
    if args.which in ("batching", "all"):
        batching(args)
    if args.which == "observability":
        observability(args)
    if args.which == "ab":
        if not args.against or not Path(args.against).exists():
            sys.exit("ab needs --against PATH_TO_ANOTHER_INFERD")
        ab(args)


if __name__ == "__main__":
    main()
