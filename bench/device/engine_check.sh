#!/usr/bin/env bash
# Issue 19 on another machine's CPU (the lent GPU host: no Debian packages, PyTorch and Python
# onnxruntime there): inferd in fp32 and bf16 against ONNX Runtime on mobilenet_v3_large and
# resnet50 at 2 and 8 threads. Needs .devrun/bundle.tar.xz from tests/gpu/bundle.sh; writes $OUT/log.txt.
# One run each, not interleaved: read it as a first look, not as BENCHMARKS-grade ratios.
set -u
exec > >(tee "$OUT/log.txt") 2>&1
B=/tmp/b; mkdir -p $B && tar -C $B -xJf .devrun/bundle.tar.xz
export LD_LIBRARY_PATH=$B/lib
grep -m1 'model name' /proc/cpuinfo; nproc; lscpu | grep -E "Thread|Core|L2|L3" 
grep -o -w -E 'avx2|avx512f|avx512_vnni|avx512_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
python3 bench/device/export.py /tmp/m || exit 1
for m in mobilenet_v3_large resnet50; do
  for t in 2 8; do
    python3 bench/device/ort.py /tmp/m/$m.onnx $t | sed "s/^/$m t$t /"
    for p in fp32 bf16; do
      for b in 1 8; do
        it=20; [ $b = 8 ] && it=6
        $B/bin/inferd run /tmp/m/$m.onnx --batch $b --iterations $it --warmup 3 --threads $t --precision $p --json 2>&1 |
          python3 -c "import sys,json; t=sys.stdin.read(); j=json.loads(t[t.index('{'):]); print('$m t$t $p b$b', 'p50_ms %.2f' % j['p50_ms'], 'per_s %.1f' % j['throughput_per_s'], 'rss %.0f' % j['peak_rss_mb'], j['precision'])" 2>&1 | tail -1
      done
    done
  done
done
echo done
