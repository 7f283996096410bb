"""Sequences of different lengths: a `Dataset` of dicts and a `collate_fn` that pads them into
dict batches (`tokens`, `mask`, `label`); the module has its own `predict_step`."""

from __future__ import annotations

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset
from torchmetrics.classification import MulticlassAccuracy


class SequenceClassifier(L.LightningModule):
    def __init__(self, vocab_size: int = 12, num_classes: int = 2, lr: float = 0.02) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.embed = nn.Embedding(vocab_size, 16, padding_idx=0)
        self.head = nn.Linear(16, num_classes)
        self.val_acc = MulticlassAccuracy(num_classes)
        self.test_acc = MulticlassAccuracy(num_classes)

    def forward(self, tokens, mask):
        summed = (self.embed(tokens) * mask.unsqueeze(-1)).sum(1)
        return self.head(summed / mask.sum(1, keepdim=True))

    def _logits(self, batch):
        return self(batch["tokens"], batch["mask"])

    def training_step(self, batch, batch_idx):
        loss = F.cross_entropy(self._logits(batch), batch["label"])
        self.log("train_loss", loss, on_epoch=True, batch_size=len(batch["label"]))
        return loss

    def validation_step(self, batch, batch_idx):
        logits = self._logits(batch)
        self.val_acc(logits, batch["label"])
        self.log("val_acc", self.val_acc, batch_size=len(batch["label"]))

    def test_step(self, batch, batch_idx):
        logits = self._logits(batch)
        self.test_acc(logits, batch["label"])
        self.log("test_acc", self.test_acc, batch_size=len(batch["label"]))

    def predict_step(self, batch, batch_idx):
        probs = self._logits(batch).softmax(-1)
        return {"prediction": probs.argmax(-1), "prob": probs}

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


class Sequences(Dataset):
    """Label 1 when the sequence holds more high tokens than low ones."""

    def __init__(self, count: int, seed: int, vocab_size: int) -> None:
        g = torch.Generator().manual_seed(seed)
        lengths = torch.randint(3, 10, (count,), generator=g)
        self.items = [torch.randint(1, vocab_size, (int(n),), generator=g) for n in lengths]
        self.labels = [int((t > vocab_size // 2).sum() * 2 > len(t)) for t in self.items]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        return {"tokens": self.items[index], "label": self.labels[index]}


def pad_collate(samples):
    tokens = pad_sequence([s["tokens"] for s in samples], batch_first=True)
    return {
        "tokens": tokens,
        "mask": (tokens != 0).float(),
        "label": torch.tensor([s["label"] for s in samples]),
    }


class SequenceData(L.LightningDataModule):
    def __init__(self, vocab_size: int = 12, batch_size: int = 8) -> None:
        super().__init__()
        self.vocab_size, self.batch_size = vocab_size, batch_size

    def setup(self, stage=None):
        self.train_set = Sequences(64, 6, self.vocab_size)
        self.val_set = Sequences(24, 7, self.vocab_size)
        self.test_set = Sequences(23, 8, self.vocab_size)

    def train_dataloader(self):
        return DataLoader(
            self.train_set, batch_size=self.batch_size, shuffle=True, collate_fn=pad_collate
        )

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=self.batch_size, collate_fn=pad_collate)

    def test_dataloader(self):
        return DataLoader(self.test_set, batch_size=self.batch_size, collate_fn=pad_collate)
