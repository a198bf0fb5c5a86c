#!/usr/bin/env bash
# Issue 19 part 2 on another machine's CPU (the lent GPU host's Xeon, with AVX512_VNNI and AMX):
# `inferd quantize` mobilenet_v3_large and resnet50 (random weights, random calibration), then
# inferd int8 and fp32 against ONNX Runtime fp32 and ORT on the same QDQ file, at 2 and 8 threads.
# Needs .devrun/bundle.tar.xz from tests/gpu/bundle.sh; writes $OUT/log.txt. One run each, not
# interleaved: a first look, not BENCHMARKS-grade ratios.
set -u
exec > >(tee "$OUT/log.txt") 2>&1
B=/tmp/b; mkdir -p $B && tar -C $B -xJf .devrun/bundle.tar.xz
export LD_LIBRARY_PATH=$B/lib
grep -m1 'model name' /proc/cpuinfo; nproc
grep -o -w -E 'avx2|avx512f|avx512_vnni|avx512_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
python3 bench/device/export.py /tmp/m || exit 1
python3 -c "
import numpy as np, os
os.makedirs('/tmp/cal', exist_ok=True)
rng = np.random.default_rng(1)
for k in range(16): np.save(f'/tmp/cal/b{k:02d}.npy', rng.standard_normal((2, 3, 224, 224)).astype(np.float32))"
summary() { python3 -c "import sys,json; t=sys.stdin.read(); j=json.loads(t[t.index('{'):]); print('$1', 'p50_ms %.2f' % j['p50_ms'], 'per_s %.1f' % j['throughput_per_s'])" 2>&1 | tail -1; }
for m in resnet50 mobilenet_v3_large; do
  $B/bin/inferd quantize /tmp/m/$m.onnx --calibration /tmp/cal --out /tmp/m/$m.int8.onnx 2>/dev/null | tail -1
  for t in 2 8; do
    python3 bench/device/ort.py /tmp/m/$m.onnx $t | sed "s/^/$m t$t fp32 /"
    python3 bench/device/ort.py /tmp/m/$m.int8.onnx $t | sed "s/^/$m t$t int8-qdq /"
    $B/bin/inferd run /tmp/m/$m.int8.onnx --batch 1 --iterations 20 --warmup 3 --threads $t --json 2>&1 | summary "$m t$t inferd int8 b1"
    $B/bin/inferd run /tmp/m/$m.int8.onnx --batch 8 --iterations 6 --warmup 3 --threads $t --json 2>&1 | summary "$m t$t inferd int8 b8"
    $B/bin/inferd run /tmp/m/$m.onnx --batch 8 --iterations 6 --warmup 3 --threads $t --json 2>&1 | summary "$m t$t inferd fp32 b8"
  done
done
$B/bin/inferd run /tmp/m/resnet50.int8.onnx --batch 8 --iterations 1 --threads 8 --dump-graph 2>&1 | grep -E "^Conv"
echo done
