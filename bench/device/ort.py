# ONNX Runtime (Python) b1 latency and b8 throughput on one model: bench/device/engine_check.sh.
import sys, time, json, numpy as np, onnxruntime as ort
path, threads = sys.argv[1], int(sys.argv[2])
so = ort.SessionOptions(); so.intra_op_num_threads = threads; so.inter_op_num_threads = 1
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
res = {}
for batch, iters in ((1, 20), (8, 6)):
    x = np.random.default_rng(0).standard_normal((batch, 3, 224, 224)).astype(np.float32)
    for _ in range(3): s.run(None, {"input": x})
    times = []
    for _ in range(iters):
        t = time.perf_counter(); s.run(None, {"input": x}); times.append(time.perf_counter() - t)
    times.sort()
    res[f"b{batch}"] = {"p50_ms": times[len(times) // 2] * 1e3, "per_s": batch * len(times) / sum(times)}
print("ORT", ort.__version__, json.dumps(res), flush=True)
