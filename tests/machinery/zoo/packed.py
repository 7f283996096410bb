"""Text-like inputs of different lengths, as torch's RNN tutorials feed them: a `Dataset` of
token sequences, a `collate_fn` that pads them into dict batches (`input_ids`, `lengths`,
`label`), a GRU over `pack_padded_sequence`, and the module's own `predict_step`."""

from __future__ import annotations

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence
from torch.utils.data import DataLoader, Dataset
from torchmetrics.classification import MulticlassAccuracy


class PackedSequenceClassifier(L.LightningModule):
    def __init__(self, vocab_size: int = 12, num_classes: int = 2, lr: float = 0.02) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.embed = nn.Embedding(vocab_size, 8, padding_idx=0)
        self.rnn = nn.GRU(8, 16, batch_first=True)
        self.head = nn.Linear(16, num_classes)
        self.val_acc = MulticlassAccuracy(num_classes)
        self.test_acc = MulticlassAccuracy(num_classes)

    def forward(self, input_ids, lengths):
        packed = pack_padded_sequence(
            self.embed(input_ids), lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        _, hidden = self.rnn(packed)
        return self.head(hidden[-1])

    def training_step(self, batch, batch_idx):
        logits = self(batch["input_ids"], batch["lengths"])
        loss = F.cross_entropy(logits, batch["label"])
        self.log("train_loss", loss, on_epoch=True, batch_size=len(batch["label"]))
        return loss

    def validation_step(self, batch, batch_idx):
        self.val_acc(self(batch["input_ids"], batch["lengths"]), batch["label"])
        self.log("val_acc", self.val_acc, batch_size=len(batch["label"]))

    def test_step(self, batch, batch_idx):
        self.test_acc(self(batch["input_ids"], batch["lengths"]), batch["label"])
        self.log("test_acc", self.test_acc, batch_size=len(batch["label"]))

    def predict_step(self, batch, batch_idx):
        probs = self(batch["input_ids"], batch["lengths"]).softmax(-1)
        return {"prediction": probs.argmax(-1), "prob": probs}

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


class TokenSequences(Dataset):
    """Label 1 when the sequence holds more high tokens than low ones."""

    def __init__(self, count: int, seed: int, vocab_size: int) -> None:
        g = torch.Generator().manual_seed(seed)
        lengths = torch.randint(2, 12, (count,), generator=g)
        self.items = [torch.randint(1, vocab_size, (int(n),), generator=g) for n in lengths]
        self.labels = [int((t > vocab_size // 2).sum() * 2 > len(t)) for t in self.items]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        return self.items[index], self.labels[index]


def pad_batch(samples):
    sequences = [s for s, _ in samples]
    labels = [label for _, label in samples]
    return {
        "input_ids": pad_sequence(sequences, batch_first=True),
        "lengths": torch.tensor([len(s) for s in sequences]),
        "label": torch.tensor(labels),
    }


class TokenData(L.LightningDataModule):
    def __init__(self, vocab_size: int = 12, batch_size: int = 8) -> None:
        super().__init__()
        self.vocab_size, self.batch_size = vocab_size, batch_size

    def setup(self, stage=None):
        self.train_set = TokenSequences(64, 16, self.vocab_size)
        self.val_set = TokenSequences(24, 17, self.vocab_size)
        self.test_set = TokenSequences(23, 18, self.vocab_size)

    def train_dataloader(self):
        return DataLoader(
            self.train_set, batch_size=self.batch_size, shuffle=True, collate_fn=pad_batch
        )

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=self.batch_size, collate_fn=pad_batch)

    def test_dataloader(self):
        return DataLoader(self.test_set, batch_size=self.batch_size, collate_fn=pad_batch)
