"""The queue's keys in a workload file: [session] policy/slots/cpu_aware, per workload arrival, priority, duration_s, gpus = N."""

from __future__ import annotations

import textwrap

import pytest

from gputop_dl.config import ConfigError, load_session

QUEUE = """\
[session]
policy = "sjf"
slots = 3
cpu_aware = false

[[workload]]
name = "a"
arrival = 2.5
priority = 3
duration_s = 12
gpus = 2

[[workload]]
name = "b"
gpus = [1]
"""


def write(tmp_path, text: str):
    path = tmp_path / "q.toml"
    path.write_text(textwrap.dedent(text))
    return path


def error(tmp_path, text: str, gpu_count: int | None = None) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as ei:
        load_session(path, gpu_count=gpu_count)
    msg = str(ei.value)
    assert "\n" not in msg and msg.startswith(f"{path}: "), msg
    return msg[len(str(path)) + 2:]


def test_queue_keys_are_read(tmp_path):
    spec = load_session(write(tmp_path, QUEUE), gpu_count=None)
    assert (spec.policy, spec.slots, spec.cpu_aware) == ("sjf", 3, False)
    a, b = spec.workloads
    assert (a.arrival, a.priority, a.duration_s, a.gpu_count, a.gpus) == (2.5, 3, 12.0, 2, ())
    assert (b.arrival, b.priority, b.duration_s, b.gpu_count, b.gpus) == (0.0, 0, None, None, (1,))


def test_queue_defaults_leave_a_plain_file_as_it_was(tmp_path):
    spec = load_session(write(tmp_path, '[[workload]]\nname = "a"\ngpus = [0]\n'), gpu_count=1)
    assert (spec.policy, spec.slots, spec.cpu_aware, spec.ageing_s, spec.v) == ("fifo", None, None, 600.0, 1.0)
    assert spec.workloads[0].gpus == (0,) and spec.workloads[0].gpu_count is None


def test_gpu_count_from_defaults(tmp_path):
    spec = load_session(write(tmp_path, '[defaults]\ngpus = 1\n[[workload]]\nname = "a"\n'), gpu_count=2)
    assert spec.workloads[0].gpu_count == 1 and spec.workloads[0].gpus == ()


@pytest.mark.parametrize(("text", "want"), [
    ('[session]\npolicy = "lifo"\n[[workload]]\nname = "a"\n',
     "[session] key 'policy' (line 2): policy = \"lifo\" is not supported, expected one of \"fifo\", "
     "\"fifo-backfill\", \"sjf\", \"priority\", \"lyapunov\"; did you mean 'fifo'?"),
    ('[session]\nslots = 0\n[[workload]]\nname = "a"\n',
     "[session] key 'slots' (line 2): slots = 0, expected a positive integer"),
    ('[session]\ncpu_aware = "yes"\n[[workload]]\nname = "a"\n',
     "[session] key 'cpu_aware' (line 2): cpu_aware = \"yes\" is a string, expected true or false"),
    ('[[workload]]\nname = "a"\narrival = -1\n',
     "[[workload]] 'a' key 'arrival' (line 3): arrival = -1.0, expected seconds after the queue's "
     "start, 0 or more"),
    ('[[workload]]\nname = "a"\npriority = 1.5\n',
     "[[workload]] 'a' key 'priority' (line 3): priority = 1.5 is a number, expected an integer"),
    ('[[workload]]\nname = "a"\nduration_s = 0\n',
     "[[workload]] 'a' key 'duration_s' (line 3): duration_s = 0.0, expected the expected solo run "
     "time in seconds, more than 0"),
    ('[[workload]]\nname = "a"\ngpus = -2\n',
     "[[workload]] 'a' key 'gpus' (line 3): gpus = -2 is an integer, expected a list of GPU indexes "
     "like [0, 1] ([] for none), or a GPU count of 1 or more"),
])
def test_bad_queue_values_are_one_line(tmp_path, text, want):
    assert error(tmp_path, text) == want


def test_more_gpus_than_the_machine_has(tmp_path):
    assert error(tmp_path, '[[workload]]\nname = "a"\ngpus = 3\n', gpu_count=2) == (
        "[[workload]] 'a' key 'gpus' (line 3): the job asks for 3 GPUs but this machine has 2 GPUs, "
        "expected at most 2")


def test_more_slots_than_the_queue_has_without_cuda(tmp_path):
    assert error(tmp_path, '[session]\nslots = 2\n[[workload]]\nname = "a"\ngpus = 3\n') == (
        "[[workload]] 'a' key 'gpus' (line 5): the job asks for 3 slots but the queue has 2 slots "
        "([session] slots), expected at most 2")


def test_gpus_count_and_gpu_count_together(tmp_path):
    msg = error(tmp_path, '[[workload]]\nname = "a"\ngpus = 1\ngpu_count = 1\n')
    assert msg.startswith("[[workload]] 'a' key 'gpu_count' (line 4): gpu_count with gpus = N")
