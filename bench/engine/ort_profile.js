// ONNX Runtime's own per-node profile, for bench/layer_compare.py: one warm-up run, then
// ITERATIONS runs with the profiler on; writes PREFIX*.json (Chrome trace format).
//   node ort_profile.js MODEL.onnx INPUT_NAME DIMS(comma-separated) ITERATIONS THREADS PREFIX
const ort = require('onnxruntime-node');

async function main() {
  const [model, inputName, dimsText, iterationsText, threadsText, prefix] = process.argv.slice(2);
  const dims = dimsText.split(',').map(Number);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threadsText), interOpNumThreads: 1, graphOptimizationLevel: 'all',
    executionMode: 'sequential', enableProfiling: true, profileFilePrefix: prefix,
  });
  const data = new Float32Array(dims.reduce((a, b) => a * b, 1));
  for (let i = 0; i < data.length; i++) data[i] = Math.random() * 2 - 1;
  const feeds = {[inputName]: new ort.Tensor('float32', data, dims)};
  for (let i = 0; i < Number(iterationsText) + 1; i++) await session.run(feeds);
  session.endProfiling();
}

main().catch((e) => { console.error(String(e)); process.exit(1); });
