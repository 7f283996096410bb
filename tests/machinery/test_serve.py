"""`python serve.py ckpt_path=...` for a team's module: a real LitServe server on a free
localhost port, real HTTP requests. Its answers are predict.py's for the same inputs; a bad
request gets a 4xx saying what was wrong, alone, and the server goes on; a bounded load of
concurrent clients loses nothing; a signal stops the server and every process it started."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import pytest
import torch

from my_project.machinery.errors import UserError
from my_project.machinery.run import serve_api
from my_project.machinery.run.inputs import Refused, Signature, signature_of
from my_project.machinery.run.serve import check_address
from my_project.machinery.run.serve_api import CheckpointAPI, check_it_answers, request_inputs

from .docs_style import LitClassifier, LitDataModule
from .helpers import DOCS_STYLE, DOCS_STYLE_EVAL, FAST, run_entry
from .serving import HOST, Server, group_alive, load, serving

MAX_REQUEST_BYTES = 40_000


class IndexesPastItsLayers(LitClassifier):
    """A bug of the team's forward: a literal index past its layers."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net[5](x)


class WithItsOwnPredictStep(LitClassifier):
    def predict_step(self, batch: Any, batch_idx: int) -> dict[str, torch.Tensor]:
        probabilities = torch.softmax(self(batch[0]), dim=1)
        return {"label": probabilities.argmax(dim=1), "score": probabilities}


class UnpacksItsBatch(LitClassifier):
    """The Lightning docs' way: `x, y = batch` (serve.py hands it a batch shaped so)."""

    def predict_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, _ = batch
        return self(x).argmax(dim=1)


class AnswersWithATuple(LitClassifier):
    def predict_step(self, batch: Any, batch_idx: int) -> Any:
        return self(batch[0]), None


class MeanAndLogVariance(LitClassifier):
    """forward returns a tuple, a heteroscedastic regressor's (mean, log_var)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.net(x)
        return out[:, 0], out[:, 1]


def one_sentence(text: str) -> bool:
    """No sentence ends before the last character (a full stop then a capital letter)."""
    return re.search(r"[.!?]\s+[A-Z]", text[:-1]) is None and text.endswith(".")


def split_inputs() -> np.ndarray:
    data = LitDataModule()
    data.setup("test")
    return data.test_set.tensors[0].numpy()


def logits(checkpoint: Path, inputs: np.ndarray) -> np.ndarray:
    model = LitClassifier.load_from_checkpoint(checkpoint).eval()
    with torch.no_grad():
        return model(torch.from_numpy(inputs)).numpy()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("serve_train")
    result = run_entry("train", *DOCS_STYLE, *FAST, "logger=none", f"hydra.run.dir={run_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    return next((run_dir / "checkpoints").glob("epoch_*.ckpt"))


@pytest.fixture(scope="module")
def server(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the tests that only send requests; stopped by SIGTERM at the end, which
    must end it and every process it started."""
    run_dir = tmp_path_factory.mktemp("serve_run")
    with serving(
        *DOCS_STYLE_EVAL,
        f"ckpt_path={checkpoint}",
        f"max_request_bytes={MAX_REQUEST_BYTES}",
        f"hydra.run.dir={run_dir}",
    ) as running:
        yield running
        code, output = running.stop(signal.SIGTERM)
        assert code == 143 and "Stopped by SIGTERM." in output, output[-3000:]
        assert "Traceback" not in output, output[-3000:]
        deadline = time.monotonic() + 30
        while group_alive(running.process.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not group_alive(running.process.pid), "a process of the server outlived it"


@pytest.mark.slow
def test_answers_equal_predict_py_on_the_same_inputs(
    checkpoint: Path, server: Server, tmp_path: Path
) -> None:
    inputs = split_inputs()
    result = run_entry(
        "predict",
        *DOCS_STYLE_EVAL,
        f"ckpt_path={checkpoint}",
        f"hydra.run.dir={tmp_path / 'predict'}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = (tmp_path / "predict" / "predictions.csv").read_text().splitlines()
    # a classifier without predict_step: its class and the probability of each class
    assert rows[0] == "index,target,prediction,prob_0,prob_1,prob_2,prob_3"
    written = np.array([[float(v) for v in row.split(",")[3:]] for row in rows[1:]])

    status, answer = server.predict({"inputs": inputs.tolist()})  # all 89 in one request
    assert status == 200 and list(answer) == ["prediction", "prob"]
    served = np.array(answer["prob"])
    assert served.shape == (89, 4)
    assert answer["prediction"] == [int(row.split(",")[2]) for row in rows[1:]]
    assert np.abs(served - written).max() <= 1e-6  # predict.py writes 6 decimals
    expected = torch.softmax(torch.from_numpy(logits(checkpoint, inputs)), dim=1).numpy()
    assert np.abs(served - expected).max() <= 1e-5
    assert answer["prediction"] == expected.argmax(axis=1).tolist()

    status, one = server.predict({"inputs": inputs[7].tolist()})  # one input alone: its row
    assert status == 200 and np.array(one["prob"]).shape == (4,)
    assert np.abs(np.array(one["prob"]) - served[7]).max() <= 1e-5
    assert one["prediction"] == answer["prediction"][7]


@pytest.mark.slow
def test_bad_requests_get_a_4xx_saying_what_was_wrong_and_the_server_goes_on(
    server: Server,
) -> None:
    json_type = {"Content-Type": "application/json"}
    row = [0.5] * 16
    nan = b'{"inputs": [[NaN' + b", 1" * 15 + b"], [1" + b", 1" * 15 + b"]]}"
    cases = [
        (b"inputs=1", {"Content-Type": "application/x-www-form-urlencoded"}, 422, "JSONDecode"),
        (b"{inputs: [1, 2]}", json_type, 422, "JSONDecodeError"),
        (
            nan,
            json_type,
            422,
            "NaN or infinite values in 1 of its 2 inputs, row 0 (counting from 0)",
        ),
        (json.dumps({"inputs": [[1, 2]]}).encode(), json_type, 422, "shape (1, 2), where"),
        (json.dumps({"inputs": [row, row[:3]]}).encode(), json_type, 422, "inhomogeneous"),
        (json.dumps({"inputs": ["a"] * 16}).encode(), json_type, 422, "could not convert string"),
        (json.dumps({"inputs": []}).encode(), json_type, 422, "shape (0,)"),
        (json.dumps({"input": row}).encode(), json_type, 422, "keys ['input']"),
        (json.dumps([row]).encode(), json_type, 422, "is a JSON list"),
        (json.dumps({"inputs": [row] * 2000}).encode(), json_type, 413, "max_request_bytes"),
    ]
    for body, headers, expected, fragment in cases:
        status, answer = server.request("POST", "/predict", body, headers)
        assert status == expected, (body[:60], status, answer)
        detail = json.loads(answer)["detail"]
        assert isinstance(detail, str) and fragment in detail, detail
        assert one_sentence(detail), detail
        if expected == 422:
            assert detail.endswith('send {"inputs": [...]}, inputs shaped (N, 16) float32.')
    chunked = iter([json.dumps({"inputs": [row] * 2000}).encode()])  # no Content-Length
    status, answer = server.request("POST", "/predict", chunked, json_type)  # type: ignore[arg-type]
    assert status == 413 and "max_request_bytes" in json.loads(answer)["detail"]
    status, answer = server.predict({"inputs": row})
    assert status == 200 and len(answer["prob"]) == 4
    status, health = server.request("GET", "/health")
    assert (status, health) == (200, b"ok")


@pytest.mark.slow
def test_a_json_body_is_read_as_json_whatever_its_content_type(server: Server) -> None:
    """`curl -d` sends a form's Content-Type, and some clients send none or text/plain: a body
    that is JSON is answered as JSON is, never a 500."""
    row = split_inputs()[3].tolist()
    _, expected = server.predict({"inputs": row})
    body = json.dumps({"inputs": row}).encode()
    for headers in (
        {"Content-Type": "application/x-www-form-urlencoded"},  # curl -d
        {"Content-Type": "text/plain"},
        {"Content-Type": "multipart/form-data; boundary=x"},
        {},
    ):
        status, answer = server.request("POST", "/predict", body, headers)
        assert (status, json.loads(answer)) == (200, expected), (headers, answer[:300])


@pytest.mark.slow
def test_a_bad_request_fails_alone_among_concurrent_good_ones(server: Server) -> None:
    """LitServe answers a failure in its worker with a 500 for the whole batch; bad requests
    are refused before they join one."""
    inputs = split_inputs()
    payloads = [{"inputs": inputs[i].tolist()} for i in range(24)]
    payloads += [{"inputs": [[1.0, 2.0]]}, {"inputs": ["x"] * 16}] * 12
    with ThreadPoolExecutor(max_workers=16) as pool:
        answers = list(pool.map(server.predict, payloads))
    assert [status for status, _ in answers] == [200] * 24 + [422] * 24


@pytest.mark.slow
def test_eight_clients_of_200_requests_lose_none(checkpoint: Path, server: Server) -> None:
    """Concurrent clients, batched by the server: every request answered, each with its own
    inputs' answer. Prints the throughput and latency (run with -s to see them)."""
    inputs = split_inputs()
    expected = torch.softmax(torch.from_numpy(logits(checkpoint, inputs)), dim=1).numpy()
    # one input alone, or a few at once
    payloads: list[dict[str, Any]] = [{"inputs": inputs[i].tolist()} for i in range(60)]
    payloads += [{"inputs": inputs[i : i + 3].tolist()} for i in range(60, 86)]

    def check(payload: dict[str, Any], status: int, answer: Any) -> str | None:
        if status != 200:
            return f"status {status}: {answer}"
        rows = np.array(payload["inputs"], dtype=np.float32).reshape(-1, 16)
        index = [int(np.flatnonzero((inputs == r).all(axis=1))[0]) for r in rows]
        got = np.array(answer["prob"]).reshape(len(rows), 4)
        if np.abs(got - expected[index]).max() > 1e-5:
            return f"wrong answer for inputs {index}"
        return None

    result = load(server, payloads, clients=8, per_client=200, check=check)
    print(f"\nserve.py, docs-style module on this machine: {result.summary()}")
    assert result.failures == [] and len(result.latencies) == 8 * 200


@pytest.mark.exhaustive  # SIGTERM ending every process: the server fixture's teardown, every run
def test_ctrl_c_in_a_terminal_stops_the_server_and_every_process(
    checkpoint: Path, tmp_path: Path
) -> None:
    """Ctrl-C reaches every process of the terminal's group at once."""
    with serving(
        *DOCS_STYLE_EVAL, f"ckpt_path={checkpoint}", f"hydra.run.dir={tmp_path}"
    ) as running:
        os.killpg(running.process.pid, signal.SIGINT)
        running.process.wait(timeout=60)
        running._reader.join(timeout=10)
        output = "".join(running.output)
        assert running.process.returncode == 130 and "Stopped by Ctrl-C." in output, output[-3000:]
        assert "Traceback" not in output, output[-3000:]
        deadline = time.monotonic() + 30
        while group_alive(running.process.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not group_alive(running.process.pid)
        with socket.socket() as probe:  # the port is free again
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((HOST, running.port))


@pytest.mark.slow
def test_a_port_in_use_is_one_paragraph_and_leaves_no_run_dir(
    checkpoint: Path, tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_entry(
            "serve",
            *DOCS_STYLE_EVAL,
            f"ckpt_path={checkpoint}",
            f"port={port}",
            f"hydra.run.dir={tmp_path / 'run'}",
        )
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert f"Error: port={port} on 127.0.0.1 cannot be used" in " ".join(result.stderr.split())
    assert not (tmp_path / "run").exists()


# -- in-process: the checks at start-up and the API LitServe runs in its worker --------------


@pytest.mark.parametrize(
    ("host", "port"),
    [("example.org", 8000), ("127.0.0.1", 80), ("127.0.0.1", 99999), ("127.0.0.1", "abc")],
)
def test_an_address_litserve_would_refuse_once_started_is_refused_before(
    host: str, port: object
) -> None:
    with pytest.raises(UserError, match=re.escape(f"host={host} port={port}: serve.py listens")):
        check_address(host, port)


@pytest.fixture(scope="module")
def own_step_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint of a module with its own predict_step, trained one step in this process."""
    L.seed_everything(0)
    model, data = WithItsOwnPredictStep(num_features=16, num_classes=4), LitDataModule()
    trainer = L.Trainer(
        max_steps=1,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, datamodule=data)
    path = tmp_path_factory.mktemp("own_step") / "model.ckpt"
    trainer.save_checkpoint(path)
    return path


def test_the_worker_answers_each_request_of_a_batch_with_its_own_rows(
    own_step_checkpoint: Path,
) -> None:
    """decode -> batch -> predict_step -> unbatch -> encode, as LitServe calls them."""
    api = CheckpointAPI(
        f"{__name__}.WithItsOwnPredictStep", str(own_step_checkpoint), docs_style_signature(), True
    )
    api.setup("cpu")
    inputs = split_inputs()
    requests = [{"inputs": inputs[0].tolist()}, {"inputs": inputs[1:4].tolist()}]
    contexts: list[dict[str, Any]] = [{}, {}]
    decoded = [api.decode_request(r, c) for r, c in zip(requests, contexts, strict=True)]
    answers = [
        api.encode_response(out, c)
        for out, c in zip(
            api.unbatch(api.predict(api.batch(decoded)), contexts), contexts, strict=True
        )
    ]
    model = WithItsOwnPredictStep.load_from_checkpoint(own_step_checkpoint).eval()
    with torch.no_grad():
        expected = model.predict_step((torch.from_numpy(inputs[:4]),), 0)
    assert set(answers[0]) == {"label", "score"}
    assert answers[0]["label"] == expected["label"][0].item()  # one input: its row, unwrapped
    assert answers[1]["label"] == expected["label"][1:4].tolist()
    assert np.allclose(answers[1]["score"], expected["score"][1:4].numpy(), atol=1e-6)


def docs_style_signature(shape: tuple[int, ...] = (16,)) -> Signature:
    """What the docs-style data's batches, `(x, y)`, say a model takes."""
    batch = [torch.zeros(8, *shape), torch.zeros(8, dtype=torch.long)]
    return signature_of([batch], None, False, "LitClassifier")


def test_a_request_is_checked_as_predict_py_checks_a_file() -> None:
    from fastapi import HTTPException

    one = np.zeros((8, 8)).tolist()
    signature = docs_style_signature((1, 8, 8))
    inputs, single = request_inputs(json.dumps({"inputs": one}).encode(), signature)
    assert inputs[""].shape == (1, 1, 8, 8) and single  # (H, W) for one channel, as in a file
    inputs, single = request_inputs({"inputs": np.zeros((5, 8, 8)).tolist()}, signature)
    assert inputs[""].shape == (5, 1, 8, 8) and inputs[""].dtype == np.float32 and not single
    with pytest.raises(HTTPException, match=r"holds true or false in the inputs, where the"):
        request_inputs({"inputs": [[True] + [0.5] * 15]}, docs_style_signature())


def test_a_module_that_answers_with_a_tuple_of_none_is_refused_at_start() -> None:
    """serve.py sends the data's first batch through the module as a request before it
    listens: what it could not answer stops it there, in one paragraph."""
    model = AnswersWithATuple(num_features=16, num_classes=4).eval()
    batch = [torch.from_numpy(split_inputs()[:8]), torch.zeros(8, dtype=torch.long)]
    signature = signature_of([batch], model, True, "AnswersWithATuple")
    with pytest.raises(UserError, match=r"tuples of NoneType, Tensor; .* a tuple or a dict"):
        check_it_answers(model, signature, batch, True, None, "the test split")


def test_a_tuple_output_is_answered_a_field_per_output() -> None:
    model = MeanAndLogVariance(num_features=16, num_classes=2).eval()
    batch = [torch.from_numpy(split_inputs()[:8]), torch.zeros(8)]
    signature = signature_of([batch], model, False, "MeanAndLogVariance")
    check_it_answers(model, signature, batch, False, None, "the test split")
    answer = serve_api.answer(model, batch[0], False, None)
    mean, log_var = model(batch[0])
    assert list(answer) == ["output_0", "output_1"]
    assert torch.equal(answer["output_0"], mean) and torch.equal(answer["output_1"], log_var)


def test_a_forward_that_cannot_take_the_inputs_is_refused_at_start() -> None:
    """A model built for 8 features, a data module of 16: one paragraph naming predict_step."""
    model = LitClassifier(num_features=8, num_classes=4).eval()
    batch = [torch.from_numpy(split_inputs()[:8]), torch.zeros(8, dtype=torch.long)]
    signature = signature_of([batch], model, False, "LitClassifier")
    with pytest.raises(UserError, match=r"LitClassifier cannot take the inputs of the test split"):
        check_it_answers(model, signature, batch, False, None, "the test split")


def test_a_bug_of_the_teams_forward_shows_its_traceback_not_a_paragraph() -> None:
    """The same start-up check, a forward that fails by its own code (not by the inputs it is
    handed): its IndexError, down to the team's line, never "cannot take the inputs"."""
    model = IndexesPastItsLayers(num_features=16, num_classes=4).eval()
    batch = [torch.from_numpy(split_inputs()[:8]), torch.zeros(8, dtype=torch.long)]
    with pytest.raises(IndexError) as raised:
        check_it_answers(model, docs_style_signature(), batch, False, None, "the test split")
    assert any(entry.path == Path(__file__) for entry in raised.traceback)


def test_a_predict_step_that_unpacks_x_y_gets_a_batch_shaped_as_the_datas() -> None:
    """serve.py once passed `(x,)`: `x, _ = batch` failed."""
    model = UnpacksItsBatch(num_features=16, num_classes=4).eval()
    inputs = split_inputs()[:5]
    batch = docs_style_signature().batch({"": inputs})
    answer = serve_api.answer(model, batch, True, None)
    expected = model(torch.from_numpy(inputs)).argmax(dim=1)
    assert answer["prediction"].tolist() == expected.tolist()


# -- named inputs: dict batches of a padding collate_fn ---------------------------------------


def padded_batches() -> list[dict[str, torch.Tensor]]:
    """Batches as the zoo's padded data gives them, the sequences padded to 5, then 7."""
    from .zoo.padded import Sequences, pad_collate

    items = Sequences(16, 3, 12)
    short = [i for i in range(16) if len(items[i]["tokens"]) <= 5][:3]
    return [pad_collate([items[i] for i in short]), pad_collate([items[i] for i in range(8)])]


def test_named_inputs_are_the_keys_the_model_reads_their_sizes_tied_as_in_the_data() -> None:
    from .zoo.padded import SequenceClassifier

    batches = padded_batches()
    assert batches[0]["tokens"].shape[1] != batches[1]["tokens"].shape[1]
    signature = signature_of(batches, SequenceClassifier().eval(), True, "SequenceClassifier")
    assert signature.shown() == "tokens (N, *) int64, mask (N, *) float32"  # not `label`
    assert signature.ties == (((0, 0), (1, 0)),)  # the two padded lengths: equal
    assert signature.request() == (
        '{"inputs": {"tokens": [...], "mask": [...]}}, shaped tokens (N, *) int64, mask (N, *) '
        "float32"
    )
    arrays, single = signature.check({"tokens": [1, 2, 3], "mask": [1, 1, 1]})  # one input
    assert single and arrays["tokens"].shape == (1, 3) and arrays["tokens"].dtype == np.int64
    batch = signature.batch(arrays)  # the data's keys, `label` as zeros
    assert list(batch) == ["tokens", "mask", "label"] and batch["label"].tolist() == [0]


def test_sizes_the_datas_batches_never_vary_in_are_shown_and_checked_fixed() -> None:
    """A dict batch of 16 features and a category id: `x (N, 16)`, not `x (N, *)`, and a
    request of 10 features is refused in one sentence saying so."""
    from fastapi import HTTPException

    class FeaturesAndACategory(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.head = torch.nn.Linear(16, 3)
            self.embed = torch.nn.Embedding(5, 3)

        def predict_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
            return self.head(batch["x"]) + self.embed(batch["cat"])

    batches = [
        {"x": torch.randn(n, 16), "cat": torch.randint(0, 5, (n,)), "y": torch.zeros(n)}
        for n in (8, 8, 5)
    ]
    signature = signature_of(batches, FeaturesAndACategory(), True, "FeaturesAndACategory")
    assert signature.shown() == "x (N, 16) float32, cat (N,) int64"
    arrays, single = signature.check({"x": [0.5] * 16, "cat": 2})
    assert single and arrays["x"].shape == (1, 16) and arrays["cat"].tolist() == [2]
    with pytest.raises(HTTPException) as refused:
        request_inputs({"inputs": {"x": [[0.5] * 10], "cat": [2]}}, signature)
    detail = refused.value.detail
    assert refused.value.status_code == 422 and one_sentence(detail), detail
    assert "holds `x` of shape (1, 10), where the model takes (N, 16) float32" in detail, detail


@pytest.mark.parametrize(
    ("inputs", "fragment"),
    [
        (
            {"tokens": [[1, 2]]},
            "holds the keys ['tokens'], not the model's inputs `tokens`, `mask`",
        ),
        (
            {"tokens": [[1]], "mask": [[1]], "label": [1]},
            "holds the keys ['label', 'mask', 'tokens']",
        ),
        ([[1, 2]], "holds no named arrays, not the model's inputs"),
        ({"tokens": [[[1]]], "mask": [[[1]]]}, "holds `tokens` of shape (1, 1, 1), where"),
        (
            {"tokens": [[1, 2], [3, 4]], "mask": [[1, 1]]},
            "inputs of different counts (tokens 2, mask 1)",
        ),
        ({"tokens": [[1, 2.5]], "mask": [[1, 1]]}, "values of `tokens` that are not whole numbers"),
        (
            {"tokens": [[1, 2]], "mask": [[1, 1, 0]]},
            "sizes must be equal, as in the data (tokens 1 2, mask 1 3",
        ),
        (
            {"tokens": [[1, 2]], "mask": [[1, float("nan")]]},
            "NaN or infinite values of `mask` in its one input,",
        ),
        ({"tokens": [["a"]], "mask": [[1]]}, "cannot be read as arrays of numbers (ValueError"),
        (
            {"tokens": [[1, 2]], "mask": [[1, True]]},
            "holds true or false in `mask`, where the model takes numbers (float32); send",
        ),
    ],
)
def test_a_request_of_named_inputs_that_does_not_fit_is_one_sentence(
    inputs: Any, fragment: str
) -> None:
    from fastapi import HTTPException

    from .zoo.padded import SequenceClassifier

    signature = signature_of(padded_batches(), SequenceClassifier().eval(), True, "Sequences")
    with pytest.raises(HTTPException) as refused:
        request_inputs({"inputs": inputs}, signature)
    detail = refused.value.detail
    assert refused.value.status_code == 422 and fragment in detail and one_sentence(detail), detail


def test_a_request_of_named_inputs_the_model_fails_on_is_answered_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A token id past the vocabulary fits every check of names, dimensions and dtypes: the
    model's complaint answers that request (422, one sentence), the others of its batch get
    their rows; the data's own batch was answered at start."""
    from .zoo.padded import SequenceClassifier, SequenceData

    L.seed_everything(0)
    trainer = L.Trainer(
        max_steps=1, accelerator="cpu", logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False,
    )  # fmt: skip
    model = SequenceClassifier()
    trainer.fit(model, datamodule=SequenceData())
    trainer.save_checkpoint(tmp_path / "model.ckpt")
    batches = padded_batches()
    signature = signature_of(batches, model.eval(), True, "SequenceClassifier")
    check_it_answers(model, signature, batches[1], True, None, "the test split")
    api = CheckpointAPI(
        "tests.machinery.zoo.padded.SequenceClassifier",
        str(tmp_path / "model.ckpt"),
        signature,
        True,
    )
    api.setup("cpu")
    good = {"tokens": batches[1]["tokens"].tolist(), "mask": batches[1]["mask"].tolist()}
    requests = [{"inputs": good}, {"inputs": {"tokens": [[1, 99]], "mask": [[1, 1]]}}]
    contexts: list[dict[str, Any]] = [{}, {}]
    decoded = [api.decode_request(r, c) for r, c in zip(requests, contexts, strict=True)]
    outputs = api.unbatch(api.predict(api.batch(decoded)), contexts)
    answered, refused = (api.encode_response(o, c) for o, c in zip(outputs, contexts, strict=True))
    with torch.no_grad():
        expected = model.predict_step(batches[1], 0)
    assert answered["prediction"] == expected["prediction"].tolist()
    assert refused.status_code == 422
    detail = json.loads(refused.body)["detail"]
    assert detail.startswith("The model cannot take the request's inputs (IndexError: index out")
    assert one_sentence(detail), detail
    logged = [r for r in caplog.records if "failed on a request's inputs" in r.getMessage()]
    assert logged and logged[0].exc_info is not None  # its traceback in the server's log
    alone = api.predict(decoded[1])  # max_batch_size=1: LitServe passes the one request
    assert api.encode_response(alone, contexts[1]).status_code == 422


def test_what_a_dict_batch_holds_besides_tensors_is_left_as_the_data_gives_it() -> None:
    """A collate_fn that keeps each sequence's text beside its tensors: not an input unless
    the model reads it, and then refused in one sentence naming it."""
    from .zoo.padded import SequenceClassifier

    class ReadsTheText(SequenceClassifier):
        def predict_step(self, batch: dict[str, Any], batch_idx: int) -> torch.Tensor:
            assert all(isinstance(text, str) for text in batch["text"])
            return self(batch["tokens"], batch["mask"])

    batches = [{**batch, "text": ["a"] * len(batch["label"])} for batch in padded_batches()]
    signature = signature_of(batches, SequenceClassifier().eval(), True, "SequenceClassifier")
    assert [spec.name for spec in signature.inputs] == ["tokens", "mask"]
    made = signature.batch(signature.check({"tokens": [[1, 2]], "mask": [[1, 1]]})[0])
    assert made["text"] == batches[0]["text"]  # as the data gave it in its first batch
    with pytest.raises(Refused, match=r"reads `text` from its batches, a list; serve.py"):
        signature_of(batches, ReadsTheText().eval(), True, "ReadsTheText")
