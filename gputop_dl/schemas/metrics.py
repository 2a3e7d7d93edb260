"""The exporter's metric schema: metric and label names, shared by the writer and the reader.

`present/prometheus.py` writes these series and `collect/fleet/nodes.py` reads them back (from a node's
`/metrics` or a Prometheus server), so a name is written once, here. The names are a contract
(dashboards and PromQL use them): keep them; the list with units and labels is in
docs/prometheus.md and docs/contracts.md.

Names here are the metric *suffixes* the exporter hands `prometheus_client` (without PREFIX);
`full(s)` is a gauge's sample name and `info(s)` an info family's (prometheus_client appends
`_info` to an InfoMetricFamily's samples).
"""

from __future__ import annotations

PREFIX = "gputop_dl_"
DEFAULT_PORT = 9402  # the exporter's; not dcgm-exporter's 9400, nvitop-exporter's 5050 or Ray's 8265


def full(suffix: str) -> str:
    """A gauge's sample name: `gputop_dl_<suffix>`."""
    return PREFIX + suffix


def info(suffix: str) -> str:
    """An info family's sample name: `gputop_dl_<suffix>_info`."""
    return PREFIX + suffix + "_info"


# --- label names ---------------------------------------------------------------------------
HOSTNAME = "Hostname"  # dcgm-exporter's, so PromQL joins with it
GPU = "gpu"
UUID = "UUID"
MODEL_NAME = "modelName"
JOB_NAME = "job_name"  # not `job`: Prometheus owns that target label
PID = "pid"
RUN_ID = "run_id"
RANK = "rank"
LOCAL_RANK = "local_rank"
WORLD_SIZE = "world_size"
RANK_PID = "rank_pid"
CPU = "cpu"
REASON = "reason"
SOURCE = "source"
SESSION = "session"
KIND = "kind"
STATUS = "status"
VERSION = "version"
MODE = "mode"
# gputop_dl_job_info's labels besides JOB_LABELS
LAUNCHED = "launched"  # "true" or "false"
PHASE = "phase"
DEVICE = "device"
MODEL = "model"

GPU_LABELS = [HOSTNAME, GPU, UUID, MODEL_NAME]
JOB_LABELS = [HOSTNAME, JOB_NAME, PID]
RANK_LABELS = JOB_LABELS + [RUN_ID, RANK, LOCAL_RANK, WORLD_SIZE, RANK_PID]

# --- info families (one sample of value 1, the facts in its labels) -------------------------
EXPORTER = "exporter"
GPU_STATUS = "gpu_status"
JOB = "job"
JOB_RANK = "job_rank"

# --- gauges --------------------------------------------------------------------------------
LAST_SAMPLE_TIMESTAMP = "last_sample_timestamp_seconds"

GPU_UP = "gpu_up"
GPU_UTILIZATION = "gpu_utilization_ratio"
GPU_MEMORY_UTILIZATION = "gpu_memory_utilization_ratio"
GPU_MEMORY_USED = "gpu_memory_used_bytes"
GPU_MEMORY_TOTAL = "gpu_memory_total_bytes"
GPU_TEMPERATURE = "gpu_temperature_celsius"
GPU_POWER = "gpu_power_watts"
GPU_POWER_LIMIT = "gpu_power_limit_watts"
GPU_SM_CLOCK = "gpu_sm_clock_hertz"
GPU_PCIE_TX = "gpu_pcie_tx_bytes_per_second"
GPU_PCIE_RX = "gpu_pcie_rx_bytes_per_second"
GPU_THROTTLE_REASON = "gpu_throttle_reason"
# GPU clocks and PCIe: NVML's cumulative counters as a share of the last interval
GPU_THROTTLED = "gpu_throttled_ratio"  # with REASON
GPU_SM_CLOCK_MAX = "gpu_sm_clock_max_hertz"
GPU_PCIE_LINK_GEN = "gpu_pcie_link_generation"
GPU_PCIE_LINK_GEN_MAX = "gpu_pcie_link_generation_max"
GPU_PCIE_LINK_WIDTH = "gpu_pcie_link_width"
GPU_PCIE_LINK_WIDTH_MAX = "gpu_pcie_link_width_max"

HOST_CPUS = "host_cpus"
HOST_CPU_BUSY = "host_cpu_busy_ratio"
HOST_CPU_PRESSURE_SOME = "host_cpu_pressure_some_ratio"
HOST_IO_PRESSURE_SOME = "host_io_pressure_some_ratio"
HOST_MEMORY_PRESSURE_SOME = "host_memory_pressure_some_ratio"
HOST_MEMORY_PRESSURE_FULL = "host_memory_pressure_full_ratio"
HOST_MEMORY_REFAULTS = "host_memory_refault_bytes_per_second"
HOST_CGROUP_THROTTLED = "host_cgroup_throttled_ratio"
HOST_LOAD1 = "host_load1"
HOST_LOAD5 = "host_load5"
HOST_LOAD15 = "host_load15"
HOST_MEMORY_USED = "host_memory_used_bytes"
HOST_MEMORY_TOTAL = "host_memory_total_bytes"
HOST_CPU_CORE_BUSY = "host_cpu_core_busy_ratio"

JOB_CPU_CORES = "job_cpu_cores"
JOB_IO_READ = "job_io_read_bytes_per_second"
JOB_IO_WAIT = "job_io_wait_ratio"
JOB_MAJOR_FAULTS = "job_major_faults_per_second"
JOB_MEMORY_REFAULTS = "job_memory_refault_bytes_per_second"
JOB_MEMORY_WAIT = "job_memory_wait_ratio"
JOB_RSS = "job_rss_bytes"
JOB_THREADS = "job_threads"
JOB_GPU_MEMORY = "job_gpu_memory_bytes"
JOB_GPU_SM = "job_gpu_sm_ratio"
JOB_STEP = "job_step_seconds"
JOB_SOLO_STEP = "job_solo_step_seconds"
JOB_SAMPLES_PER_SECOND = "job_samples_per_second"
JOB_EPOCH = "job_epoch"
JOB_EPOCHS = "job_epochs"
JOB_STEP_IN_EPOCH = "job_step"
JOB_ETA = "job_eta_seconds"
JOB_SLOWDOWN = "job_slowdown"
JOB_RANK_CPU_CORES = "job_rank_cpu_cores"
JOB_DATA_STALL = "job_data_stall_ratio"  # the job's stall_fraction, with SOURCE
# energy (docs/energy.md): counters of joules since the exporter first read the GPU or saw the
# job (`_total` is appended by prometheus_client), how the GPU's were read, a job's power and
# per-step figures; SCOPE: gpu | module (a Grace superchip's power includes its CPU and memory)
GPU_ENERGY = "gpu_energy_joules"
GPU_ENERGY_SOURCE = "gpu_energy_source"  # info: SOURCE, SCOPE
JOB_ENERGY = "job_energy_joules"
JOB_POWER = "job_power_watts"
JOB_ENERGY_PER_STEP = "job_energy_per_step_joules"
JOB_ENERGY_PER_EPOCH = "job_energy_per_epoch_joules"
JOB_SAMPLES_PER_JOULE = "job_samples_per_joule"
JOB_ENERGY_ESTIMATE = "job_energy_estimate"
SCOPE = "scope"
HOST_CPU_ENERGY = "host_cpu_energy_joules"  # a counter: RAPL's CPU packages, not split per job
HOST_CPU_POWER = "host_cpu_power_watts"

# a stuck job (docs/stuck.md): 1 stuck, 0 watched and not; where it hangs (info, while stuck:
# WHERE and FRAME); seconds since its last progress (steps, loop counter, loader batches)
JOB_STUCK = "job_stuck"
JOB_STUCK_WHERE = "job_stuck_where"
JOB_SINCE_PROGRESS = "job_seconds_since_progress"
WHERE = "where"
FRAME = "frame"

VERDICT = "verdict"
VERDICT_CONFIDENCE = "verdict_confidence"

# live verdict: each job's one slowdown with its source, an estimate's confidence
JOB_SLOWDOWN_BY_SOURCE = "job_slowdown_by_source"  # with SOURCE: measured | probe | estimated | own pace
JOB_SLOWDOWN_CONFIDENCE = "job_slowdown_confidence"
# ... and where it has none, its own pace's bound: at least this slow (with SOURCE)
JOB_SLOWDOWN_AT_LEAST = "job_slowdown_at_least"
# load from outside the jobs: what it costs each job, and the cores it takes
JOB_OUTSIDE_SLOWDOWN = "job_outside_slowdown"
OUTSIDE_LOAD_CORES = "outside_load_cores"
