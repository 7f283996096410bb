"""Every `python <script>.py ...` command of the bash blocks of the README and of the pages of
`docs/` it links, as written, passes the checks a run makes before it writes anything, in this
project (a generated project runs these tests on its own README and docs, for its own answers).

Each command runs as a process of its own (`readme_check.py`: the entry point up to its checks),
with the placeholders (`<run>`, `epoch_<NNN>`, `...`) filled in from a real run. A
command that needs what this machine lacks (a GPU, SLURM) must stop with its one-paragraph
message, exit status 2.

The README's commands are written for the examples (`model/net=cnn`, `model.lr=...`). A team
that makes its own module the default keeps them beside it: a training command that names no
model, data or recipe of its own runs with the example named (`EXAMPLE`), so these tests pass
whatever `configs/train.yaml` makes the defaults, and skip, saying why, once the examples are
deleted. The doctor's command runs as written: it reports on the defaults, whatever they are.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

from .helpers import CONFIG_DIR, DATA_DIR_VAR, LOG_DIR_VAR, PACKAGE, ROOT, clean_env, run_entry
from .processes import run
from .readme_check import PASSED

SCRIPTS = ("train", "eval", "predict", "serve", "export")
# What a machine without a GPU or a cluster may answer a command that asks for one.
MACHINE_LACKS = re.compile(r"GPU|CUDA|MPS|SLURM|sbatch|srun|cores? this machine|no GPU", re.I)
# The example the README's commands are written for: its model, data and the metric that picks
# its checkpoints, which configs/train.yaml sets only while the example is the default.
EXAMPLE = {
    "model": "classifier",
    "data": "digits",
    "monitor": "val/acc",
    "monitor_mode": "max",
    "optimized_metric": "val/acc_best",
}
EXAMPLE_FILES = [CONFIG_DIR / "model" / "classifier.yaml", CONFIG_DIR / "data" / "digits.yaml"]
# A training command naming one of these trains what it names (a recipe names its own model).
OWN_CHOICE = ("experiment", "hparams_search", "resume")


def guide_pages(root: Path = ROOT) -> list[Path]:
    """The README and the pages of `docs/` (those the project has: generation leaves some out)."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def readme_commands(readme: Path = ROOT / "README.md") -> list[str]:
    """The `python <script>.py ...` and doctor lines of a page's bash blocks (line
    continuations joined), each once, leaving out those for the team's own `model=mine`."""
    commands, block, pending = [], False, ""
    for line in readme.read_text().splitlines():
        if line.startswith("```"):
            block = line.strip() == "```bash"
            continue
        if not block:
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        words, pending = shlex.split(pending, comments=True), ""
        program = next((w for w in words if not re.match(r"^[A-Z_]+=", w)), "")
        after = words[words.index(program) + 1 :] if program else []
        script = after[0].removesuffix(".py") if after else ""
        wanted = (program == "python" and script in SCRIPTS) or program.endswith("-doctor")
        if wanted and not any(w.endswith("=mine") for w in words):
            commands.append(shlex.join(words))
    return list(dict.fromkeys(commands))  # each once


def guide_commands() -> dict[str, str]:
    """Every page's commands, each once (the first page that writes it), by command."""
    found: dict[str, str] = {}
    for page in guide_pages():
        for command in readme_commands(page):
            found.setdefault(command, page.relative_to(ROOT).as_posix())
    return found


PAGES = guide_commands()
COMMANDS = list(PAGES)


def with_the_example(words: list[str]) -> list[str]:
    """A training command's words with each of `EXAMPLE`'s keys it leaves unset (`data=mnist`
    still trains the example's model), before the command's own overrides (after `-m`); a
    command naming a recipe or a run of its own (`OWN_CHOICE`) as written."""
    if words[0] != "python" or words[1] != "train.py":
        return words
    named = {w.lstrip("+~").split("=", 1)[0] for w in words[2:] if "=" in w}
    if named & set(OWN_CHOICE):
        return words
    example = [f"{key}={value}" for key, value in EXAMPLE.items() if key not in named]
    at = next((i for i, w in enumerate(words) if i > 1 and not w.startswith("-")), len(words))
    return [*words[:at], *example, *words[at:]]


def test_a_training_command_is_given_the_example_unless_it_names_its_own_choice() -> None:
    example = [f"{key}={value}" for key, value in EXAMPLE.items()]
    words = ["python", "train.py", "-m", "monitor=val/loss", "model.lr=0.1,0.2"]
    assert with_the_example(words) == [
        *words[:3],
        *[w for w in example if not w.startswith("monitor=")],
        *words[3:],
    ]
    for own in ("experiment=digits_cnn", "resume=logs/train/runs/<run>", "hparams_search=mlp"):
        assert with_the_example(["python", "train.py", own]) == ["python", "train.py", own]
    # the example's model on other data (the team's model may read keys of its own data)
    other_data = with_the_example(["python", "train.py", "data=mnist"])
    assert other_data == [
        "python",
        "train.py",
        *[w for w in example if w != "data=digits"],
        "data=mnist",
    ]
    assert with_the_example(["python", "eval.py", "ckpt_path=x"]) == [
        "python",
        "eval.py",
        "ckpt_path=x",
    ]


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A one-epoch run of the example (its logs where the commands look for them), its
    checkpoint and a file of inputs."""
    missing = [
        str(path.relative_to(CONFIG_DIR.parent)) for path in EXAMPLE_FILES if not path.is_file()
    ]
    if missing:
        pytest.skip(
            f"the README's commands are written for the example, whose {', '.join(missing)} "
            "this project deleted: write your own commands in the README (naming your model "
            "and data) and point EXAMPLE in this file at them"
        )
    base = tmp_path_factory.mktemp("readme")
    env = clean_env(**{LOG_DIR_VAR: str(base / "logs"), DATA_DIR_VAR: str(base / "data")})
    example = with_the_example(["python", "train.py"])[2:]
    trained = run_entry("train", *example, "trainer.max_epochs=1", "logger=csv", env=env)
    assert trained.returncode == 0, trained.stderr[-3000:]
    (run_dir,) = (base / "logs" / "train" / "runs").iterdir()
    (checkpoint,) = (run_dir / "checkpoints").glob("epoch_*.ckpt")
    return {"run": str(run_dir), "ckpt": str(checkpoint), **env}


def filled(command: str, places: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """The command's environment and arguments, its placeholders replaced by real paths."""
    best = r"logs/train/runs/<run>/checkpoints/epoch_(?:\d+|<NNN>)\.ckpt"
    command = re.sub(best, places["ckpt"], command)
    command = command.replace("logs/train/runs/<run>", places["run"])
    command = command.replace("ckpt_path=...", f"ckpt_path={places['ckpt']}")
    words = shlex.split(command)
    env = {k: v for k, v in places.items() if k.isupper()}
    while re.match(r"^[A-Z_]+=", words[0]):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    return env, with_the_example(words)


def test_the_readme_names_every_entry_point() -> None:
    readme = readme_commands()
    named = {shlex.split(c)[1].removesuffix(".py") for c in readme if " python " in f" {c}"}
    assert named >= set(SCRIPTS), named
    assert any(c.endswith("-doctor") or "-doctor " in c for c in readme)


def test_the_commands_of_the_docs_pages_are_followed() -> None:
    """The pages the README links hold commands too (its guides moved there): they are run."""
    pages = set(PAGES.values())
    assert "README.md" in pages and any(page.startswith("docs/") for page in pages), pages
    linked = re.findall(r"\]\((docs/[\w.-]+\.md)", (ROOT / "README.md").read_text())
    missing = [page for page in linked if not (ROOT / page).is_file()]
    assert missing == [], missing


def checked(command: str, places: dict[str, str]) -> tuple[int, str]:
    """Exit status of the command up to its checks, and what it printed: `CHECKS PASSED` or
    the one-paragraph error (the doctor runs whole: it only reports)."""
    env, words = filled(command, places)
    if words[0] == "python":
        args = [sys.executable, str(Path(__file__).with_name("readme_check.py")), *words[1:]]
    else:  # the doctor's console script
        args = [sys.executable, "-m", f"{PACKAGE}.machinery.doctor", *words[1:]]
    result = run(args, cwd=ROOT, env=clean_env(**env), timeout=120)
    output = result.stdout + result.stderr
    if result.returncode == 0 and ("--help" in words or args[1] == "-m"):
        return 0, PASSED  # help and the doctor print, and check nothing
    return result.returncode, output


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS, ids=[f"{PAGES[c]}: {c}" for c in COMMANDS])
def test_a_readme_command_as_written_passes_the_checks_or_names_what_the_machine_lacks(
    command: str, places: dict[str, str]
) -> None:
    code, output = checked(command, places)
    if code == 0:
        assert PASSED in output, output[-3000:]
        return
    assert code == 2 and "Traceback" not in output, output[-3000:]
    message = output.strip().split("\n\n")[-1]
    assert MACHINE_LACKS.search(message), message


@pytest.mark.slow
def test_a_command_naming_a_logger_the_run_lacks_fails_the_check(places: dict[str, str]) -> None:
    """What a README command written for another logger answer would do (issue: the wandb
    project set on a CSV-only run), so the test above can fail."""
    code, output = checked("python train.py logger=csv logger.wandb.project=mnist", places)
    assert code == 2 and PASSED not in output and not MACHINE_LACKS.search(output), output
    assert "logger.wandb" in output
