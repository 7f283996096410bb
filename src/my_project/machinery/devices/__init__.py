"""Devices: what a Trainer runs on (`choice`), tensors that would not follow the model to its
device (`guard`), and float32 matmul precision on tensor-core GPUs (`precision`)."""
