// ONNX Runtime (onnxruntime-node) outputs for accuracy checks (bench/int8_bench.py and the int8
// test): reads one float32 input as raw little-endian bytes, writes the first output the same way.
//   node ort_outputs.js MODEL.onnx INPUT_NAME DIMS(comma-separated) INPUT.bin OUTPUT.bin [THREADS]
const fs = require('fs');
const ort = require('onnxruntime-node');

async function main() {
  const [model, inputName, dimsText, inputFile, outputFile, threadsText] = process.argv.slice(2);
  const dims = dimsText.split(',').map(Number);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threadsText || 2), interOpNumThreads: 1, graphOptimizationLevel: 'all',
  });
  const bytes = fs.readFileSync(inputFile);
  const data = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
  const results = await session.run({[inputName]: new ort.Tensor('float32', data, dims)});
  const output = results[session.outputNames[0]];
  fs.writeFileSync(outputFile, Buffer.from(output.data.buffer, output.data.byteOffset, output.data.byteLength));
  console.log(JSON.stringify({output: session.outputNames[0], dims: output.dims}));
}

main().catch((e) => { console.error(String(e)); process.exit(1); });
