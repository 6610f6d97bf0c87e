"""MNIST in IDX format (raw or .gz) for the PyTorch peers, as numpy arrays.

Shared by pytorch_lenet5.py and pytorch_models.py (they import it from their own
directory). Errors raise IdxError with a one-line message; the peers turn it into
their "error:" line and exit 1.
"""

import gzip
import os

import numpy as np


class IdxError(Exception):
    pass


def read_idx(directory, name):
    """Read an IDX file, raw or .gz, into a numpy uint8 array of its shape."""
    path = os.path.join(directory, name)
    if os.path.exists(path):
        with open(path, "rb") as f:
            raw = f.read()
    elif os.path.exists(path + ".gz"):
        with gzip.open(path + ".gz", "rb") as f:
            raw = f.read()
    else:
        raise IdxError("missing MNIST file %s (or %s.gz)" % (path, path))
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise IdxError("%s: not an unsigned-byte IDX file" % path)
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * k:8 + 4 * k], "big") for k in range(ndim)]
    offset = 4 + 4 * ndim
    count = int(np.prod(dims))
    if len(raw) - offset < count:
        raise IdxError("%s: truncated (%d bytes of data, %d expected)" % (path, len(raw) - offset, count))
    return np.frombuffer(raw, dtype=np.uint8, count=count, offset=offset).reshape(dims)


def load_scaled(directory, prefix, limit=None):
    """One split ("train" or "t10k"): float32 images N x 28 x 28 scaled p/127.5 - 1
    (background -1, as lenet5-cl) and uint8 labels N, first `limit`."""
    images = read_idx(directory, prefix + "-images-idx3-ubyte")
    labels = read_idx(directory, prefix + "-labels-idx1-ubyte")
    if images.shape[0] != labels.shape[0] or images.shape[1:] != (28, 28):
        raise IdxError("%s: %s images %s do not match labels %s"
                       % (directory, prefix, images.shape, labels.shape))
    if limit is not None and limit > 0:
        images, labels = images[:limit], labels[:limit]
    x = images.astype(np.float32) / np.float32(127.5) - np.float32(1.0)
    return x, labels
