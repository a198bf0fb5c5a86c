// ONNX Runtime (onnxruntime-node) timing for bench/engine_bench.py. Prints one JSON line.
//   node ort_bench.js MODEL.onnx INPUT_NAME DIMS(comma-separated, batch first) ITERATIONS WARMUP THREADS
const ort = require('onnxruntime-node');

async function main() {
  const [model, inputName, dimsText, iterationsText, warmupText, threadsText] = process.argv.slice(2);
  const dims = dimsText.split(',').map(Number);
  const iterations = Number(iterationsText), warmup = Number(warmupText), threads = Number(threadsText);
  const loadStart = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threads, interOpNumThreads: 1, graphOptimizationLevel: 'all', executionMode: 'sequential',
  });
  const loadMs = Number(process.hrtime.bigint() - loadStart) / 1e6;
  const data = new Float32Array(dims.reduce((a, b) => a * b, 1));
  for (let i = 0; i < data.length; i++) data[i] = Math.random() * 2 - 1;
  const feeds = {[inputName]: new ort.Tensor('float32', data, dims)};
  const latencies = [];
  for (let i = 0; i < warmup + iterations; i++) {
    const start = process.hrtime.bigint();
    await session.run(feeds);
    if (i >= warmup) latencies.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  latencies.sort((a, b) => a - b);
  const pick = (p) => latencies[Math.min(latencies.length - 1, Math.round(p / 100 * (latencies.length - 1)))];
  const total = latencies.reduce((a, b) => a + b, 0);
  console.log(JSON.stringify({
    load_ms: loadMs, p50_ms: pick(50), p90_ms: pick(90), throughput_per_s: dims[0] * latencies.length / (total / 1000),
    peak_rss_mb: process.resourceUsage().maxRSS / 1024,
  }));
}

main().catch((e) => { console.error(String(e)); process.exit(1); });
