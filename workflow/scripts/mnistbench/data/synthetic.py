"""Stand-ins for MNIST, for tests and offline checks.

- make/write: a small MNIST-format data set whose classes are learnable. Each class is a fixed
  random 28x28 prototype; samples are the prototype plus noise. The files are gzip IDX, exactly
  the layout the real mirrors serve, so the real download code reads them.
- digits: handwriting-like tensors that train as MNIST does, where the prototypes are too easy.
"""

import gzip
import hashlib
import struct
from pathlib import Path

import numpy as np

from mnistbench.data.download import FILES


def _idx(array: np.ndarray) -> bytes:
    magic = 0x0800 | array.ndim  # unsigned byte data
    return struct.pack(">I", magic) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()


def make(n_train: int = 600, n_test: int = 200, seed: int = 0):
    rng = np.random.default_rng(seed)
    protos = rng.random((10, 28, 28)) < 0.25

    def split(n):
        labels = np.arange(n) % 10
        rng.shuffle(labels)
        noise = rng.random((n, 28, 28))
        images = np.where(protos[labels], 160 + 95 * noise, 60 * noise).astype(np.uint8)
        return images, labels.astype(np.uint8)

    (xtr, ytr), (xte, yte) = split(n_train), split(n_test)
    return {FILES[0]: xtr, FILES[1]: ytr, FILES[2]: xte, FILES[3]: yte}


def write(folder, n_train: int = 600, n_test: int = 200, seed: int = 0) -> dict[str, str]:
    """Write the four .gz files into folder; returns their md5 (for the `mnist.md5` config)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    md5 = {}
    for name, array in make(n_train, n_test, seed).items():
        blob = gzip.compress(_idx(array), mtime=0)
        (folder / name).write_bytes(blob)
        md5[name] = hashlib.md5(blob).hexdigest()
    return md5


def digits(n: int, seed: int = 0):
    """(x [n, 784] float32 in [0, 1], labels [n]): the digits 0-9 drawn in a scalable font, each
    shifted, turned, scaled and thickened at random, on a zero background (about a fifth of the
    pixels lit, as in MNIST). Unlike make's prototypes the classes share strokes and overlap, so
    per-sample SGD at a high learning rate keeps taking large steps on them and saturates hidden
    units, as it does on MNIST (where make's data stays far from that)."""
    import torch
    from PIL import Image, ImageDraw, ImageFont

    g = torch.Generator().manual_seed(seed)
    glyphs = []  # [digit][size and stroke] 28x28
    for digit in range(10):
        for size, stroke in ((18, 0), (20, 0), (22, 1), (24, 1)):
            im = Image.new("L", (28, 28))
            font = ImageFont.load_default(size=size)
            ImageDraw.Draw(im).text((14, 14), str(digit), fill=255, font=font, anchor="mm", stroke_width=stroke)
            glyphs.append(torch.frombuffer(bytearray(im.tobytes()), dtype=torch.uint8).reshape(28, 28))
    glyphs = torch.stack(glyphs).reshape(10, 4, 1, 28, 28).float() / 255
    y = torch.randint(0, 10, (n,), generator=g)
    src = glyphs[y, torch.randint(0, 4, (n,), generator=g)]
    angle = (torch.rand(n, generator=g) - 0.5) * (torch.pi / 6)  # +-15 degrees
    scale = 0.9 + 0.2 * torch.rand(n, generator=g)
    shift = (torch.rand(n, 2, generator=g) - 0.5) * (6 / 14)  # +-3 pixels
    cos, sin = torch.cos(angle) * scale, torch.sin(angle) * scale
    theta = torch.stack([torch.stack([cos, -sin, shift[:, 0]], 1), torch.stack([sin, cos, shift[:, 1]], 1)], 1)
    grid = torch.nn.functional.affine_grid(theta, (n, 1, 28, 28), align_corners=False)
    x = torch.nn.functional.grid_sample(src, grid, align_corners=False).reshape(n, 784)
    return x.clamp_(0, 1).contiguous(), y


if __name__ == "__main__":
    import argparse
    import json

    p = argparse.ArgumentParser(description="Write a small learnable MNIST-format data set.")
    p.add_argument("folder")
    p.add_argument("--train", type=int, default=600)
    p.add_argument("--test", type=int, default=200)
    a = p.parse_args()
    print(json.dumps(write(a.folder, a.train, a.test)))
