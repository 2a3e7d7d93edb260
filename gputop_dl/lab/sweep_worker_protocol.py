"""The sweep worker's result-line marker and test hook (shared with the torch-free parent)."""

RESULT_KEY = "gputop_dl_sweep"
# Test hook: batches >= this value raise torch.cuda.OutOfMemoryError in their first step.
ENV_FAKE_OOM = "GPUTOP_DL_SWEEP_FAKE_OOM"
