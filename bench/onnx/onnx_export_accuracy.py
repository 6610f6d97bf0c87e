#!/usr/bin/env python3
"""An exported model's test-set accuracy in onnxruntime beside `lenet5 eval` (issue 13).

Exports CHECKPOINT with `lenet5 export`, feeds the MNIST test images (bytes / 255, the graph's
input) to onnxruntime through bench/peers/onnxruntime_run.js, runs `lenet5 eval --variant cpu`
on the same checkpoint, and prints one JSON line: both accuracies, whether the confusion
matrices are equal, and onnxruntime's ms per image. Exit 1 when they differ.

    /usr/bin/python3 bench/onnx/onnx_export_accuracy.py --lenet5 build/lenet5 --checkpoint lenet5.ck \
        [--data data/mnist] [--work DIR] [--threads 2]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "peers"))
from mnist_idx import read_idx  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lenet5", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--data", default=os.environ.get("LENET5_DATA", os.path.join(HERE, "..", "..", "data", "mnist")))
    ap.add_argument("--work", default=None, help="folder for the .onnx, .npy and JSON files (default: a temporary one)")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="lenet5_export_")
    os.makedirs(work, exist_ok=True)
    onnx_path, images, logits, eval_json = (os.path.join(work, n) for n in
                                            ("model.onnx", "images.npy", "outputs.npy", "eval.json"))

    subprocess.run([a.lenet5, "export", "--model", a.checkpoint, "--onnx", onnx_path], check=True)
    x = read_idx(a.data, "t10k-images-idx3-ubyte")
    labels = read_idx(a.data, "t10k-labels-idx1-ubyte").astype(np.int64)
    np.save(images, (x.astype(np.float32) / np.float32(255))[:, None, :, :])
    ort = subprocess.run(["node", os.path.join(HERE, "..", "peers", "onnxruntime_run.js"), "--model", onnx_path,
                          "--input", images, "--output", logits, "--batch", "100", "--threads", str(a.threads)],
                         check=True, capture_output=True, text=True)
    subprocess.run([a.lenet5, "eval", "--model", a.checkpoint, "--variant", "cpu", "--data", a.data,
                    "--json", eval_json], check=True, stdout=subprocess.DEVNULL)

    out = np.load(logits)
    predicted = out.argmax(axis=1)  # the first maximum, as lenet5 counts
    classes = out.shape[1]
    confusion = np.zeros((classes, classes), dtype=np.int64)
    np.add.at(confusion, (labels, predicted), 1)
    ev = json.load(open(eval_json))
    same = confusion.tolist() == ev["confusion"]
    print(json.dumps({"checkpoint": a.checkpoint, "test_images": int(len(labels)),
                      "onnxruntime_accuracy": float((predicted == labels).mean()),
                      "eval_accuracy": ev["test_accuracy"], "same_confusion_matrix": same,
                      "onnxruntime_ms_per_image": json.loads(ort.stdout)["ms_per_image"],
                      "onnxruntime_threads": a.threads}))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
