"""The bad-input table, as a user of this project meets it (its configs: the examples' options
and keys, the example named on every training command, whatever the project's defaults): every
mistake below is one paragraph on stderr, exit status 2, no traceback, and nothing written (no
new directory under the log folder).

The table runs each case through the entry point's own `main` in this process, with the
command line in `sys.argv`: the same code path as `python train.py ...` (Hydra, the checks,
the run directory) without paying for a new Python with torch per case. A handful of cases
then run as real `python train.py` / `eval.py` processes.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from my_project.machinery.run import evaluate, predict, train

from ..machinery.helpers import LOG_DIR_VAR, clean_env, pinned, run_entry
from ..machinery.test_build_refusals import CASES as MACHINERY_CASES
from .example import TRAIN_CLASSIFIER

SECRET = "Zq9Xy7Q"  # 7 characters: short secrets are masked by their key's name

# (case id, entry point, overrides, what the message must say). `{file}` is a plain file,
# `{tmp}` a fresh folder, `{broken}` a config folder holding a broken YAML file.
CASES: list[tuple[str, str, str, str]] = [
    (
        "unknown experiment",
        "train",
        "experiment=digits_cnnn",
        "Could not find 'experiment/digits_cnnn' Available options in 'experiment': diabetes, "
        "digits_cnn",
    ),
    (
        "unknown search",
        "train",
        "-m hparams_search=mpl",
        "Could not find 'hparams_search/mpl' Available options in 'hparams_search': mlp",
    ),
    (
        "search direction",
        "train",
        "hparams_search=mlp hydra.sweeper.direction=up",
        "The search settings (hydra.sweeper) cannot work: `directions` must be a list of",
    ),
    (
        "search sampler",  # refused once the study is made in the sweep folder: removed with it
        "train",
        "hparams_search=mlp hydra.sweeper.sampler._target_=optuna.samplers.TPESamplr",
        "cannot work: Error locating target 'optuna.samplers.TPESamplr'",
    ),
    (
        "search beside an experiment of another net",  # the search would tune the MLP
        "train",
        "hparams_search=mlp experiment=digits_cnn",
        "they win over experiment=digits_cnn's (model/net=cnn): this search would tune "
        "data=digits, model=classifier, model/net=mlp, not experiment=digits_cnn.",
    ),
    ("unknown debug option", "train", "debug=default", "Available options in 'debug': fdr,"),
    ("unknown net", "train", "model/net=transformer", "options in 'model/net': cnn, mlp"),
    ("unknown data", "train", "data=imagenet", "options in 'data': diabetes, digits"),
    ("unknown logger", "train", "logger=wandbb", "Could not find 'logger/wandbb' Available"),
    (
        "misspelt group",
        "train",
        "expriment=digits_cnn",
        "Could not override 'expriment' (Key 'expriment' is not in struct). Did you mean "
        "`experiment`?",
    ),
    (
        "unknown key",
        "train",
        "data.batchsize=3",
        "Could not override 'data.batchsize' (Key 'batchsize' is not in struct). Did you mean "
        "`data.batch_size`?",
    ),
    ("malformed override", "train", "model.lr=[", "no viable alternative at input '['"),
    (
        "broken YAML in --config-dir",
        "train",
        "--config-dir={broken} experiment=broken",
        "is not valid YAML",
    ),
    (
        "batch size 0",
        "train",
        "data.batch_size=0",
        "`data.batch_size=0` must be a whole number >= 1",
    ),
    (
        "negative batch size",
        "train",
        "data.batch_size=-3",
        "`data.batch_size=-3` must be a whole number",
    ),
    (
        "batch size not a number",
        "train",
        "data.batch_size=abc",
        "`data.batch_size='abc'` must be an integer",
    ),
    (
        "batch larger than the data",
        "train",
        "data.batch_size=5000",
        "is larger than the training split",
    ),
    (
        "fraction above 1",
        "train",
        "data.val_fraction=1.5",
        "`data.val_fraction=1.5` must be a fraction",
    ),
    (
        "negative fraction",
        "train",
        "data.test_fraction=-0.1",
        "`data.test_fraction=-0.1` must be a fraction",
    ),
    (
        "fractions above 1 together",
        "train",
        "data.val_fraction=0.6 data.test_fraction=0.6",
        "split_sizes have only non-negative entries",  # the example's own refusal
    ),
    (
        "negative workers",
        "train",
        "data.num_workers=-1",
        "`data.num_workers=-1` must be a whole number >= 0",
    ),
    (
        "negative learning rate",
        "train",
        "model.lr=-1",
        "`model.lr=-1` must be a finite number >= 0",
    ),
    ("learning rate not a number", "train", "model.lr=fast", "`model.lr='fast'` must be a number"),
    (
        "negative weight decay",
        "train",
        "model.optimizer.weight_decay=-0.1",
        "weight_decay=-0.1` must be a finite number >= 0",
    ),
    (
        "negative max_epochs",
        "train",
        "trainer.max_epochs=-5",
        "`trainer.max_epochs=-5` was refused by lightning.pytorch.Trainer: MisconfigurationException: `max_epochs` "
        "must be a non-negative integer or -1",
    ),
    (
        "max_epochs not a number",
        "train",
        "trainer.max_epochs=abc",
        "`trainer.max_epochs='abc'` must be an integer or null, not str",
    ),
    (
        "zero nodes",
        "train",
        "trainer.num_nodes=0",
        "`trainer.num_nodes=0` was refused by lightning.pytorch.Trainer: ValueError: `num_nodes` must be a positive "
        "integer",
    ),
    (
        "no such accelerator here",
        "train",
        "trainer.accelerator=tpu",
        "`trainer.accelerator=tpu` was refused by lightning.pytorch.Trainer: "
        "ModuleNotFoundError: Requirement 'torch_xla",
    ),
    (
        "misspelt strategy",
        "train",
        "trainer.strategy=dpp",
        "You selected an invalid strategy name: `strategy='dpp'`",
    ),
    (
        "zero CPU processes",
        "train",
        "trainer.devices=0",
        "`trainer.devices=0` was refused by lightning.pytorch.Trainer: "
        "MisconfigurationException: `Trainer(devices=0)` value is not a valid input",
    ),
    (
        "batch fraction above 1",
        "train",
        "+trainer.limit_train_batches=1.5",
        "`trainer.limit_train_batches=1.5` was refused by lightning.pytorch.Trainer: MisconfigurationException: You "
        "have passed invalid value 1.5 for limit_train_batches, it has to be in [0.0, 1.0]",
    ),
    (
        "log every 0 steps",
        "train",
        "trainer.log_every_n_steps=0",
        "`trainer.log_every_n_steps=0` must be",
    ),
    (
        "accumulate 0 batches",
        "train",
        "+trainer.accumulate_grad_batches=0",
        "`trainer.accumulate_grad_batches=0` must",
    ),
    (
        "validate every 0 batches",
        "train",
        "+trainer.val_check_interval=0",
        "`trainer.val_check_interval=0` must be",
    ),
    (
        "precision not a choice",
        "train",
        "trainer.precision=17",
        "`trainer.precision=17` was refused by lightning.pytorch.Trainer: ValueError: Precision 17 is invalid",
    ),
    (
        "seed not a number",
        "train",
        "seed=abc",
        "seed='abc'` must be an integer or null, not str",
    ),
    ("missing checkpoint", "train", "ckpt_path={tmp}/nope/last.ckpt", "does not exist"),
    ("missing run to resume", "train", "resume={tmp}/no_run", "no such run directory"),
    ("run directory under a file", "train", "hydra.run.dir={file}/run", "is a file"),
    ("log folder under a file", "train", "paths.log_dir={file}/logs", "is a file"),
    (
        "API key under logger.wandb",
        "train",
        f"logger=default +logger.wandb.api_key={SECRET}",
        "credentials do not belong in the config",
    ),
    (
        "misspelt wandb setting",
        "train",
        "logger=default +logger.wandb.projct=x",
        "Did you mean `logger.wandb.project`?",
    ),
    ("eval without a checkpoint", "eval", "", "eval needs a checkpoint"),
    # Tracebacks once, one paragraph now.
    (
        "data folder that is a file",
        "train",
        "data=mnist paths.data_dir={file}",
        "`paths.data_dir={file}` (in data) was refused by "
        "my_project.data.mnist.MNISTDataModule: NotADirectoryError",
    ),
    (
        "a number too long to read",
        "train",
        "model.lr=" + "1" * 5000,
        "(5009 characters)` cannot be read: Exceeds the limit (4300 digits) for integer string "
        "conversion: value has 5000 digits; use sys.set_int_max_str_digits() to increase the "
        "limit. Fix the value of `model.lr` on the command line.",
    ),
    (
        "data the model needs more of",
        "train",
        "data=diabetes",
        "`model.num_classes` has no value: my_project.models.classifier.ImageClassifier needs it "
        "(TypeError: ImageClassifier.__init__() missing 1 required positional argument: "
        "'num_classes'), and neither its config, nor the data module's `model_kwargs()` "
        "(`data=diabetes`) gives it.",
    ),
    (
        "resume of a run whose log file cannot be written",
        "train",
        "resume={unwritable}",
        "Is a directory: '{unwritable}/train.log'",
    ),
    # Values no check knows, refused by the object they reach: the same paragraph.
    (
        "Trainer argument that does not exist",
        "train",
        "+trainer.foo=1",
        "`trainer.foo=1` was refused by lightning.pytorch.Trainer: TypeError: Trainer.__init__() got an unexpected "
        "keyword argument 'foo'",
    ),
    (
        "data removed",
        "train",
        "~data",
        "`~data` was refused: ConfigAttributeError: Key 'data' is not in struct",
    ),
    (
        "negative layer size",
        "train",
        "model.net.hidden=[-5]",
        "`model.net.hidden=[-5]` was refused by my_project.models.nets.MLP",
    ),
    ("layer of size 0", "train", "model.net.hidden=[0]", "the model has a layer of size 0"),
    (
        "duration that is not one",
        "train",
        "+trainer.max_time=abc",
        "`trainer.max_time=abc` was refused by lightning.pytorch.Trainer: MisconfigurationException",
    ),
    (
        "clipping algorithm that does not exist",
        "train",
        "+trainer.gradient_clip_algorithm=foo",
        "`trainer.gradient_clip_algorithm=foo` was refused by lightning.pytorch.Trainer",
    ),
    (
        "monitor mode that is not one",
        "train",
        "monitor_mode=maximum",
        "`monitor_mode=maximum` (in callbacks.model_checkpoint)",
    ),
    (
        "checkpoints to keep below -1",
        "train",
        "callbacks.model_checkpoint.save_top_k=-2",
        "`callbacks.model_checkpoint.save_top_k=-2` was refused",
    ),
    (
        "negative checkpoint interval",
        "train",
        "callbacks.last_checkpoint.every_n_train_steps=-1",
        "`callbacks.last_checkpoint.every_n_train_steps=-1` was refused",
    ),
    ("seed out of bounds", "train", "seed=99999999999", "`seed=99999999999` was refused"),
    (
        "accelerator in capitals",
        "train",
        "trainer.accelerator=CPU",
        "You selected an invalid accelerator name: `accelerator='CPU'`. Available names are",
    ),
    (
        "data module argument that does not exist",
        "train",
        "+data.extra=1",
        "`data.extra=1` was refused by my_project.data.digits.DigitsDataModule",
    ),
    (
        "schedule dividing by zero",
        "train",
        "model.scheduler.T_max=0",
        "`model.scheduler.T_max=0` was refused by torch.optim.lr_scheduler.CosineAnnealingLR: "
        "ZeroDivisionError",
    ),
    (
        "validation interval past the epoch",
        "train",
        "+trainer.val_check_interval=1000",
        "`trainer.val_check_interval=1000` was refused by lightning.pytorch.Trainer: ValueError: "
        "val_check_interval=1000 asks to validate every 1000 training batches",
    ),
    ("several nodes without a launcher", "train", "trainer.num_nodes=2", "wait forever"),
    ("empty run directory", "train", "hydra.run.dir=", "`hydra.run.dir=` is empty"),
    ("infinite learning rate", "train", "model.lr=inf", "`model.lr=inf` must be a finite"),
    (
        "infinite weight decay",
        "train",
        "model.optimizer.weight_decay=inf",
        "`model.optimizer.weight_decay=inf` must be a finite number",
    ),
    (
        "misspelt logger in a list",
        "train",
        "logger=[csv,wandbb]",
        "Could not load 'logger/wandbb'",
    ),
    ("net in capitals", "train", "model/net=CNN", "Could not find 'model/net/CNN' Available"),
    (
        "experiment without @package _global_",
        "train",
        "--config-dir={not_global} experiment=quick",
        "has no `# @package _global_` first line",
    ),
    (
        "an unimportable target",
        "train",
        "model.net._target_=no.such.Net",
        "`model.net._target_=no.such.Net`",
    ),
    ("resume with broken overrides", "train", "resume={broken_overrides}", "cannot be read"),
    (
        "resume asking for fewer epochs than done",
        "train",
        "resume={cnn} trainer.max_epochs=0",
        "has trained 1 epoch, more than trainer.max_epochs=0 asks for",
    ),
    ("eval of an empty file", "eval", "ckpt_path={empty}", "is an empty file (0 bytes)"),
    ("eval of a text file", "eval", "ckpt_path={text}", "torch.save writes a zip archive"),
    ("eval of a saved tensor", "eval", "ckpt_path={tensor}", "it holds a Tensor"),
    (
        "eval with its run's config.yaml broken",
        "eval",
        "ckpt_path={broken_config}/checkpoints/last.ckpt",
        "config.yaml is not valid YAML",
    ),
    (
        "eval of a CNN as an MLP",
        "eval",
        "ckpt_path={cnn}/checkpoints/last.ckpt model/net=mlp",
        "`model/net=mlp` cannot apply: eval.py rebuilds the model from the checkpoint's own "
        "hyperparameters",
    ),
    ("predict with an empty file", "predict", "ckpt_path={empty}", "is an empty file"),
    ("predict with a text file", "predict", "ckpt_path={text}", "torch.save writes a zip"),
    ("predict with a saved tensor", "predict", "ckpt_path={tensor}", "it holds a Tensor"),
    (
        "predict into an empty file name",
        "predict",
        "ckpt_path={cnn}/checkpoints/last.ckpt output_file=",
        "output_file= names no file to write the predictions to",
    ),
    (
        "predict into a directory",
        "predict",
        "ckpt_path={cnn}/checkpoints/last.ckpt output_file={tmp}",
        "names no file to write the predictions to",
    ),
]
if not torch.cuda.is_available():  # FSDP needs a GPU
    CASES.append(
        (
            "FSDP without a GPU",
            "train",
            "trainer.strategy=fsdp",
            "`trainer.strategy=fsdp` was refused by lightning.pytorch.Trainer: ValueError: The strategy `fsdp` "
            "requires a GPU accelerator",
        )
    )
if torch.cuda.is_available():  # the GPU case needs a machine without one
    CASES = [c for c in CASES if c[0] != "no such accelerator here"]
else:
    CASES.append(
        ("GPU on a machine without one", "train", "trainer.accelerator=gpu", "`trainer=cpu`")
    )

MAINS: dict[str, Callable[[], None]] = {
    "train": train.main,
    "eval": evaluate.main,
    "predict": predict.main,
}


@pytest.fixture(scope="module")
def cnn_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of the CNN, one short epoch: the run directory the cases read."""
    run_dir = tmp_path_factory.mktemp("cnn") / "run"
    args = [*TRAIN_CLASSIFIER, "model/net=cnn", "trainer.max_epochs=1"]
    args.append("+trainer.limit_train_batches=3")
    with pytest.MonkeyPatch.context() as monkeypatch:
        code, err = run_in_process(
            "train", [*args, "logger=csv", f"hydra.run.dir={run_dir}"], run_dir.parent, monkeypatch
        )
    assert code == 0, err[-3000:]
    return run_dir


@pytest.fixture
def places(tmp_path: Path, cnn_run: Path) -> dict[str, Path]:
    """The folders and files the cases name, and the (not yet existing) log folder."""
    a_file = tmp_path / "a_file"
    a_file.write_text("not a folder\n")
    broken = tmp_path / "my_configs"
    (broken / "experiment").mkdir(parents=True)
    (broken / "experiment" / "broken.yaml").write_text("trainer:\n  max_epochs: [3\nseed: 1\n")
    places = {"file": a_file, "tmp": tmp_path, "broken": broken, "logs": tmp_path / "logs"}
    for name in ("cnn", "broken_config", "broken_overrides", "unwritable"):  # the CNN's run
        places[name] = tmp_path / name
        shutil.copytree(cnn_run, places[name])
    # As on a read-only mount (this user may be root): the log file cannot be opened.
    (places["unwritable"] / "train.log").unlink()
    (places["unwritable"] / "train.log").mkdir()
    (places["broken_config"] / "config.yaml").write_text("model:\n  _target_: [unclosed\n")
    (places["broken_overrides"] / ".hydra" / "overrides.yaml").write_text("- 'trainer.x=1\n")
    places["empty"] = tmp_path / "empty.ckpt"
    places["empty"].write_bytes(b"")
    places["text"] = tmp_path / "text.ckpt"
    places["text"].write_text("not a checkpoint\n")
    places["tensor"] = tmp_path / "tensor.ckpt"
    torch.save(torch.zeros(3), places["tensor"])
    places["not_global"] = tmp_path / "not_global"
    (places["not_global"] / "experiment").mkdir(parents=True)
    (places["not_global"] / "experiment" / "quick.yaml").write_text("trainer:\n  max_epochs: 1\n")
    return places


def overrides(case: str, places: dict[str, Path]) -> list[str]:
    return case.format(**{k: str(v) for k, v in places.items()}).split()


def naming_the_example(script: str, args: list[str]) -> list[str]:
    """A training command's ``args`` plus the example's model, data and metric names that they
    do not set themselves. eval and predict, and a resume, take the checkpoint's run's."""
    if script != "train" or any(a.startswith("resume=") for a in args):
        return args
    named = {a.lstrip("+~").split("=", 1)[0] for a in args}
    return [*args, *(o for o in TRAIN_CLASSIFIER if o.split("=", 1)[0] not in named)]


def run_in_process(
    script: str, args: list[str], log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str]:
    """`python <script>.py <args>` through the entry point's `main`, in this process: exit
    status and stderr."""
    monkeypatch.setenv(LOG_DIR_VAR, str(log_dir))
    monkeypatch.setattr(sys, "argv", [f"{script}.py", *pinned(naming_the_example(script, args))])
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            MAINS[script]()
        except SystemExit as stop:
            return int(stop.code or 0), err.getvalue()
    return 0, err.getvalue()


def assert_one_paragraph_error(code: int, err: str, expected: str) -> None:
    assert code == 2, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    message = err.strip().split("\n\n")[-1]  # the last paragraph is the error
    assert message.startswith("Error: ") and "\n" not in message, err[-3000:]
    assert expected in message, message


# The inputs the machinery's table (test_build_refusals.py) also gives a team's module run in the
# fast tier there; here, on the example, they wait for `make test`.
ON_A_TEAMS_MODULE = {case[0] for case in MACHINERY_CASES}


@pytest.mark.parametrize(
    ("script", "case", "expected"),
    [
        pytest.param(*c[1:], id=c[0], marks=[pytest.mark.slow] if c[0] in ON_A_TEAMS_MODULE else [])
        for c in CASES
    ],
)
def test_bad_input_is_one_paragraph_exit_2_and_writes_nothing(
    script: str,
    case: str,
    expected: str,
    places: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, err = run_in_process(script, overrides(case, places), places["logs"], monkeypatch)
    for name, place in places.items():
        expected = expected.replace("{" + name + "}", str(place))
    assert_one_paragraph_error(code, err, expected)
    assert not places["logs"].exists(), sorted(places["logs"].rglob("*"))
    assert SECRET not in err


def test_the_table_holds_at_least_30_bad_inputs() -> None:
    assert len(CASES) >= 30


@pytest.mark.slow
@pytest.mark.parametrize(
    ("script", "case", "expected"),
    [
        ("train", "experiment=digits_cnnn", "Could not find 'experiment/digits_cnnn'"),
        ("train", "data.batch_size=0", "`data.batch_size=0` must be a whole number >= 1"),
        ("train", "hydra.run.dir={file}/run", "is a file"),
        ("train", "--config-dir={broken} experiment=broken", "is not valid YAML"),
        ("train", f"logger=default +logger.wandb.api_key={SECRET}", "credentials do not belong"),
        ("eval", "", "eval needs a checkpoint"),
    ],
    ids=[
        "unknown option",
        "value out of range",
        "run dir under a file",
        "broken YAML",
        "API key",
        "eval",
    ],
)
def test_bad_input_from_a_real_command_line(
    script: str, case: str, expected: str, places: dict[str, Path]
) -> None:
    result = run_entry(
        script,
        *naming_the_example(script, overrides(case, places)),
        env=clean_env(**{LOG_DIR_VAR: str(places["logs"])}),
    )
    assert_one_paragraph_error(result.returncode, result.stderr, expected)
    assert not places["logs"].exists(), sorted(places["logs"].rglob("*"))
    assert SECRET not in result.stdout + result.stderr
    assert f"{script}: " not in result.stdout  # no first line naming the directory not kept


def test_a_failed_check_leaves_an_existing_run_directory_and_its_files(
    places: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a directory this process created is removed: one given on the command line that
    already existed keeps everything, Hydra's record of the failed command included."""
    run_dir = places["tmp"] / "existing"
    run_dir.mkdir()
    (run_dir / "notes.txt").write_text("mine\n")
    code, err = run_in_process(
        "train", ["data.batch_size=0", f"hydra.run.dir={run_dir}"], places["logs"], monkeypatch
    )
    assert_one_paragraph_error(code, err, "`data.batch_size=0`")
    assert (run_dir / "notes.txt").read_text() == "mine\n"
    assert (run_dir / ".hydra" / "overrides.yaml").is_file()


def test_a_run_directory_given_on_the_command_line_is_removed_when_it_is_new(
    places: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = places["tmp"] / "new" / "run"
    code, err = run_in_process(
        "train", ["data.batch_size=0", f"hydra.run.dir={run_dir}"], places["logs"], monkeypatch
    )
    assert_one_paragraph_error(code, err, "`data.batch_size=0`")
    assert not (places["tmp"] / "new").exists()


def test_value_checks_hold_for_a_teams_own_keys() -> None:
    """By key name, in any data or model config: the team's `encoder_lr`, `eval_batch_size`
    or `holdout_fraction` are checked like the example's."""
    from my_project.machinery.preflight.values import named_value_errors

    config = {
        "data": {"eval_batch_size": 0, "holdout_fraction": 2.0, "loader": {"num_workers": -2}},
        "model": {"encoder_lr": -0.5, "head": {"lr": 0.01}},
    }
    errors = "; ".join(named_value_errors(config))
    for key in ("eval_batch_size=0", "holdout_fraction=2.0", "loader.num_workers=-2"):
        assert f"data.{key}" in errors
    assert "model.encoder_lr=-0.5" in errors
    assert "head.lr" not in errors


def test_a_broken_yaml_file_hydra_reads_is_named_with_its_line(tmp_path: Path) -> None:
    """A broken file in configs/ fails while Hydra composes: the same one paragraph."""
    import yaml

    from my_project.machinery.run.hydra_errors import explain

    broken = tmp_path / "broken.yaml"
    broken.write_text("trainer:\n  max_epochs: [3\nseed: 1\n")
    try:
        with open(broken) as handle:
            yaml.safe_load(handle)
    except yaml.YAMLError as error:
        wrapped = RuntimeError("Error loading experiment/broken.yaml")
        wrapped.__cause__ = error
        message = str(explain(wrapped))
    assert message.startswith(f"{broken} is not valid YAML") and "(line 3, column 5)" in message


def test_a_run_that_was_refused_leaves_the_runs_it_read_as_they_were(
    places: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`resume=` refused (fewer epochs than done): the run directory, Hydra's record of it
    included, is as it was; nothing of the refused command is added."""
    run = places["cnn"]
    before = {str(p): p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file()}
    code, err = run_in_process(
        "train", [f"resume={run}", "trainer.max_epochs=0"], places["logs"], monkeypatch
    )
    assert_one_paragraph_error(code, err, "has trained 1 epoch")
    assert {str(p): p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file()} == before


# Cases exactly as a user types them (an environment variable, a value with a
# space, a launcher), through the real command line: (id, environment, arguments, message).
COMMAND_LINES: list[tuple[str, dict[str, str], list[str], str]] = [
    ("empty log dir variable", {LOG_DIR_VAR: ""}, [], "paths.log_dir is empty"),
    ("empty run dir", {}, ["hydra.run.dir="], "`hydra.run.dir=` is empty"),
    (
        "value with a space",
        {},
        ["+data.extra=key: value"],
        "`data.extra=key: value` was refused by my_project.data.digits.DigitsDataModule",
    ),
    (
        "launch port that is not one",
        {"MASTER_PORT": "abc"},
        ["trainer.accelerator=cpu", "trainer.devices=2"],
        "MASTER_PORT='abc' is not a TCP port",
    ),
    ("two nodes without a launcher", {}, ["trainer.num_nodes=2"], "wait forever"),
    (
        "wandb online without credentials",
        {"WANDB_MODE": "online", "NETRC": "/nonexistent/netrc"},
        ["logger=default", "trainer.max_epochs=1"],  # CSV and wandb, whatever the project's
        "WANDB_MODE=online asks wandb to log online, but no credentials were found",
    ),
]
if not shutil.which("sbatch") and not shutil.which("srun"):
    COMMAND_LINES.append(
        ("SLURM without SLURM", {}, ["-m", "hydra/launcher=slurm"], 'Could not detect "srun"')
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("env", "args", "expected"), [c[1:] for c in COMMAND_LINES], ids=[c[0] for c in COMMAND_LINES]
)
def test_bad_input_with_its_environment_from_a_real_command_line(
    env: dict[str, str], args: list[str], expected: str, tmp_path: Path
) -> None:
    """Run from an empty folder: whatever a failed check would write relative to the current
    directory (`hydra.run.dir=`) would show there."""
    logs = tmp_path / "logs"
    work = tmp_path / "work"
    work.mkdir()
    result = run_entry(
        "train",
        *naming_the_example("train", args),
        cwd=work,
        timeout=180,
        env=clean_env(**{LOG_DIR_VAR: str(logs), **env}),
    )
    assert_one_paragraph_error(result.returncode, result.stderr, expected)
    assert "credentials found but" not in result.stderr  # WANDB_MODE=online said so
    assert not logs.exists() and not list(work.iterdir())
