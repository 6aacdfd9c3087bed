#!/usr/bin/env bash
# gpu-run.sh [MAIN_CHECKOUT] -- prepare the GPU bundle for one device call.
# Builds the GPU test, the kernel benchmark and the CLI (Release) in this
# checkout, copies them with the shared libraries the device image lacks
# (found with ldd; glibc itself stays) into MAIN_CHECKOUT/.carry/gpu/ (the
# checkout the device tool sends; .carry/ is git-ignored there), and writes
# the remote script. Then call the device tool with
#   carry: [".carry/gpu"]   command: bash .carry/gpu/remote.sh [tests|bench|all] [bench filter]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
main="${1:-/work/main}"
build="$root/build-gpu"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_WERROR=ON >/dev/null
ninja -C "$build" test_gpu_ops test_jit bench_kernels kiln | grep -E "error|FAILED" -A5 || true
ninja -C "$build" test_gpu_ops test_jit bench_kernels kiln >/dev/null
out="$main/.carry/gpu"
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for b in "$build/tests/test_gpu_ops" "$build/tests/test_jit" "$build/bench/bench_kernels" "$build/kiln"; do
  cp "$b" "$out/bin/"
  ldd "$b" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libgcc_s.so*) ;;
      *) cp -L "$lib" "$out/lib/" ;;
    esac
  done
done
cat > "$out/remote.sh" <<'REMOTE'
#!/usr/bin/env bash
# remote.sh [tests|bench|all] [bench filter] -- runs on the device machine.
here="$(cd "$(dirname "$0")" && pwd)"
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}"
export KILN_CACHE_DIR=/tmp/kiln-jit NCCL_NVLS_ENABLE=0
what="${1:-all}"; filter="${2:-}"
out="${OUT:-/tmp/out}"; mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee "$out/gpu.txt"
rc=0
if [ "$what" = tests ] || [ "$what" = all ]; then
  t0=$(date +%s)
  "$here/bin/test_gpu_ops" > "$out/test_gpu_ops.log" 2>&1; rc=$?
  echo "test_gpu_ops rc=$rc ($(( $(date +%s) - t0 )) s)"
  grep -E "FAIL|case:|passed" "$out/test_gpu_ops.log" | head -60
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  "$here/bin/bench_kernels" $filter 2>&1 | tee "$out/bench.log"
fi
exit $rc
REMOTE
chmod +x "$out/remote.sh"
du -sh "$out"
