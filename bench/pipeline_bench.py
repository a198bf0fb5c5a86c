#!/usr/bin/env python3
"""Pipeline (ensemble) benchmarks: the seeds' headline, a 10-model recommender inside 200 ms, and
pipelining an image pipeline.

  bench/pipeline_bench.py recommender   examples/recommender (10 models, 100 candidates a request):
      1. the ensemble under `inferd bench --request-rate R` (open loop, Poisson arrivals) at
         rising rates until p99 passes 200 ms: the highest rate sustained with p99 < 200 ms;
      2. the "before": the same 10 models chained by the client, 10 HTTP calls a request, against
         the ensemble, both driven by the same Python open-loop client: the highest rate each
         sustains with p99 < 200 ms, and their ratio.
  bench/pipeline_bench.py image         JPEG -> image_preprocess -> mobilenet_v3_large -> classify
      at the same client concurrency, pipelined (the ensemble: stages work on different requests at
      once and batch) against one request at a time (the same ensemble with max_runs_in_flight 1:
      each request runs through the three stages before the next starts).

Needs `bash scripts/setup.sh --bench` and `bash scripts/build.sh release`. Prints markdown tables
(docs/BENCHMARKS.md records them) with the CPU flags.
"""
import argparse
import http.client
import io
import json
import queue
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from first_traffic_bench import cpu_flags  # noqa: E402
from http_bench import INFERD, ROOT, Inferd  # noqa: E402

P99_GOAL_MS = 200
CANDIDATES = 100
DTYPES = {np.dtype(np.float32): "FP32", np.dtype(np.int64): "INT64"}
NUMPY = {"FP32": np.float32, "INT64": np.int64}


# --- KServe v2 over HTTP with binary tensors --------------------------------------------------
def infer(conn, model, inputs):
    """inputs: {name: ndarray (batch dim first) or list of bytes (BYTES)}; returns {name: ndarray}."""
    header, blobs = {"inputs": [], "parameters": {"binary_data_output": True}}, []
    for name, value in inputs.items():
        if isinstance(value, np.ndarray):
            raw, datatype, shape = value.tobytes(), DTYPES[value.dtype], list(value.shape)
        else:
            raw = b"".join(len(v).to_bytes(4, "little") + v for v in value)
            datatype, shape = "BYTES", [len(value), 1]
        header["inputs"].append({"name": name, "shape": shape, "datatype": datatype,
                                 "parameters": {"binary_data_size": len(raw)}})
        blobs.append(raw)
    head = json.dumps(header).encode()
    conn.request("POST", f"/v2/models/{model}/infer", body=head + b"".join(blobs),
                 headers={"Inference-Header-Content-Length": str(len(head)),
                          "Content-Type": "application/octet-stream"})
    response = conn.getresponse()
    body = response.read()
    if response.status != 200:
        raise RuntimeError(f"{model}: HTTP {response.status} {body[:200]!r}")
    length = int(response.getheader("Inference-Header-Content-Length"))
    meta, at, outputs = json.loads(body[:length]), length, {}
    for output in meta["outputs"]:
        size = output["parameters"]["binary_data_size"]
        outputs[output["name"]] = np.frombuffer(body[at:at + size], NUMPY[output["datatype"]]).reshape(output["shape"])
        at += size
    return outputs


def open_loop(port, rate, seconds, send, workers=96):
    """Poisson arrivals at `rate`/s for `seconds`; each arrival runs send(conn) on a free worker
    (queued while none is free). Latency counts from the arrival, so a slow server cannot hide
    behind a slow client (no coordinated omission)."""
    arrivals, latencies, errors = queue.Queue(), [], []
    lock = threading.Lock()

    def worker():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while (arrival := arrivals.get()) is not None:
            try:
                send(conn)
                ok = True
            except Exception as error:  # counted, and the connection starts afresh
                ok = False
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                with lock:
                    errors.append(str(error))
            with lock:
                if ok:
                    latencies.append(time.perf_counter() - arrival)
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(workers)]
    for thread in threads:
        thread.start()
    rng = random.Random(7)
    start = time.perf_counter()
    arrival, sent = start, 0
    while arrival < start + seconds:
        arrival += rng.expovariate(rate)
        delay = arrival - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        arrivals.put(arrival)
        sent += 1
    for _ in threads:
        arrivals.put(None)
    for thread in threads:
        thread.join(timeout=120)
    elapsed = time.perf_counter() - start
    ms = np.array(latencies) * 1e3 if latencies else np.array([float("inf")])
    return {"rate": rate, "throughput": len(latencies) / elapsed, "p50": float(np.percentile(ms, 50)),
            "p99": float(np.percentile(ms, 99)), "errors": len(errors) + (sent - len(latencies) - len(errors))}


def sustained(result):
    return result["p99"] < P99_GOAL_MS and result["errors"] == 0 and result["throughput"] >= 0.9 * result["rate"]


def ladder(rates, measure):
    """Measures rising rates until one is not sustained; returns every row measured."""
    rows = []
    for rate in rates:
        rows.append(measure(rate))
        print(f"  {rows[-1]}", file=sys.stderr, flush=True)
        if not sustained(rows[-1]):
            break
    # An overloaded level leaves requests queued in the server: let them drain before what follows.
    time.sleep(10)
    return rows


def best_rate(rows):
    good = [row["rate"] for row in rows if sustained(row)]
    return max(good) if good else 0


def table(title, rows):
    print(f"\n{title}\n")
    print("| offered req/s | answered req/s | p50 ms | p99 ms | errors | p99 < 200 ms |")
    print("|---:|---:|---:|---:|---:|:---:|")
    for row in rows:
        print(f"| {row['rate']:g} | {row['throughput']:.1f} | {row['p50']:.1f} | {row['p99']:.1f} | {row['errors']} | "
              f"{'yes' if sustained(row) else 'no'} |")


# --- the recommender ---------------------------------------------------------------------------
def recommender_inputs(rng):
    return {"user_id": rng.integers(0, 10**9, (1, 1), dtype=np.int64),
            "item_ids": rng.integers(0, 10**9, (1, CANDIDATES), dtype=np.int64),
            "user_dense": rng.random((1, 8), dtype=np.float32)}


def chained(conn, inputs):
    """The "before": the client runs the pipeline itself, one HTTP call per model, in order."""
    features = infer(conn, "rec_features", inputs)
    user = infer(conn, "rec_user_tower", {"user_bucket": features["user_bucket"], "dense": features["dense"]})
    items = infer(conn, "rec_item_tower", {"item_buckets": features["item_buckets"]})
    context = infer(conn, "rec_context", {"dense": features["dense"]})
    ctr = {}
    for size in ("s", "m", "l", "xl"):
        ctr[f"ctr_{size}"] = infer(conn, f"rec_ctr_{size}", {"user_vec": user["user_vec"], "item_vecs": items["item_vecs"],
                                                             "context": context["context"]})["ctr"]
    score = infer(conn, "rec_reranker", ctr)["score"]
    return infer(conn, "rec_topk", {"score": score})


def inferd_bench(port, model, rate, seconds):
    out = subprocess.run([INFERD, "bench", "-m", model, "--url", f"127.0.0.1:{port}", "--request-rate", str(rate),
                          "--duration", str(seconds), "--warmup-ms", "1000", "--format", "json"],
                         capture_output=True, text=True, timeout=seconds + 120)
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    row = json.loads(out.stdout)[0]
    return {"rate": rate, "throughput": row["throughput"], "p50": row["p50_ms"], "p99": row["p99_ms"],
            "errors": row["errors"], "queue_us": row["server_queue_us"], "compute_us": row["server_compute_us"]}


def run_recommender(args):
    repo = Path(tempfile.mkdtemp(prefix="inferd-recommender-"))
    subprocess.run([sys.executable, str(ROOT / "examples" / "recommender" / "make_repository.py"), str(repo)],
                   check=True, capture_output=True)
    server = Inferd(repo)
    try:
        wait_ready(server, "recommender")
        rng = np.random.default_rng(3)
        conn = http.client.HTTPConnection("127.0.0.1", server.port)
        assert infer(conn, "recommender", recommender_inputs(rng))["TOP_ITEMS"].shape == (1, 10)
        # Both paths give the same answer: the chain is the ensemble, call by call.
        sample = recommender_inputs(rng)
        direct, chain = infer(conn, "recommender", sample), chained(conn, sample)
        assert np.array_equal(direct["TOP_ITEMS"], chain["TOP_ITEMS"])
        print(f"CPU flags: {cpu_flags()}; {args.seconds} s per rate; inferd {INFERD}", flush=True)

        print("ensemble, inferd bench --request-rate:", file=sys.stderr)
        ensemble_rows = ladder(args.rates, lambda rate: inferd_bench(server.port, "recommender", rate, args.seconds))
        table("The 10-model recommender ensemble, `inferd bench -m recommender --request-rate R` (open loop)",
              ensemble_rows)
        print(f"\nHighest rate sustained with p99 < {P99_GOAL_MS} ms: **{best_rate(ensemble_rows):g} req/s**")

        def python_client(send):
            def measure(rate):
                request_rng = np.random.default_rng(int(rate))
                samples = [recommender_inputs(request_rng) for _ in range(64)]
                return open_loop(server.port, rate, args.seconds, lambda c: send(c, random.choice(samples)))
            return measure
        print("chained by the client (Python):", file=sys.stderr)
        chained_rows = ladder(args.client_rates, python_client(chained))
        print("ensemble (Python):", file=sys.stderr)
        single_rows = ladder(args.client_rates, python_client(lambda c, s: infer(c, "recommender", s)))
        table("Chained by the client: 10 HTTP calls a request (Python http.client, binary tensors)", chained_rows)
        table("The ensemble: 1 HTTP call a request (the same Python client)", single_rows)
        before, after = best_rate(chained_rows), best_rate(single_rows)
        ratio = f"{after / before:.1f}x" if before else "n/a (the chain sustained none of the rates)"
        print(f"\nHighest rate with p99 < {P99_GOAL_MS} ms, same client: chained {before:g} req/s, ensemble "
              f"{after:g} req/s: **{ratio}**")
    finally:
        server.stop()


# --- the image pipeline --------------------------------------------------------------------------
IMAGE_STEPS = """
    platform: "ensemble"
    max_batch_size: 8
    input [ { name: "IMAGE", data_type: TYPE_STRING, dims: [ 1 ] } ]
    output [ { name: "TOP_CLASSES", data_type: TYPE_INT64, dims: [ 5 ] } ]
    ensemble_scheduling { step [
      { model_name: "preprocess" model_version: -1
        input_map { key: "IMAGE" value: "IMAGE" } output_map { key: "PIXELS" value: "pixels" } },
      { model_name: "mobilenet" model_version: -1
        input_map { key: "input" value: "pixels" } output_map { key: "output" value: "logits" } },
      { model_name: "top5" model_version: -1
        input_map { key: "SCORES" value: "logits" } output_map { key: "TOP_CLASSES" value: "TOP_CLASSES" } } ] }
    """
IMAGE_MODELS = {
    "preprocess": """
        backend: "image_preprocess"
        max_batch_size: 8
        input [ { name: "IMAGE", data_type: TYPE_STRING, dims: [ 1 ] } ]
        output [ { name: "PIXELS", data_type: TYPE_FP32, dims: [ 3, 224, 224 ] } ]
        dynamic_batching { max_queue_delay_microseconds: 2000 }
        parameters [ { key: "shorter_side" value: { string_value: "256" } },
                     { key: "mean" value: { string_value: "0.485,0.456,0.406" } },
                     { key: "std" value: { string_value: "0.229,0.224,0.225" } } ]
        """,
    "mobilenet": """
        platform: "onnxruntime_onnx"
        max_batch_size: 8
        input [ { name: "input", data_type: TYPE_FP32, dims: [ 3, 224, 224 ] } ]
        output [ { name: "output", data_type: TYPE_FP32, dims: [ 1000 ] } ]
        dynamic_batching { max_queue_delay_microseconds: 2000 }
        parameters { key: "planned_batch_sizes" value: { string_value: "1,2,4,8" } }
        """,
    "top5": """
        backend: "classify"
        max_batch_size: 8
        input [ { name: "SCORES", data_type: TYPE_FP32, dims: [ 1000 ] } ]
        output [ { name: "TOP_CLASSES", data_type: TYPE_INT64, dims: [ 5 ] } ]
        dynamic_batching { max_queue_delay_microseconds: 2000 }
        """,
    "image_pipelined": IMAGE_STEPS,
    "image_one_at_a_time": IMAGE_STEPS + 'parameters { key: "max_runs_in_flight" value: { string_value: "1" } }',
}


def closed_loop(port, concurrency, seconds, send):
    """`concurrency` clients, each sending its next request when the last one answered."""
    latencies, errors, stop = [], [], time.perf_counter() + seconds
    lock = threading.Lock()

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while time.perf_counter() < stop:
            began = time.perf_counter()
            try:
                send(conn)
            except Exception as error:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                with lock:
                    errors.append(str(error))
                continue
            with lock:
                latencies.append(time.perf_counter() - began)
    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ms = np.array(latencies) * 1e3
    return {"throughput": len(latencies) / (time.perf_counter() - start), "p50": float(np.percentile(ms, 50)),
            "p99": float(np.percentile(ms, 99)), "errors": len(errors)}


def run_image(args):
    import textwrap
    from PIL import Image
    root = Path(tempfile.mkdtemp(prefix="inferd-image-pipeline-"))
    subprocess.run([sys.executable, str(ROOT / "models" / "make_real_models.py"), str(root / "made"), "--only",
                    "mobilenet_v3_large"], check=True, capture_output=True)
    for name, config in IMAGE_MODELS.items():
        (root / "repo" / name / "1").mkdir(parents=True)
        (root / "repo" / name / "config.pbtxt").write_text(textwrap.dedent(config))
    (root / "made" / "mobilenet_v3_large" / "model.onnx").rename(root / "repo" / "mobilenet" / "1" / "model.onnx")
    rng = np.random.default_rng(5)
    y, x = np.mgrid[0:375, 0:500]
    pixels = np.stack([128 + 100 * np.sin(x / 17), 255 * x / 500, 255 * (y > 180)], -1) + rng.normal(0, 8, (375, 500, 3))
    jpeg = io.BytesIO()
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(jpeg, format="JPEG", quality=90)
    jpeg = jpeg.getvalue()
    server = Inferd(root / "repo")
    try:
        for model in ("image_pipelined", "image_one_at_a_time"):
            wait_ready(server, model)
        print(f"CPU flags: {cpu_flags()}; a {len(jpeg)} byte 500x375 JPEG; {args.seconds} s per row; Python "
              f"http.client clients, closed loop; inferd {INFERD}\n")
        print("| concurrency | mode | req/s | p50 ms | p99 ms | errors |")
        print("|---:|---|---:|---:|---:|---:|")
        for concurrency in args.concurrency:
            rows = {}
            for model in ("image_one_at_a_time", "image_pipelined"):
                send = lambda c, m=model: infer(c, m, {"IMAGE": [jpeg]})  # noqa: E731
                closed_loop(server.port, concurrency, 2, send)  # warm up
                rows[model] = closed_loop(server.port, concurrency, args.seconds, send)
                r = rows[model]
                print(f"| {concurrency} | {model.replace('image_', '').replace('_', ' ')} | {r['throughput']:.1f} | "
                      f"{r['p50']:.1f} | {r['p99']:.1f} | {r['errors']} |", flush=True)
            ratio = rows["image_pipelined"]["throughput"] / rows["image_one_at_a_time"]["throughput"]
            print(f"| {concurrency} | **pipelined / one at a time** | **{ratio:.2f}x** | | | |", flush=True)
    finally:
        server.stop()


def wait_ready(server, model, timeout=300):
    deadline = time.time() + timeout
    conn = http.client.HTTPConnection("127.0.0.1", server.port)
    while time.time() < deadline:
        conn.request("GET", f"/v2/models/{model}/ready")
        response = conn.getresponse()
        response.read()
        if response.status == 200:
            return
        time.sleep(0.2)
    raise RuntimeError(f"{model} not ready after {timeout} s")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("recommender")
    rec.add_argument("--seconds", type=float, default=10)
    rec.add_argument("--rates", type=lambda s: [float(x) for x in s.split(",")],
                     default=[100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200])
    rec.add_argument("--client-rates", type=lambda s: [float(x) for x in s.split(",")],
                     default=[10, 20, 40, 60, 80, 100, 150, 200, 300, 400, 500, 600, 700, 800])
    image = sub.add_parser("image")
    image.add_argument("--seconds", type=float, default=10)
    image.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4, 16])
    args = parser.parse_args()
    if args.command == "recommender":
        run_recommender(args)
    else:
        run_image(args)


if __name__ == "__main__":
    main()
