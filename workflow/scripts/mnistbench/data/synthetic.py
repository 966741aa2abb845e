"""A small MNIST-format data set whose classes are learnable, for tests and offline checks.

Each class is a fixed random 28x28 prototype; samples are the prototype plus noise. The files
are gzip IDX, exactly the layout the real mirrors serve, so the real download code reads them.
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


if __name__ == "__main__":
    import argparse
    import json

    p = argparse.ArgumentParser(description="Write a small learnable MNIST-format data set.")
    p.add_argument("folder")
    p.add_argument("--train", type=int, default=600)
    p.add_argument("--test", type=int, default=200)
    a = p.parse_args()
    print(json.dumps(write(a.folder, a.train, a.test)))
