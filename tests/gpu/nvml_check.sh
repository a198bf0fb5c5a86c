#!/usr/bin/env bash
# Issue 18's GPU check on a machine with an NVIDIA GPU (tests/gpu/bundle.sh packs what it runs):
# the unit test against the driver's NVML, then a scrape of a real `inferd serve`, idle and while
# PyTorch keeps the GPU busy. Writes its log to $OUT.
set -u
exec > >(tee "$OUT/log.txt") 2>&1
B=/tmp/b; mkdir -p $B && tar -C $B -xJf .devrun/bundle.tar.xz
grep -m1 'model name' /proc/cpuinfo; nproc
grep -o -w -E 'avx2|avx512f|avx512_vnni|avx512_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
nvidia-smi --query-gpu=index,name,memory.total,memory.used,utilization.gpu,clocks.sm --format=csv
nvml=$(ldconfig -p | awk '/libnvidia-ml.so.1 /{print $NF; exit}')
[ -n "$nvml" ] || nvml=$(find /usr/local/nvidia /usr/lib /usr/lib64 -name 'libnvidia-ml.so.1' 2>/dev/null | head -1)
echo "NVML: ${nvml:-none}"
export LD_LIBRARY_PATH=$B/lib${nvml:+:$(dirname "$nvml")}
echo "== unit test"
INFERD_EXPECT_GPU=1 $B/bin/gpu_metrics_test --gtest_filter='*TheDrivers*'; echo "unit rc=$?"
echo "== inferd serve"
$B/bin/inferd serve --model-repository examples/model_repository --http-port 18000 --grpc-port 18001 \
  --metrics-port 18002 > $OUT/serve.log 2>&1 &
scrape() { python3 -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:18002/metrics').read().decode())" | grep '^inferd_gpu'; }
for i in $(seq 60); do python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:18000/v2/health/ready')" 2>/dev/null && break; sleep 1; done
grep -i 'gpu' $OUT/serve.log
echo "-- idle"; scrape
python3 -c "
import torch, time
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
(a @ a).sum().item(); open('/tmp/gpu_busy', 'w').close()
t = time.time()
while time.time() - t < 20: a = (a @ a).clamp(-1, 1)
torch.cuda.synchronize()" &
load=$!
for i in $(seq 90); do [ -f /tmp/gpu_busy ] && break; sleep 1; done
sleep 2
echo "-- under load (after ${i} s)"; scrape
nvidia-smi --query-gpu=index,memory.used,utilization.gpu,clocks.sm --format=csv
sleep 2; echo "-- 2 s later"; scrape
kill $load; pkill -f 'inferd serve'
echo done
