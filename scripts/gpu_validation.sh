#!/usr/bin/env bash
# The validation list of docs/validation.md on a lent GPU machine, step by step, each step
# time-boxed and logged on its own, so that one failure does not hide the others.
#
#   bash scripts/gpu_validation.sh OUTDIR STEP...    # steps: env once startup machine
#                                                    #        frameworks found serve pair
#                                                    #        shots lab trio gpus2 command
#                                                    #        pace stored long estimate
#                                                    #        cgroupv2
#
# Needs: python3 with torch and CUDA (the device image's), the wheels of what it lacks already
# on PYTHONPATH (textual, platformdirs, py-spy: see docs/validation.md). Writes OUTDIR/*.log,
# OUTDIR/*.json and screenshots; prints one line per step.
set -u
OUTDIR=$1; shift
mkdir -p "$OUTDIR"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export GPUTOP_DL_HOME=$OUTDIR/home PYTHONUNBUFFERED=1
mkdir -p "$GPUTOP_DL_HOME"
G="python3 -m gputop_dl"
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT

step() {  # step NAME SECONDS CMD...: run CMD under a time limit, log it, say how it ended
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout --kill-after=5 "$limit" "$@" >"$OUTDIR/$name.log" 2>&1
  local rc=$?
  echo "step $name: rc=$rc in $((SECONDS - t0)) s"
}

wait_for_step() {  # until each file given has a step report (the script is training), 60 s at most
  local f
  for f in "$@"; do
    for _ in $(seq 120); do grep -q '"step"' "$f" 2>/dev/null && break; sleep 0.5; done
  done
}

gpu_pair() {  # two copies of tests/external/gpu_plain.py on GPU 0, each for $1 seconds
  python3 tests/external/gpu_plain.py --seconds "$1" --data-ms "${2:-0}" >"$OUTDIR/pair_a.out" 2>&1 &
  PIDS+=($!)
  python3 tests/external/gpu_plain.py --seconds "$1" --data-ms "${2:-0}" --width 8192 >"$OUTDIR/pair_b.out" 2>&1 &
  PIDS+=($!)
}

for s in "$@"; do
  case $s in
  env)
    { nvidia-smi; nvidia-smi -q | sed -n '1,400p'; python3 -c 'import torch, sys; print(sys.version); print(torch.__version__, torch.cuda.is_available(), torch.cuda.get_device_name(0))'
      nproc; free -g; df -h /tmp; python3 -m pip list 2>/dev/null | grep -i -E "nvidia-ml|textual|rich|psutil|torch|lightning|transformers|prometheus|platformdirs"; command -v py-spy; } >"$OUTDIR/env.log" 2>&1
    echo "step env: done" ;;
  once)  # 1. one snapshot as JSON on the idle GPU, and the NVML tick's cost
    step once 60 $G --once --json
    cp "$OUTDIR/once.log" "$OUTDIR/once_idle.json"
    step nvml_sample 120 python3 benchmarks/nvml_sample.py --calls 300 ;;
  startup)  # what a real GPU adds to the first screen: NVML's start, and one --once
    for i in 1 2 3; do
      python3 -c 'import time; t = time.perf_counter(); import pynvml; pynvml.nvmlInit(); print(f"nvmlInit {1e3 * (time.perf_counter() - t):.1f} ms")'
      t0=$(date +%s%N); $G --once >/dev/null 2>&1; echo "--once $(( ($(date +%s%N) - t0) / 1000000 )) ms"
    done >"$OUTDIR/startup.log" 2>&1
    echo "step startup: done" ;;
  machine)  # 10. machine's link and copy rates beside plain CUDA C (benchmarks/gpu_copy_ref.cu)
    nvcc -O2 -o "$WORK/copy_ref" benchmarks/gpu_copy_ref.cu >"$OUTDIR/copy_ref_build.log" 2>&1
    step copy_ref_1 60 "$WORK/copy_ref" 256 10
    step machine 240 $G machine --json --out "$OUTDIR/machine.md"
    step copy_ref_2 60 "$WORK/copy_ref" 256 10 ;;
  frameworks)  # on CUDA: the stacks' epochs, steps and phases, the hook's CUDA events
    step frameworks 300 python3 benchmarks/frameworks.py --cuda ;;
  found)  # 6 and 9: one script alone (found, NVML memory, stall), then two on one GPU
    python3 tests/external/gpu_plain.py --seconds 20 --data-ms 5 >"$OUTDIR/solo.out" 2>&1 &
    PIDS+=($!)
    wait_for_step "$OUTDIR/solo.out"
    step found_once 60 $G --once --json --stall 2
    step found_text 60 $G --once --stall 2
    wait; PIDS=()
    gpu_pair 50 5
    wait_for_step "$OUTDIR/pair_a.out" "$OUTDIR/pair_b.out"
    for i in 1 2 3; do
      step pair_once_$i 60 $G --once --json
    done
    step pair_text 60 $G --once --stall 2
    step pair_diagnose 90 $G diagnose --no-probe --json --seconds 12
    wait; PIDS=() ;;
  serve)  # 7 and 10. serve against nvidia-smi while a job loads the GPU
    python3 tests/external/gpu_plain.py --seconds 40 >"$OUTDIR/serve_job.out" 2>&1 &
    PIDS+=($!)
    $G serve --listen 127.0.0.1:9402 >"$OUTDIR/serve.log" 2>&1 &
    PIDS+=($!)
    wait_for_step "$OUTDIR/serve_job.out"
    for i in 1 2 3; do
      curl -s 127.0.0.1:9402/metrics >"$OUTDIR/metrics_$i.txt" & cpid=$!
      nvidia-smi --query-gpu=index,uuid,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw,clocks.sm,clocks_event_reasons.active,pcie.link.gen.current,pcie.link.width.current --format=csv >"$OUTDIR/smi_$i.csv"
      wait $cpid; sleep 2
    done
    cat "$OUTDIR"/metrics_*.txt >"$OUTDIR/metrics.txt"; cat "$OUTDIR"/smi_*.csv >"$OUTDIR/smi.csv"
    rm -f "$OUTDIR"/metrics_?.txt "$OUTDIR"/smi_?.csv
    cleanup; PIDS=()
    echo "step serve: done" ;;
  pair)  # 3. the calibrated shared-GPU pair through launch
    step shared_gpu_pair 240 $G launch workloads/scenarios/shared_gpu_pair.toml --headless ;;
  shots)  # 4. TUI screenshots with the real GPU rows (two jobs on the GPU)
    step shots 240 python3 scripts/screenshots.py --only gpu --out "$OUTDIR/shots" ;;
  lab)  # 5. sweep to the out-of-memory edge, and profile's CUDA table
    step sweep 300 $G sweep --model resnet34 --batch 64,256,1024,2048,4096 --steps 5 --out "$OUTDIR/sweep.md"
    step profile 120 $G profile --model resnet18 --batch 64 --out "$WORK/profile" ;;
  trio)  # 2. the trio on this machine's GPU(s), heavy then light transforms
    sed -e 's/^gpus = \[1\]/gpus = [0]/' -e 's/^gpus = \[2, 3\].*/gpus = [0]/' workloads/mobilenet_trio.toml >"$WORK/trio.toml"
    sed -e 's/^transforms = "heavy"/transforms = "light"/' -e 's/^name = "mobilenet trio"/name = "mobilenet trio light"/' "$WORK/trio.toml" >"$WORK/trio_light.toml"
    step trio_file 30 $G launch workloads/mobilenet_trio.toml --headless
    step trio 420 $G launch "$WORK/trio.toml" --headless
    step trio_light 300 $G launch "$WORK/trio_light.toml" --headless
    $G export "$OUTDIR/trio_light.md" >/dev/null 2>&1; $G sessions >"$OUTDIR/sessions.log" 2>&1 ;;
  gpus2)  # 8. gpus = 2 and nnodes = 2 (needs two GPUs: on one, the error must be clean)
    printf '[session]\nname="two"\nbaseline="none"\n[[workload]]\nname="ddp"\nmodel="synthetic"\ngpus=2\nsteps_per_epoch=5\nepochs=1\n' >"$WORK/gpus2.toml"
    step gpus2 60 $G launch "$WORK/gpus2.toml" --headless ;;
  command)  # 6b. the plain script as a command workload: cuda:N and the CUDA peak via the hook
    printf '[session]\nname="gpu command"\nbaseline="measure"\n[[workload]]\nname="plain"\ncommand=["python3","%s/tests/external/gpu_plain.py","--seconds","15","--data-ms","10"]\n[[workload]]\nname="plain2"\ncommand=["python3","%s/tests/external/gpu_plain.py","--seconds","15","--data-ms","10"]\n' "$ROOT" "$ROOT" >"$WORK/cmd.toml"
    step command 120 $G launch "$WORK/cmd.toml" --headless
    $G export "$OUTDIR/command.md" >/dev/null 2>&1 ;;
  pace)  # on a GPU: a found pair's live slowdown from its loader's pace, a twin's
    step own_pace_gpu 200 python3 benchmarks/own_pace.py --cuda --only "gpu pair" --alone-s 30 --together-s 35 ;;
  stored)  # the same pair started at once, paced by the stored run of one copy alone
    step own_pace_gpu_stored 200 python3 benchmarks/own_pace.py --cuda --stored --only "gpu pair" --alone-s 30 --together-s 35 ;;
  estimate)  # the same pair without loader workers: no pace, the live slowdown is the NVML
    # estimate, which the second H100 run saw swing (docs/validation.md): live against truth
    step own_pace_gpu_estimate 200 python3 benchmarks/own_pace.py --cuda --workers 0 --only "gpu pair" --alone-s 30 --together-s 60 ;;
  long)  # the gradient-accumulation rows of the frameworks table, 5-6x longer, on CUDA
    step frameworks_long 240 python3 benchmarks/frameworks.py --long --cuda ;;
  cgroupv2)  # the cgroup readers on this machine's hierarchy (v2 on most current distributions):
    # its type, this shell's group, then a found job's group figures in --once --json (CPU
    # throttling from cpu.stat, memory.events and refaults, io.stat and io.pressure; null on v1)
    { stat -fc %T /sys/fs/cgroup; cat /proc/self/cgroup; } >"$OUTDIR/cgroupv2_host.log" 2>&1
    python3 tests/external/calibrated.py --steps 0 --workers 2 --sample-cpu-ms 5 --compute-ms 20 \
      >/dev/null 2>&1 & PIDS+=($!)
    sleep 10  # torch imported, its workers forked
    $G --once --json >"$OUTDIR/cgroupv2.json" 2>"$OUTDIR/cgroupv2.log"
    echo "step cgroupv2: rc=$?"
    python3 -c 'import json, sys
for j in json.load(open(sys.argv[1]))["jobs"]:
    print(j["name"], {k: j.get(k) for k in ("mem_cgroup", "mem_limited", "mem_events", "cpu_throttled_fraction", "io_cgroup", "io_cgroup_read_bytes_per_s", "io_cgroup_pressure")})' \
      "$OUTDIR/cgroupv2.json" >>"$OUTDIR/cgroupv2_host.log" 2>&1 ;;
  *) echo "unknown step $s" ;;
  esac
done
tar -C "$OUTDIR" -czf "$OUTDIR/../validation.tgz" . 2>/dev/null
