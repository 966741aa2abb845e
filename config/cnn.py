"""An example of a user's own network for the `models` key: a small LeNet-style CNN.

    snakemake --cores all --config models='[mlp-16-16, config/cnn.py:Net]' training='{lr: 0.1}'

Any torch.nn.Module works the same way: its class is built with no arguments and takes a float32
batch of normalised MNIST images as rows, shape (B, 784), returning (B, 10) logits. The modes
that take any nn.Module (module, dataloader, compiled, amp, cudagraph) train it; the hand-written
ones are left out (results/summary/left_out.csv says why). The file's content is part of what its
runs depend on: edit it and they are timed again. Plain SGD trains it at training.lr 0.1; at the
default 0.5 (tuned for the sigmoid MLPs) its runs at small batch sizes diverge, and their rows say
so.
"""

import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, kernel_size=5),  # 28x28 -> 24x24
            nn.ReLU(),
            nn.MaxPool2d(2),  # -> 12x12
            nn.Conv2d(6, 16, kernel_size=5),  # -> 8x8
            nn.ReLU(),
            nn.MaxPool2d(2),  # -> 4x4
        )
        self.classifier = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        # The pipeline feeds images as rows of 784 pixels: a convolution wants them as 1x28x28.
        return self.classifier(self.features(x.reshape(-1, 1, 28, 28)).flatten(1))
