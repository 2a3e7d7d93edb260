"""Tests for gputop_dl.config: the workload file loader and its one-line error messages."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import fields

import pytest

from gputop_dl.config import model_names
from gputop_dl.config import FIELDS, ConfigError, load_session
from gputop_dl.workload import Workload

BASE = """\
[session]
name = "t"

[[workload]]
name = "a"
"""


def write(tmp_path, text: str, name: str = "w.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def load(tmp_path, text: str, gpu_count: int | None = None, **kw):
    return load_session(write(tmp_path, text), gpu_count=gpu_count, **kw)


def error(tmp_path, text: str, gpu_count: int | None = None, **kw) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as ei:
        load_session(path, gpu_count=gpu_count, **kw)
    msg = str(ei.value)
    assert "\n" not in msg and msg.startswith(str(path) + ":"), msg
    return msg


# ---- reading and parsing -------------------------------------------------------------------


def test_missing_file(tmp_path):
    path = tmp_path / "nope.toml"
    with pytest.raises(ConfigError) as ei:
        load_session(path, gpu_count=None)
    msg = str(ei.value)
    assert msg.startswith(f"{path}: cannot read the file: No such file or directory")
    assert "expected a readable TOML workload file" in msg and "\n" not in msg


def test_unreadable_file_is_a_directory(tmp_path):
    with pytest.raises(ConfigError, match="is a directory, not a regular file"):
        load_session(tmp_path, gpu_count=None)


def test_not_utf8(tmp_path):
    path = tmp_path / "w.toml"
    path.write_bytes(b'[session]\nname = "\xff"\n')
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        load_session(path, gpu_count=None)


@pytest.mark.parametrize("text", ["", "# nothing here\n", '[session]\nname = "x"\n'])
def test_no_workload_tables(tmp_path, text):
    msg = error(tmp_path, text)
    assert msg.endswith("w.toml: no [[workload]] tables, expected at least one")


def test_invalid_toml_has_line_and_column(tmp_path):
    msg = error(tmp_path, '[session]\nname = "x"\ninterval 1.0\n')
    assert msg.startswith(str(tmp_path / "w.toml") + ":3:10: invalid TOML: ")
    assert "(at line" not in msg


def test_workload_must_be_array_of_tables(tmp_path):
    msg = error(tmp_path, '[workload]\nname = "a"\n')
    assert "[workload] (line 1): workload is not an array of tables, expected [[workload]] tables" in msg


# ---- unknown keys and tables ---------------------------------------------------------------


def test_unknown_key_in_workload_suggests(tmp_path):
    msg = error(tmp_path, BASE + "batchsize = 32\n")
    assert msg.endswith("w.toml: [[workload]] 'a' (line 6): unknown key 'batchsize', did you mean 'batch_size'?")


def test_unknown_key_without_close_match_lists_keys(tmp_path):
    msg = error(tmp_path, BASE + "zzz = 1\n")
    assert "unknown key 'zzz', expected one of " in msg and "batch_size" in msg


@pytest.mark.parametrize(
    ("text", "where", "line"),
    [
        ('[session]\nintervall = 1\n[[workload]]\nname = "a"\n', "[session]", 2),
        ('[defaults]\nmodle = "resnet18"\n[[workload]]\nname = "a"\n', "[defaults]", 2),
        ('[defaults.cpu_fallback]\nepoch = 1\n[[workload]]\nname = "a"\n', "[defaults.cpu_fallback]", 2),
        (BASE + "[workload.cpu_fallback]\nepoch = 1\n", "[workload.cpu_fallback] of 'a'", 7),
    ],
)
def test_unknown_key_in_every_table(tmp_path, text, where, line):
    msg = error(tmp_path, text)
    assert f": {where} (line {line}): unknown key" in msg and "did you mean" in msg


def test_unknown_top_level_table(tmp_path):
    msg = error(tmp_path, BASE + "[sesion]\nname = 'x'\n")
    assert msg.endswith("w.toml: top level (line 6): unknown table [sesion], did you mean 'session'?")


def test_name_not_allowed_in_defaults(tmp_path):
    msg = error(tmp_path, '[defaults]\nname = "x"\n[[workload]]\nname = "a"\n')
    assert msg.endswith("w.toml: [defaults] (line 2): key 'name' is not allowed here, expected it in each [[workload]]")


def test_workload_key_not_allowed_in_session(tmp_path):
    msg = error(tmp_path, '[session]\nbatch_size = 3\n[[workload]]\nname = "a"\n')
    assert "[session] (line 2): key 'batch_size' is not allowed here, expected it in [[workload]] or [defaults]" in msg


def test_table_expected(tmp_path):
    msg = error(tmp_path, BASE + "cpu_fallback = 3\n")
    assert "[workload.cpu_fallback] of 'a' (line 6): cpu_fallback = 3 is an integer, expected a table" in msg


# ---- types ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "problem", "expected"),
    [
        ('batch_size = "32"', 'batch_size = "32" is a string', "an integer"),
        ("batch_size = true", "batch_size = true is a boolean", "an integer"),
        ("batch_size = 3.5", "batch_size = 3.5 is a number", "an integer"),
        ("model = 3", "model = 3 is an integer", "a string"),
        ("lr = nan", "lr = nan", "a finite number"),
        ('shell = "yes"', 'shell = "yes" is a string', "true or false"),
        ("gpus = 0", "gpus = 0 is an integer", "a list of GPU indexes like [0, 1]"),
        ('gpus = ["0"]', 'gpus[0] = "0" is a string', "a list of GPU indexes"),
        ("transforms = [1]", "transforms[0] = 1 is an integer", "one of \"light\", \"heavy\""),
        ("command = [1, 2]", "command[0] = 1 is an integer", "a non-empty list of strings"),
        ("command = []", "command = [] is empty", "a non-empty list of strings"),
        ("env = {A = 1}", "env.A = 1 is an integer", "a string (quote numbers)"),
        ('env = "A=1"', 'env = "A=1" is a string', "a table of strings"),
    ],
)
def test_wrong_types(tmp_path, line, problem, expected):
    msg = error(tmp_path, BASE + line + "\n")
    key = line.split()[0]
    assert f"w.toml: [[workload]] 'a' key '{key}' (line 6): {problem}, expected {expected}" in msg


def test_int_accepted_for_float_fields(tmp_path):
    spec = load(tmp_path, '[session]\ninterval = 2\n[[workload]]\nname = "a"\nlr = 1\nstep_cpu_ms = 3\n')
    assert spec.interval == 2.0 and isinstance(spec.interval, float)
    assert spec.workloads[0].lr == 1.0 and isinstance(spec.workloads[0].step_cpu_ms, float)


# ---- values --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("batch_size = 0", "a positive integer"),
        ("epochs = 0", "a positive integer"),
        ("steps_per_epoch = -2", "a positive integer"),
        ("num_workers = -1", "an integer 0 or more"),
        ("threads = 0", "a positive integer"),
        ("nproc = 0", "a positive integer"),
        ("lr = 0.0", "a positive learning rate"),
        ("lr = -1", "a positive learning rate"),
        ("num_classes = 0", "at least 1 class"),
        ("sample_cpu_ms = -1", "milliseconds 0 or more"),
        ("step_device_ms = -0.5", "milliseconds 0 or more"),
        ("step_cpu_ms = -3", "milliseconds 0 or more"),
        ("warmup_steps = -1", "an integer 0 or more"),
        ("dataset_size = 0", "a positive integer"),
    ],
)
def test_out_of_range(tmp_path, line, expected):
    key, _, value = line.split()
    msg = error(tmp_path, BASE + line + "\n")
    shown = str(float(value)) if key in ("lr",) or key.endswith("_ms") else value
    assert msg.endswith(f"w.toml: [[workload]] 'a' key '{key}' (line 6): {key} = {shown}, expected {expected}")


def test_input_size_too_small_for_real_model(tmp_path):
    msg = error(tmp_path, BASE + "input_size = 8\n")
    assert msg.endswith("[[workload]] 'a' key 'input_size' (line 6): input_size = 8 is too small for model "
                        '"mobilenet_v2", expected at least 16 (or model = "synthetic")')


def test_input_size_small_ok_for_synthetic(tmp_path):
    w = load(tmp_path, BASE + 'model = "synthetic"\ninput_size = 1\n').workloads[0]
    assert (w.model, w.dataset, w.input_size) == ("synthetic", "synthetic", 1)


def test_error_from_defaults_names_workload_and_origin(tmp_path):
    msg = error(tmp_path, '[defaults]\ninput_size = 8\n\n[[workload]]\nname = "a"\n')
    assert "[[workload]] 'a' key 'input_size' from [defaults] (line 2): input_size = 8 is too small" in msg


def test_unknown_model_suggests(tmp_path):
    msg = error(tmp_path, BASE + 'model = "resnet"\n')
    assert ("[[workload]] 'a' key 'model' (line 6): unknown model \"resnet\", expected a torchvision "
            "classification model name or \"synthetic\"; did you mean 'resnet") in msg
    assert all(f"'{name}'" in msg for name in ("resnet18", "resnet34", "resnet50"))


def test_unknown_dataset(tmp_path):
    msg = error(tmp_path, BASE + 'dataset = "fakedata"\n')
    assert 'dataset = "fakedata" is not supported, expected one of "fake", "imagefolder", "synthetic"' in msg
    assert "(line 6)" in msg and msg.endswith("did you mean 'fake'?")


def test_imagefolder_needs_root(tmp_path):
    msg = error(tmp_path, BASE + 'dataset = "imagefolder"\n')
    assert "[[workload]] 'a' key 'dataset' (line 6): dataset = \"imagefolder\" needs root, expected root = " in msg


def test_imagefolder_root_missing(tmp_path):
    msg = error(tmp_path, BASE + 'dataset = "imagefolder"\nroot = "imgs"\n')
    assert f"key 'root' (line 7): root = \"imgs\": {tmp_path / 'imgs'} does not exist, expected an existing directory" in msg


def test_imagefolder_root_not_a_directory(tmp_path):
    (tmp_path / "f.txt").write_text("x")
    msg = error(tmp_path, BASE + 'dataset = "imagefolder"\nroot = "f.txt"\n')
    assert "f.txt is not a directory" in msg


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('transforms = "medium"', 'transforms = "medium" is not a preset'),
        ("transforms = []", "transforms = [] is empty"),
        ('transforms = ["ToTensor", "Resize 224"]', 'transforms[1] = "Resize 224" is not a transform spec'),
        ('transforms = ["1Crop"]', 'transforms[0] = "1Crop" is not a transform spec'),
    ],
)
def test_bad_transforms(tmp_path, line, problem):
    msg = error(tmp_path, BASE + line + "\n")
    assert f"key 'transforms' (line 6): {problem}, expected " in msg


def test_transforms_list_ok(tmp_path):
    w = load(tmp_path, BASE + 'transforms = ["RandomResizedCrop(224, scale=(0.5, 1))", "ToTensor"]\n').workloads[0]
    assert w.transforms == ("RandomResizedCrop(224, scale=(0.5, 1))", "ToTensor")


def test_bad_optimizer(tmp_path):
    msg = error(tmp_path, BASE + 'optimizer = "adamw2"\n')
    assert "key 'optimizer' (line 6): optimizer = \"adamw2\" is not supported, expected one of \"sgd\"" in msg


def test_bad_baseline(tmp_path):
    msg = error(tmp_path, '[session]\nbaseline = "measured"\n[[workload]]\nname = "a"\n')
    assert msg.endswith("[session] key 'baseline' (line 2): baseline = \"measured\" is not supported, "
                        "expected one of \"measure\", \"cache\", \"probe\", \"none\"; did you mean 'measure'?")


@pytest.mark.parametrize("value", ["0", "-1", "0.01", "61"])
def test_bad_interval(tmp_path, value):
    msg = error(tmp_path, f'[session]\ninterval = {value}\n[[workload]]\nname = "a"\n')
    assert f"[session] key 'interval' (line 2): interval = {float(value)}, expected seconds between samples" in msg


def test_bad_baseline_steps(tmp_path):
    msg = error(tmp_path, '[session]\nbaseline_steps = 0\n[[workload]]\nname = "a"\n')
    assert "[session] key 'baseline_steps' (line 2): baseline_steps = 0, expected a positive integer" in msg


# ---- names ---------------------------------------------------------------------------------


def test_workload_name_missing(tmp_path):
    msg = error(tmp_path, BASE + "\n[[workload]]\nbatch_size = 4\n")
    assert msg.endswith("w.toml: [[workload]] #2 (line 7): missing key 'name', expected name = \"...\" matching "
                        "[A-Za-z0-9_.-]+")


@pytest.mark.parametrize(("value", "problem"), [('""', "name is empty"), ('"a b"', 'name = "a b" has characters')])
def test_workload_name_invalid(tmp_path, value, problem):
    msg = error(tmp_path, f"[[workload]]\nname = {value}\n")
    assert f"[[workload]] #1 key 'name' (line 2): {problem}" in msg


def test_duplicate_workload_names(tmp_path):
    msg = error(tmp_path, BASE + '\n[[workload]]\nname = "a"\n')
    assert msg.endswith("w.toml: [[workload]] #2 key 'name' (line 8): duplicate workload name \"a\" (first at line 5), "
                        "expected unique names")


# ---- GPUs ----------------------------------------------------------------------------------


def test_gpu_not_present(tmp_path):
    msg = error(tmp_path, BASE + "gpus = [0, 7]\n", gpu_count=4)
    assert msg.endswith("w.toml: [[workload]] 'a' key 'gpus' (line 6): GPU 7 not present: this machine has 4 GPUs "
                        "(0-3), expected GPU indexes 0 to 3")


@pytest.mark.parametrize("gpu_count", [None, 0])
def test_gpu_indexes_not_checked_without_cuda(tmp_path, gpu_count):
    spec = load(tmp_path, BASE + "gpus = [0, 7]\n", gpu_count=gpu_count)
    assert spec.cuda is False and spec.workloads[0].gpus == (0, 7)


@pytest.mark.parametrize(("value", "problem"), [("[-1]", "has a negative index"), ("[1, 1]", "lists GPU 1 twice")])
def test_bad_gpu_lists(tmp_path, value, problem):
    msg = error(tmp_path, BASE + f"gpus = {value}\n")
    assert f"key 'gpus' (line 6): gpus = {value.replace(' ', '')} {problem}".replace("[1,1]", "[1, 1]") in msg


# ---- command workloads ---------------------------------------------------------------------


def test_command_string_needs_shell(tmp_path):
    msg = error(tmp_path, BASE + 'command = "python train.py"\n')
    assert "key 'command' (line 6): command = \"python train.py\" is a string, expected a list like" in msg


def test_shell_command_must_be_one_string(tmp_path):
    msg = error(tmp_path, BASE + 'command = ["echo", "hi"]\nshell = true\n')
    assert "key 'command' (line 6): command has 2 items with shell = true, expected one shell command string" in msg


def test_shell_without_command(tmp_path):
    msg = error(tmp_path, BASE + "shell = true\n")
    assert "key 'shell' (line 6): shell = true without a command" in msg


def test_command_empty_program(tmp_path):
    msg = error(tmp_path, BASE + 'command = ["", "x"]\n')
    assert "key 'command' (line 6): command[0] is empty" in msg


def test_cwd_must_exist(tmp_path):
    msg = error(tmp_path, BASE + 'command = ["true"]\ncwd = "nowhere"\n')
    assert f"key 'cwd' (line 7): cwd = \"nowhere\": {tmp_path / 'nowhere'} does not exist" in msg


def test_command_workloads(tmp_path):
    (tmp_path / "scripts").mkdir()
    spec = load(tmp_path, """\
        [[workload]]
        name = "argv"
        command = ["python", "train.py", ""]
        cwd = "scripts"
        env = {A = "1"}
        gpus = [1]

        [[workload]]
        name = "sh"
        command = "echo $HOME | wc -c"
        shell = true

        [[workload]]
        name = "sh-list"
        command = ["echo hi"]
        shell = true
        """, gpu_count=2)
    argv, sh, sh_list = spec.workloads
    assert argv.command == ("python", "train.py", "") and argv.is_command
    assert argv.cwd == str(tmp_path / "scripts") and argv.env == {"A": "1"} and argv.gpus == (1,)
    assert sh.command == ("echo $HOME | wc -c",) and sh.shell and sh.cwd is None
    assert sh_list.command == ("echo hi",)


# ---- synthetic -----------------------------------------------------------------------------


def test_dataset_synthetic_sets_model(tmp_path):
    w = load(tmp_path, BASE + 'dataset = "synthetic"\n').workloads[0]
    assert (w.model, w.dataset) == ("synthetic", "synthetic")


@pytest.mark.parametrize(
    ("lines", "key"),
    [('model = "synthetic"\ndataset = "fake"\n', "dataset"), ('model = "resnet18"\ndataset = "synthetic"\n', "model")],
)
def test_synthetic_mismatch(tmp_path, lines, key):
    msg = error(tmp_path, BASE + lines)
    assert f"[[workload]] 'a' key '{key}' (line" in msg and 'expected model and dataset both "synthetic", or neither' in msg


def test_synthetic_mismatch_with_defaults_names_origin(tmp_path):
    msg = error(tmp_path, '[defaults]\nmodel = "resnet18"\n[[workload]]\nname = "a"\ndataset = "synthetic"\n')
    assert "[[workload]] 'a' key 'model' from [defaults] (line 2): model = \"resnet18\" with dataset = \"synthetic\"" in msg


# ---- happy paths ---------------------------------------------------------------------------

TRIO = """\
[session]
interval = 0.5
baseline = "cache"
baseline_steps = 4

[defaults]
model = "resnet18"
epochs = 2
num_workers = 2
env = {A = "1"}

[defaults.cpu_fallback]
input_size = 64
steps_per_epoch = 6

[[workload]]
name = "bs32"
batch_size = 32
gpus = [0]
env = {B = "2"}
[workload.cpu_fallback]
steps_per_epoch = 4
num_workers = 1

[[workload]]
name = "bs128"
batch_size = 128
model = "mobilenet_v2"
gpus = [2, 3]

[[workload]]
name = "folder"
dataset = "imagefolder"
root = "data/train"
"""


def test_defaults_merge_and_session(tmp_path):
    (tmp_path / "data" / "train").mkdir(parents=True)
    spec = load(tmp_path, TRIO, gpu_count=4)
    assert (spec.name, spec.path, spec.interval, spec.baseline, spec.baseline_steps) == (
        "w", str(tmp_path / "w.toml"), 0.5, "cache", 4)
    assert spec.cuda is True and spec.cpu_fallback_reason is None
    bs32, bs128, folder = spec.workloads
    assert [w.name for w in spec.workloads] == ["bs32", "bs128", "folder"]
    assert (bs32.model, bs32.epochs, bs32.batch_size, bs32.gpus, bs32.num_workers) == ("resnet18", 2, 32, (0,), 2)
    assert bs32.env == {"A": "1", "B": "2"} and bs128.env == {"A": "1"}
    assert (bs128.model, bs128.gpus, bs128.input_size, bs128.steps_per_epoch) == ("mobilenet_v2", (2, 3), 224, None)
    assert folder.root == str(tmp_path / "data" / "train") and folder.dataset == "imagefolder"
    assert all(w.cpu_fallback_applied == () for w in spec.workloads)


@pytest.mark.parametrize("gpu_count", [None, 0])
def test_cpu_fallback_applied_without_cuda(tmp_path, gpu_count):
    (tmp_path / "data" / "train").mkdir(parents=True)
    spec = load(tmp_path, TRIO, gpu_count=gpu_count)
    assert spec.cuda is False
    bs32, bs128, folder = spec.workloads
    assert (bs32.input_size, bs32.steps_per_epoch, bs32.num_workers) == (64, 4, 1)
    assert bs32.cpu_fallback_applied == ("input_size", "num_workers", "steps_per_epoch")
    assert (bs128.input_size, bs128.steps_per_epoch, bs128.num_workers) == (64, 6, 2)
    assert bs128.cpu_fallback_applied == ("input_size", "steps_per_epoch")


def test_no_cpu_fallback_tables(tmp_path):
    spec = load(tmp_path, BASE + "batch_size = 8\n", gpu_count=None)
    assert spec.cuda is False and spec.workloads[0].cpu_fallback_applied == ()
    assert spec.name == "t" and spec.interval == 1.0 and spec.baseline == "measure" and spec.baseline_steps == 8


def test_cpu_fallback_values_validated_even_with_cuda(tmp_path):
    msg = error(tmp_path, BASE + "[workload.cpu_fallback]\nbatch_size = 0\n", gpu_count=2)
    assert "[workload.cpu_fallback] of 'a' key 'batch_size' (line 7): batch_size = 0, expected a positive integer" in msg


def test_cpu_fallback_error_after_merge_names_origin(tmp_path):
    msg = error(tmp_path, '[defaults.cpu_fallback]\ninput_size = 8\n[[workload]]\nname = "a"\n')
    assert "[[workload]] 'a' key 'input_size' from [defaults.cpu_fallback] (line 2): input_size = 8 is too small" in msg


def test_only_filter(tmp_path):
    (tmp_path / "data" / "train").mkdir(parents=True)
    spec = load(tmp_path, TRIO, gpu_count=4, only=["folder", "bs32"])
    assert [w.name for w in spec.workloads] == ["bs32", "folder"]


def test_only_skips_machine_checks_of_unselected(tmp_path):
    spec = load(tmp_path, TRIO, gpu_count=1, only=["bs32"])  # bs128 wants GPUs 2-3, folder's root is missing
    assert [w.name for w in spec.workloads] == ["bs32"]


def test_only_unknown_name(tmp_path):
    msg = error(tmp_path, TRIO, only=["bs32", "bs64"])
    assert msg.endswith('w.toml: workload selection: unknown workload "bs64", expected one of "bs32", "bs128", "folder"')


def test_absolute_root_and_home(tmp_path):
    root = tmp_path / "abs"
    root.mkdir()
    w = load(tmp_path, BASE + f'dataset = "imagefolder"\nroot = "{root}"\n').workloads[0]
    assert w.root == str(root)


def test_relative_paths_resolve_against_file_dir(tmp_path, monkeypatch):
    sub = tmp_path / "conf"
    (sub / "imgs").mkdir(parents=True)
    path = write(sub, BASE + 'dataset = "imagefolder"\nroot = "imgs"\ncommand = ["sh"]\ncwd = "."\n')
    monkeypatch.chdir(tmp_path)
    w = load_session("conf/w.toml", gpu_count=None).workloads[0]
    assert w.root == str(sub / "imgs") and w.cwd == str(sub)
    assert path.exists()


def test_multiline_values_do_not_confuse_line_numbers(tmp_path):
    text = BASE + 'command = [\n  "python",\n  "-c",\n  """\nbatch_size = 1\n""",\n]\nepochs = 0\n'
    msg = error(tmp_path, text)
    assert "key 'epochs' (line 13): epochs = 0" in msg


def test_config_does_not_import_torch_or_textual():
    code = ("import sys, gputop_dl.config; "
            "bad = [m for m in ('torch', 'torchvision', 'textual') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_model_names_match_torchvision():
    tv_models = pytest.importorskip("torchvision.models")
    assert model_names.CLASSIFICATION_MODELS == frozenset(tv_models.list_models(module=tv_models))
    assert model_names.is_classification_model("resnet18") and not model_names.is_classification_model("synthetic")


def test_field_specs_cover_every_workload_field():
    assert set(FIELDS) == {f.name for f in fields(Workload)} - {"cpu_fallback_applied"}


@pytest.mark.parametrize("value", ["0.1", "61", '"long"'])
def test_bad_probe_seconds(tmp_path, value):
    msg = error(tmp_path, f'[session]\nbaseline = "probe"\nprobe_s = {value}\n[[workload]]\nname = "a"\n')
    assert "[session] key 'probe_s' (line 3)" in msg
    assert ("expected a number" if value.startswith('"') else "0.5 to 60") in msg
