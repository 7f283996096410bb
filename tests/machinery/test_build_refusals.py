"""Build, then write: every object a run names is built, and what would fail only once it
trains is tried, before the first file of the run; whatever is refused is one `Error:`
paragraph (exit status 2) that names the config key and the value, and nothing is left.

On a team's own module and data (docs_style.py), so the answers hold for any class: most
values below are not known to any check of `preflight`, only to the class they reach (the
Trainer, a callback, the team's own module). Each case runs through the entry point's own
`main` in this process (Hydra, the checks, the run directory, as from the command line).
"""

from __future__ import annotations

import errno
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from lightning.pytorch import Callback, LightningModule, Trainer

from my_project.machinery.preflight import schedules
from my_project.machinery.reliability import atomic_io

from .docs_style import LitClassifier, LitDataModule
from .helpers import (
    DOCS_STYLE,
    DOCS_STYLE_EVAL,
    PACKAGE,
    SEARCH_MACHINERY_CONFIGS,
    one_paragraph_error,
    run_main_in_process,
)

TRAIN = [*DOCS_STYLE, "trainer.max_epochs=1", "logger=csv"]

# (case id, entry point, overrides, what the message must say). Overrides are split on spaces
# and follow the docs-style module's own (`DOCS_STYLE` for train, `DOCS_STYLE_EVAL` for eval
# and predict), unless they start with `!`. `{name}` is a path of the `places` fixture.
CASES: list[tuple[str, str, str, str]] = [
    (
        "Trainer argument that does not exist",
        "train",
        "+trainer.foo=1",
        "`trainer`, with `trainer.max_epochs=1`, `trainer.foo=1` from the command line was "
        "refused by lightning.pytorch.Trainer: TypeError: Trainer.__init__() got an unexpected "
        "keyword argument 'foo'",
    ),
    (
        "misspelt Trainer argument",
        "train",
        "+trainer.max_epoch=3",
        "`trainer.max_epoch=3` from the command line was refused by lightning.pytorch.Trainer: "
        "TypeError: Trainer.__init__() got an unexpected keyword argument 'max_epoch'",
    ),
    (
        "module argument that does not exist",
        "train",
        "+model.foo=1",
        "`model.foo=1` was refused by tests.machinery.docs_style.LitClassifier: TypeError",
    ),
    (
        "data module argument that does not exist",
        "train",
        "+data.extra=1",
        "`data.extra=1` was refused by tests.machinery.docs_style.LitDataModule",
    ),
    (
        "setting of a logger the chosen loggers lack",
        "train",
        "+logger.wandb.project=mine",
        "`logger.wandb` has settings (logger.wandb.project) but nothing to build: the logger "
        "chosen (csv) does not include `wandb`",
    ),
    (
        "setting of a callback not chosen",
        "train",
        "+callbacks.ema.decay=0.9",
        "Choose it first, e.g. `callbacks=[default,ema]`",
    ),
    ("data removed", "train", "~data", "Interpolation key 'data.num_features' not found"),
    (
        "module argument nothing gives",
        "train",
        "~model.num_classes",
        "`model.num_classes` has no value: tests.machinery.docs_style.LitClassifier needs it",
    ),
    (
        "negative layer size",
        "train",
        "model.hidden=-5",
        "`model.hidden=-5` was refused by tests.machinery.docs_style.LitClassifier: RuntimeError",
    ),
    ("layer of size 0", "train", "model.hidden=0", "`model.hidden=0` was refused"),
    (
        "duration that is not one",
        "train",
        "+trainer.max_time=abc",
        "`trainer.max_time=abc` from the command line was refused by lightning.pytorch.Trainer: "
        "MisconfigurationException: `Timer(duration='abc')` is not a valid duration",
    ),
    (
        "clipping algorithm that does not exist",
        "train",
        "+trainer.gradient_clip_algorithm=foo",
        "`trainer.gradient_clip_algorithm=foo` from the command line",
    ),
    (
        "monitor mode that is not one",
        "train",
        "monitor_mode=maximum",
        "`monitor_mode=maximum` (in callbacks.model_checkpoint) was refused by "
        f"{PACKAGE}.machinery.callbacks.movable_checkpoint.MovableCheckpoint: "
        "MisconfigurationException: `mode` can be min, max but got maximum",
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
    (
        "seed out of bounds",
        "train",
        "seed=99999999999",
        "`seed=99999999999` was refused by lightning.seed_everything",
    ),
    (
        "validation interval longer than an epoch",
        "train",
        "+trainer.val_check_interval=1000",
        "`trainer.val_check_interval=1000` from the command line was refused by "
        "lightning.pytorch.Trainer: ValueError: val_check_interval=1000 asks to validate every "
        "1000 training batches, but an epoch has 16",
    ),
    ("several nodes without a launcher", "train", "trainer.num_nodes=2", "wait forever"),
    (
        "accelerator in capitals",
        "train",
        "trainer.accelerator=CPU",
        "You selected an invalid accelerator name: `accelerator='CPU'`. Available names are",
    ),
    (  # Lightning would only warn and train in bf16-mixed: not what the config says
        "float16 on the CPU",
        "train",
        "trainer.precision=16-mixed",
        "trainer.precision=16-mixed asks for float16 autocast, which Lightning does not run on CPU",
    ),
    (
        "option in capitals",
        "train",
        "data=DOCS_STYLE",
        "Could not find 'data/DOCS_STYLE' Available options in 'data':",  # the project's own
    ),
    (
        "misspelt logger in a list",
        "train",
        "logger=[csv,wandbb]",
        "Could not load 'logger/wandbb'. `python train.py --help` lists the config groups",
    ),
    ("infinite learning rate", "train", "model.lr=inf", "`model.lr=inf` must be a finite number"),
    (
        "weight decay not a number",
        "train",
        "+model.weight_decay=nan",
        "`model.weight_decay=nan` must be a finite number",
    ),
    ("empty run directory", "train", "hydra.run.dir=", "`hydra.run.dir=` is empty"),
    ("empty log directory", "train", "paths.log_dir=", "paths.log_dir is empty"),
    ("empty logger folder", "train", "logger.csv.save_dir=", "`logger.csv.save_dir=` is empty"),
    (
        "eval of a folder",
        "eval",
        "ckpt_path={run}",
        "is a directory, not a checkpoint file. It holds checkpoints/",
    ),
    (
        "experiment without @package _global_",
        "train",
        "!--config-dir={not_global} " + " ".join(DOCS_STYLE_EVAL) + " experiment=quick",
        "The `experiment` config you chose has no `# @package _global_` first line",
    ),
    ("empty checkpoint to resume", "train", "ckpt_path={empty}", "is an empty file (0 bytes)"),
    (
        "resume with broken overrides.yaml",
        "train",
        "!resume={broken_overrides}",
        "overrides.yaml cannot be read",
    ),
    (
        "resume asking for fewer epochs than done",
        "train",
        "!resume={run} trainer.max_epochs=0",
        "has trained 1 epoch, more than trainer.max_epochs=0 asks for",
    ),
    (
        "checkpoint past the epochs asked for",
        "train",
        "ckpt_path={run}/checkpoints/last.ckpt trainer.max_epochs=0",
        "has trained 1 epoch, more than trainer.max_epochs=0 asks for",
    ),
    (
        "checkpoint of another model past the epochs asked for",  # its model first
        "train",
        f"!{SEARCH_MACHINERY_CONFIGS} experiment=lht_style logger=csv trainer.max_epochs=0 "
        "ckpt_path={run}/checkpoints/last.ckpt",
        "last.ckpt is a checkpoint of a different model: the run that wrote it trained "
        "tests.machinery.docs_style.LitClassifier, this run's model is",
    ),
    ("eval of an empty file", "eval", "ckpt_path={empty}", "is an empty file (0 bytes)"),
    ("eval of a text file", "eval", "ckpt_path={text}", "torch.save writes a zip archive"),
    ("eval of a saved tensor", "eval", "ckpt_path={tensor}", "it holds a Tensor"),
    (
        "eval with the run's config.yaml broken",
        "eval",
        "!" + SEARCH_MACHINERY_CONFIGS + " ckpt_path={broken_config}/checkpoints/last.ckpt",
        "config.yaml is not valid YAML",
    ),
    (
        "eval with a model setting the checkpoint overrides",
        "eval",
        "ckpt_path={run}/checkpoints/last.ckpt model.hidden=64",
        "`model.hidden=64` cannot apply: eval.py rebuilds the model from the checkpoint's own "
        "hyperparameters",
    ),
    ("predict with an empty file", "predict", "ckpt_path={empty}", "is an empty file"),
    ("predict with a text file", "predict", "ckpt_path={text}", "torch.save writes a zip"),
    ("predict with a saved tensor", "predict", "ckpt_path={tensor}", "it holds a Tensor"),
    (
        "predict into an empty file name",
        "predict",
        "ckpt_path={run}/checkpoints/last.ckpt output_file=",
        "output_file= names no file to write the predictions to",
    ),
    (
        "predict into a directory",
        "predict",
        "ckpt_path={run}/checkpoints/last.ckpt output_file={tmp}",
        "names no file to write the predictions to",
    ),
]
# A key added on the command line that nothing of the run reads: every entry point says so.
CASES += [
    (
        f"key nothing of {script} reads",
        script,
        "+input_file={tmp}/inputs.npy ckpt_path={run}/checkpoints/last.ckpt",
        "`+input_file={tmp}/inputs.npy` adds `input_file`, which nothing of "
        + script
        + ".py reads",
    )
    for script in ("train", "eval", "predict", "serve", "export")
]
CASES.append(
    (
        "misspelt key added",
        "train",
        "+monitr=val_loss",
        "`+monitr=val_loss` adds `monitr`, which nothing of train.py reads (not a key of "
        "train.py's config, nor a setting of an object the run builds): the run would ignore "
        "it. Remove it. Did you mean `monitor=`?",
    )
)
CASES.append(("setting nothing reads", "train", "+paths.extra=1", "adds `paths.extra`, which"))
# A callback's own monitor typed alone (as lightning-hydra-template's configs set it): its mode
# still follows `monitor_mode`, the direction of the project's metric.
CASES.append(
    (
        "checkpoint monitor without its mode",
        "train",
        "callbacks.model_checkpoint.monitor=val_loss",
        "callbacks.model_checkpoint.monitor=val_loss is set without "
        "callbacks.model_checkpoint.mode, which follows `monitor_mode=max` (the direction of "
        "`monitor=val_acc`), so the callback would count a higher val_loss as better. Set the "
        "project's keys, which every callback reads: `monitor=val_loss monitor_mode=min`",
    )
)
# Keys lightning-hydra-template names otherwise: the refusal says what to type here.
CASES += [
    (
        "LHT's extras",
        "train",
        "extras.print_config=false",
        "`extras` is lightning-hydra-template's: here every run prints its config tree and "
        "saves it (`config_tree.log`), with nothing to turn on or off.",
    ),
    (
        "LHT's extras added",
        "train",
        "+extras.print_config=false",
        "the run would ignore it. Remove it. `extras` is lightning-hydra-template's",
    ),
    (
        "early stopping not chosen",
        "train",
        "callbacks.early_stopping.patience=3",
        "`early_stopping` is a callback the run has not chosen (not among the defaults): "
        "choose it first, `callbacks=[default,early_stopping]`.",
    ),
    (
        "learning rate of a partial optimizer",
        "train",
        f"!{SEARCH_MACHINERY_CONFIGS} experiment=lht_style logger=csv model.lr=0.1",
        "Could not override 'model.lr' (Key 'lr' is not in struct). Did you mean "
        "`model.optimizer.lr`?",
    ),
]
CASES.append(
    (
        "ckpt_path=last beside runs of another model only",  # not their epochs, then weights
        "train",
        f"!{SEARCH_MACHINERY_CONFIGS} experiment=lht_style logger=csv trainer.max_epochs=1 "
        "ckpt_path=last hydra.run.dir={beside}/new",
        "ckpt_path=last: no run under {beside} trained this run's model (model._target_=",
    )
)
CASES.append(
    (
        "early stopping monitor without its mode",
        "train",
        "callbacks=[default,early_stopping] callbacks.early_stopping.monitor=val_loss",
        "callbacks.early_stopping.monitor=val_loss is set without callbacks.early_stopping.mode",
    )
)
if not shutil.which("sbatch") and not shutil.which("srun"):
    CASES.append(
        (
            "SLURM launcher without SLURM",
            "train",
            "!-m " + " ".join(TRAIN) + " hydra/launcher=slurm",
            'RuntimeError: Could not detect "srun", are you indeed on a slurm cluster?',
        )
    )


class RaiseOnTrainStart(Callback):
    """A bug in a team's callback, found once training has started."""

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        raise RuntimeError("a bug in the team's code")


def snapshot(folder: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A docs-style run of one epoch: its run directory."""
    run_dir = tmp_path_factory.mktemp("trained") / "run"
    with pytest.MonkeyPatch.context() as monkeypatch:
        code, err = run_main_in_process(
            "train", [*TRAIN, f"hydra.run.dir={run_dir}"], run_dir.parent / "logs", monkeypatch
        )
    assert code == 0, err[-3000:]
    return run_dir


@pytest.fixture
def places(tmp_path: Path, trained: Path) -> dict[str, Path]:
    """The files the cases name: copies of the trained run (as given, with a broken
    config.yaml, with a broken .hydra/overrides.yaml, in a folder of runs), files that are no checkpoint, inputs
    with NaN and inf, a config folder with an experiment that is not `_global_`."""
    places = {"tmp": tmp_path, "logs": tmp_path / "logs"}
    for name in ("run", "broken_config", "broken_overrides"):
        places[name] = tmp_path / name
        shutil.copytree(trained, places[name])
    places["beside"] = tmp_path / "runs"  # a folder of runs (the docs-style module's one)
    shutil.copytree(trained, places["beside"] / "run")
    (places["broken_config"] / "config.yaml").write_text("model:\n  _target_: [unclosed\n")
    (places["broken_overrides"] / ".hydra" / "overrides.yaml").write_text("- 'trainer.x=1\n")
    places["empty"] = tmp_path / "empty.ckpt"
    places["empty"].write_bytes(b"")
    places["text"] = tmp_path / "text.ckpt"
    places["text"].write_text("not a checkpoint\n")
    places["tensor"] = tmp_path / "tensor.ckpt"
    torch.save(torch.zeros(3), places["tensor"])
    places["not_global"] = tmp_path / "my_configs"
    (places["not_global"] / "experiment").mkdir(parents=True)
    (places["not_global"] / "experiment" / "quick.yaml").write_text("trainer:\n  max_epochs: 1\n")
    return places


def arguments(script: str, case: str, places: dict[str, Path]) -> list[str]:
    filled = case.format(**{k: str(v) for k, v in places.items()})
    if filled.startswith("!"):
        return filled[1:].split()
    prefix = TRAIN if script == "train" else DOCS_STYLE_EVAL
    return [*prefix, *filled.split()]


@pytest.mark.parametrize(
    ("script", "case", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_what_a_run_refuses_is_one_paragraph_naming_the_key_and_nothing_is_written(
    script: str,
    case: str,
    expected: str,
    places: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs = {name: snapshot(places[name]) for name in ("run", "broken_overrides")}
    code, err = run_main_in_process(
        script, arguments(script, case, places), places["logs"], monkeypatch
    )
    message = one_paragraph_error(code, err)
    for name, place in places.items():
        expected = expected.replace("{" + name + "}", str(place))
    assert expected in message, message
    assert not places["logs"].exists(), sorted(places["logs"].rglob("*"))
    for name, files in runs.items():  # a run a case reads is left as it was
        assert snapshot(places[name]) == files, name


def test_the_machinerys_table_holds_the_values_no_check_knows() -> None:
    assert len(CASES) >= 35


def test_a_wandb_tag_longer_than_wandb_takes_is_refused_before_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    tag = "t" * 70
    code, err = run_main_in_process(
        "train", [*DOCS_STYLE, "logger=default", f"tags=[{tag}]"], tmp_path / "logs", monkeypatch
    )
    message = one_paragraph_error(code, err)
    assert f"`tags=[{tag}]` (in logger.wandb) was refused" in message
    assert "Tags must be between 1 and 64 characters" in message
    assert not (tmp_path / "logs").exists()


def test_wandb_online_without_credentials_is_refused_and_claims_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no_netrc"))
    code, err = run_main_in_process(
        "train", [*DOCS_STYLE, "logger=default"], tmp_path / "logs", monkeypatch
    )
    message = one_paragraph_error(code, err)
    assert "WANDB_MODE=online asks wandb to log online, but no credentials were found" in message
    assert "credentials found but" not in err
    assert not (tmp_path / "logs").exists()


@pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2 if hasattr(os, "sched_getaffinity") else False,
    reason="two CPU processes need two cores",
)
def test_launch_variables_the_processes_cannot_meet_at_are_refused_before_they_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MASTER_PORT", "abc")
    code, err = run_main_in_process(
        "train", [*TRAIN, "trainer.devices=2"], tmp_path / "logs", monkeypatch
    )
    message = one_paragraph_error(code, err)
    assert "MASTER_PORT='abc' is not a TCP port" in message
    assert not (tmp_path / "logs").exists()


def test_an_empty_log_directory_variable_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`MY_PROJECT_LOG_DIR= python train.py` would write to /train/runs/<time>."""
    code, err = run_main_in_process("train", TRAIN, "", monkeypatch)
    message = one_paragraph_error(code, err)
    assert "paths.log_dir is empty (an environment variable set, but empty?)" in message


def test_several_nodes_started_by_hand_or_by_a_cluster_are_let_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from my_project.machinery.preflight.devices import multi_node_launcher

    for name in ("SLURM_NTASKS", "SLURM_JOB_NAME", "TORCHELASTIC_RUN_ID", "NODE_RANK", "RANK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    assert multi_node_launcher() is None
    monkeypatch.setenv("MASTER_ADDR", "10.0.0.1")
    monkeypatch.setenv("NODE_RANK", "1")
    assert multi_node_launcher() is not None  # Lightning's docs: started by hand on each node


def test_an_error_of_the_run_itself_after_the_build_keeps_its_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only what building refuses is bad input: a bug that shows once training runs is not
    hidden behind a paragraph (Hydra's report, exit status 1)."""
    boom = f"+callbacks.boom._target_={RaiseOnTrainStart.__module__}.RaiseOnTrainStart"
    code, err = run_main_in_process("train", [*TRAIN, boom], tmp_path / "logs", monkeypatch)
    assert code == 1
    assert "a bug in the team's code" in err and "\nError: " not in err


class TypoInInit(LitClassifier):
    """A team's module with a typo in its `__init__`: a bug, not a value refused."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.loss = torch.nn.CrossEntropyLos()  # type: ignore[attr-defined]


class TypoInSetup(LitDataModule):
    def setup(self, stage: str | None = None) -> None:
        super().setup(stage)
        self.train_set = self.trian_set  # type: ignore[attr-defined]


class RefusesItsValue(LitClassifier):
    """A team's own check of a value (`raise ValueError`): a value refused, like a library's."""

    def __init__(self, **kwargs: Any) -> None:
        if kwargs["hidden"] > 64:
            raise ValueError(f"hidden={kwargs['hidden']} is more than this model can take")
        super().__init__(**kwargs)


@pytest.mark.parametrize(
    ("override", "line", "complaint"),
    [
        (
            "model._target_",
            "self.loss = torch.nn.CrossEntropyLos()",
            "no attribute 'CrossEntropyLos'",
        ),
        ("data._target_", "self.train_set = self.trian_set", "no attribute 'trian_set'"),
    ],
    ids=["module's __init__", "data module's setup"],
)
def test_a_bug_in_the_teams_code_while_building_shows_its_traceback_and_writes_nothing(
    override: str, line: str, complaint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cls = TypoInInit if override.startswith("model") else TypoInSetup
    args = [*TRAIN, f"{override}={__name__}.{cls.__name__}"]
    code, err = run_main_in_process("train", args, tmp_path / "logs", monkeypatch)
    assert code == 1, err[-3000:]
    assert f'File "{__file__}", line ' in err and line in err and complaint in err
    assert "\nError: " not in err and "Error in call to target" not in err
    assert not (tmp_path / "logs").exists()


def test_a_value_the_teams_code_refuses_itself_is_one_paragraph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = [*TRAIN, f"model._target_={__name__}.RefusesItsValue", "model.hidden=65"]
    code, err = run_main_in_process("train", args, tmp_path / "logs", monkeypatch)
    message = one_paragraph_error(code, err)
    assert "`model.hidden=65` from the command line was refused by " in message
    assert "tests.machinery.test_build_refusals.RefusesItsValue: ValueError" in message
    assert "ValueError: hidden=65 is more than this model can take" in message
    assert not (tmp_path / "logs").exists()


def test_a_job_resolves_its_config_and_protects_its_secrets_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from my_project.machinery import preflight
    from my_project.machinery.preflight import values
    from my_project.machinery.reliability import secrets

    calls: list[str] = []
    for module, name in [
        (preflight, "check_config_resolves"),
        (values, "check_config_resolves"),
        (preflight, "protect_run_secrets"),
        (secrets, "protect_run_secrets"),
    ]:
        original = getattr(module, name)
        monkeypatch.setattr(
            module, name, lambda *a, _f=original, _n=name: calls.append(_n) or _f(*a)
        )
    args = [*TRAIN, "test=false", f"hydra.run.dir={tmp_path / 'run'}"]
    code, err = run_main_in_process("train", args, tmp_path / "logs", monkeypatch)
    assert code == 0, err[-3000:]
    assert sorted(calls) == ["check_config_resolves", "protect_run_secrets"]


# -- whose fault: the team's bug keeps its file and line, wherever its code lives -----------

# A team's own modules in a folder of their own, on `sys.path` (as on PYTHONPATH): `(file, the
# line that fails, what Python says)`. Each is a bug; the run must show that line, exit 1.
TEAM_BUGS = {
    "unpack": (
        "class Model(LitClassifier):\n"
        "    def __init__(self, **kwargs):\n"
        "        super().__init__(**kwargs)\n"
        "        first, last = (16, 32, 4)\n",
        "first, last = (16, 32, 4)",
        "ValueError: too many values to unpack (expected 2)",
    ),
    "index": (
        "class Model(LitClassifier):\n"
        "    def __init__(self, **kwargs):\n"
        "        super().__init__(**kwargs)\n"
        "        self.head = self.net[5]\n",
        "self.head = self.net[5]",
        "IndexError: index 5 is out of range",
    ),
    "import": (
        "LAYERS = nn.Sequentail()\n\nclass Model(LitClassifier):\n    pass\n",
        "LAYERS = nn.Sequentail()",
        "module 'torch.nn' has no attribute 'Sequentail'",
    ),
    "name": (
        "LAYERS = Sequential()\n\nclass Model(LitClassifier):\n    pass\n",
        "LAYERS = Sequential()",
        "NameError: name 'Sequential' is not defined",
    ),
    "keyword": (
        "class Model(LitClassifier):\n"
        "    def __init__(self, **kwargs):\n"
        "        super().__init__(**kwargs)\n"
        "        self.extra = nn.Linear(kwargs['hidden'], 2, bais=False)\n",
        "self.extra = nn.Linear(kwargs['hidden'], 2, bais=False)",
        "got an unexpected keyword argument 'bais'",
    ),
}
TEAM_HEADER = (
    "import torch\nfrom torch import nn\n\nfrom tests.machinery.docs_style import LitClassifier, "
    "LitDataModule\n\n\n"
)


def teams_module(folder: Path, name: str, body: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``body`` as the module ``name`` in ``folder``, importable (``sys.path``), not imported."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(TEAM_HEADER + body)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return path


def assert_teams_traceback(code: int, err: str, path: Path, line: str, complaint: str) -> None:
    assert code == 1, err[-3000:]
    assert f'File "{path}", line ' in err and line in err and complaint in err, err[-3000:]
    assert "\nError: " not in err and "Error in call to target" not in err, err[-3000:]


@pytest.mark.parametrize("bug", list(TEAM_BUGS))
def test_a_bug_in_a_teams_module_on_its_path_shows_its_line_under_train(
    bug: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ValueError of the team's own line, an IndexError raised inside torch by its call, a
    misspelt name as its module is imported: its traceback, not a value refused."""
    body, line, complaint = TEAM_BUGS[bug]
    path = teams_module(tmp_path / "team", f"team_{bug}", body, monkeypatch)
    args = [*TRAIN, f"model._target_=team_{bug}.Model"]
    code, err = run_main_in_process("train", args, tmp_path / "logs", monkeypatch)
    assert_teams_traceback(code, err, path, line, complaint)
    assert not (tmp_path / "logs").exists()


def test_a_bug_in_the_teams_module_under_eval_shows_its_line(
    trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """eval.py rebuilds the model from the checkpoint: a typo in its `__init__` is not a
    checkpoint of another model."""
    body = (
        "class Model(LitClassifier):\n"
        "    def __init__(self, **kwargs):\n"
        "        super().__init__(**kwargs)\n"
        "        self.scale = torch.ones(hiden)\n"
    )
    path = teams_module(tmp_path, "team_eval", body, monkeypatch)
    args = [*DOCS_STYLE_EVAL, f"ckpt_path={trained}/checkpoints/last.ckpt"]
    code, err = run_main_in_process(
        "eval", [*args, "model._target_=team_eval.Model"], tmp_path / "logs", monkeypatch
    )
    assert_teams_traceback(code, err, path, "torch.ones(hiden)", "name 'hiden' is not defined")
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize("script", ["predict", "eval"])
def test_a_bug_in_the_teams_test_loader_shows_its_line_and_leaves_no_run_directory(
    script: str, trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under eval.py the bug comes as the Trainer tests, once the run directory holds its
    config and logs: without a result, it goes too; the traceback says what happened."""
    body = (
        "class Data(LitDataModule):\n"
        "    def test_dataloader(self):\n"
        "        return torch.utils.data.DataLoader(self.tset_set, batch_size=self.batch_size)\n"
    )
    path = teams_module(tmp_path, f"team_{script}", body, monkeypatch)
    args = [*DOCS_STYLE_EVAL, f"ckpt_path={trained}/checkpoints/last.ckpt"]
    code, err = run_main_in_process(
        script, [*args, f"data._target_=team_{script}.Data"], tmp_path / "logs", monkeypatch
    )
    assert_teams_traceback(code, err, path, "self.tset_set", "has no attribute 'tset_set'")
    assert not (tmp_path / "logs").exists()


def test_a_value_of_the_run_the_teams_code_hands_torch_is_refused_in_one_paragraph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same module and line as a bug would be, but what fails is the value the command line
    gave (an activation torch lacks), handed to the library by the team's code."""
    body = (
        "class Model(LitClassifier):\n"
        "    def __init__(self, activation='ReLU', **kwargs):\n"
        "        super().__init__(**kwargs)\n"
        "        self.act = getattr(nn, activation)()\n"
    )
    teams_module(tmp_path, "team_value", body, monkeypatch)
    args = [*TRAIN, "model._target_=team_value.Model", "+model.activation=Relu"]
    code, err = run_main_in_process("train", args, tmp_path / "logs", monkeypatch)
    message = one_paragraph_error(code, err)
    assert (
        "`model.activation=Relu` from the command line was refused by team_value.Model" in message
    )
    assert "AttributeError: module 'torch.nn' has no attribute 'Relu'" in message
    assert not (tmp_path / "logs").exists()


def test_the_benchmark_tells_a_value_refused_from_the_teams_bug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from my_project.machinery import bench

    teams_module(tmp_path, "team_bench", TEAM_BUGS["unpack"][0], monkeypatch)
    args = ["--steps", "1", "--warmup", "1", "--repeats", "1", "--workload", "none", *DOCS_STYLE]
    with pytest.raises(SystemExit) as exited:
        bench.main([*args, "model.lr=-1"])
    assert exited.value.code == 2
    message = capsys.readouterr().err.strip()
    assert message == (
        "Error: Bad value in the config: `model.lr=-1` must be a finite number >= 0. Fix it on the "
        "command line or in configs/."
    )
    with pytest.raises(ValueError, match="too many values to unpack") as raised:
        bench.main([*args, "model._target_=team_bench.Model"])
    assert raised.traceback[-1].path == tmp_path / "team_bench.py"


# -- the config's schedules, tried: never more than the run does ------------------------------


def cosine(t_max: int) -> dict[str, Any]:
    return {"_target_": "torch.optim.lr_scheduler.CosineAnnealingLR", "T_max": t_max}


def test_a_schedule_that_divides_by_zero_fails_when_tried() -> None:
    with pytest.raises(ZeroDivisionError):
        schedules.try_schedule(cosine(0), {"max_epochs": 3, "max_steps": -1})
    schedules.try_schedule(cosine(0), {"max_epochs": 0, "max_steps": -1})  # never stepped


def test_a_schedule_is_stepped_no_more_than_the_run_steps_it() -> None:
    """`OneCycleLR` refuses a step past its `total_steps`: exactly as many is fine."""
    one_cycle = {"_target_": "torch.optim.lr_scheduler.OneCycleLR", "max_lr": 0.1}
    schedules.try_schedule({**one_cycle, "total_steps": 3}, {"max_epochs": 3, "max_steps": -1})
    schedules.try_schedule({**one_cycle, "total_steps": 2}, {"max_epochs": 9, "max_steps": 2})
    with pytest.raises(ValueError, match="Tried to step"):
        schedules.try_schedule({**one_cycle, "total_steps": 2}, {"max_epochs": 3})


def test_only_torchs_schedules_with_plain_values_are_tried() -> None:
    """What needs another schedule or a function, and the team's own classes, are the run's."""
    model = {
        "_target_": "my_model.Net",
        "scheduler": cosine(5),
        "chained": {
            "_target_": "torch.optim.lr_scheduler.SequentialLR",
            "schedulers": [cosine(0)],
            "milestones": [1],
        },
        "lambda": {"_target_": "torch.optim.lr_scheduler.LambdaLR"},
    }
    found = dict(schedules.schedule_nodes(model, "model"))
    assert list(found) == ["model.scheduler", "model.chained", "model.lambda"]
    for node in found.values():
        schedules.try_schedule(node, {"max_epochs": 3})  # the nested T_max=0 is not tried


def test_a_module_that_builds_its_layers_in_setup_trains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the Lightning docs allow: the head made in `setup()` from the data module's
    `num_classes` (Lightning calls `configure_optimizers` after `setup`); nothing before the fit
    runs the module's code out of Lightning's order."""
    target = f"model._target_={__name__}.HeadInSetup"
    run_dir = tmp_path / "run"
    code, err = run_main_in_process(
        "train", [*TRAIN, target, f"hydra.run.dir={run_dir}"], tmp_path / "logs", monkeypatch
    )
    assert code == 0, err[-3000:]
    assert (run_dir / "metrics.json").is_file()


class HeadInSetup(LightningModule):
    def __init__(self, num_features: int, lr: float = 0.1, **kwargs: Any) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.body: Any = None

    def setup(self, stage: str) -> None:
        classes = self.trainer.datamodule.num_classes
        self.body = torch.nn.Linear(self.hparams.num_features, classes)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.body(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_acc", (self.body(x).argmax(1) == y).float().mean())

    def test_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("test_acc", (self.body(x).argmax(1) == y).float().mean())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


# -- a full disk --------------------------------------------------------------------------


@pytest.mark.slow  # two trainings, in this process
def test_a_full_disk_keeps_the_last_good_checkpoint_and_the_run_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills during the second epoch's checkpoint: the run stops in one paragraph
    naming the newest complete `last.ckpt` (the first epoch's) and the `resume=` command; no
    `*.ckpt` that does not load is left, and the resume runs to the end."""
    real_save = atomic_io.torch.save
    saves: list[int] = []

    def fills_the_disk(obj: Any, handle: Any) -> None:
        saves.append(1)
        if len(saves) > 2:  # the first epoch's two files (best and last) fit
            handle.write(b"PK\x03\x04 half a checkpoint")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_save(obj, handle)

    run_dir = tmp_path / "run"
    monkeypatch.setattr(atomic_io.torch, "save", fills_the_disk)
    args = [*DOCS_STYLE, "trainer.max_epochs=3", "logger=csv", f"hydra.run.dir={run_dir}"]
    code, err = run_main_in_process("train", args, tmp_path / "logs", monkeypatch)
    message = one_paragraph_error(code, err)
    assert message.startswith("Error: The disk is full (No space left on device)"), message
    assert f"resume with `python train.py resume={run_dir}`" in message
    for path in (run_dir / "checkpoints").glob("*.ckpt"):  # every checkpoint there loads
        torch.load(path, weights_only=True)
    assert torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["epoch"] == 0
    assert not list((run_dir / "checkpoints").glob(".partial-*"))
    monkeypatch.setattr(atomic_io.torch, "save", real_save)
    code, err = run_main_in_process("train", [f"resume={run_dir}"], tmp_path / "logs", monkeypatch)
    assert code == 0, err[-3000:]
    assert torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["epoch"] == 2


READ_ONLY = {"from_epoch": 1, "now": False}


class TurnsReadOnly(Callback):
    """The run's folder becomes read-only as epoch ``READ_ONLY["from_epoch"]`` starts."""

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        READ_ONLY["now"] = trainer.current_epoch >= READ_ONLY["from_epoch"]


def test_checkpoints_turned_read_only_mid_run_keep_the_last_good_one_in_one_paragraph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second epoch's save meets a read-only folder, and so does the removal of its
    temporary file (as root, chmod stops no write: the filesystem's refusal is simulated): one
    paragraph, exit 2, the first epoch's checkpoint kept and named, no `.part` file."""
    real_open, real_unlink = open, Path.unlink

    def refused(path: Any) -> OSError:
        return OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    def read_only_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if READ_ONLY["now"] and "w" in mode:
            raise refused(file)
        return real_open(file, mode, *args, **kwargs)

    def read_only_unlink(self: Path, missing_ok: bool = False) -> None:
        if READ_ONLY["now"] and self.name.endswith(".part"):
            raise refused(self)
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setitem(READ_ONLY, "now", False)
    monkeypatch.setattr(atomic_io, "open", read_only_open, raising=False)
    monkeypatch.setattr(Path, "unlink", read_only_unlink)
    run_dir = tmp_path / "run"
    args = [*TRAIN, "trainer.max_epochs=2", f"hydra.run.dir={run_dir}"]
    args.append(f"+callbacks.read_only._target_={__name__}.TurnsReadOnly")
    code, err = run_main_in_process("train", args, tmp_path / "logs", monkeypatch)
    message = one_paragraph_error(code, err)
    assert message.startswith("Error: A file of the run cannot be written (Read-only file system")
    last = run_dir / "checkpoints" / "last.ckpt"
    assert f"its newest complete checkpoint is {last}" in message, message
    assert f"resume with `python train.py resume={run_dir}`" in message
    assert torch.load(last, weights_only=True)["epoch"] == 0
    assert not [p for p in run_dir.rglob("*") if p.name.endswith(".part")]


def test_a_save_cut_short_leaves_no_file_named_like_a_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `kill -9` leaves mid-save (the temporary file, not yet renamed) does not end in
    `.ckpt`, so nothing takes it for a checkpoint (`ckpt_path=last`, `*.ckpt`)."""
    written: list[str] = []

    def killed(src: Any, dst: Any) -> None:
        written.append(str(src))
        raise KeyboardInterrupt  # stopped between the write and the rename

    monkeypatch.setattr(atomic_io.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        atomic_io.atomic_torch_save({"state_dict": {}}, tmp_path / "last.ckpt")
    (partial,) = written
    assert not partial.endswith(".ckpt") and Path(partial).name.startswith(".partial-")
