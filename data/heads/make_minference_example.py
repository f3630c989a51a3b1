#!/usr/bin/env python3
"""Writes llama3-8b-262k-minference.json: a head pattern report in Fulcrum's format (patterns.hpp).

MInference's published configuration for Llama-3-8B-262K labels all 1,024 heads (32 layers x 32 q heads,
8 KV heads) vertical-slash in five (verticals, slashes) budget classes with these head counts. Which head
has which class is not reproduced here: the 1,024 labels, in class order, are shuffled with Python's
random.Random(SEED) and dealt out layer by layer, head by head. Run it again to get the same file.
"""
import json
import random
import sys

SEED = 2025
CLASSES = [((1000, 6096), 473), ((30, 800), 278), ((100, 800), 153), ((3500, 100), 89), ((500, 700), 31)]
LAYERS, Q_HEADS, KV_HEADS = 32, 32, 8


def main(path: str) -> None:
    labels = [budget for budget, count in CLASSES for _ in range(count)]
    assert len(labels) == LAYERS * Q_HEADS
    random.Random(SEED).shuffle(labels)
    layers = []
    for layer in range(LAYERS):
        heads = labels[layer * Q_HEADS:(layer + 1) * Q_HEADS]
        layers.append({"heads": [{"kind": "vertical-slash", "verticals": v, "slashes": s} for v, s in heads]})
    report = {
        "model": "llama3-8b-262k",
        "description": ("MInference's five vertical-slash budget classes for Llama-3-8B-262K (verticals, slashes): "
                        "(1000, 6096) 473 heads, (30, 800) 278, (100, 800) 153, (3500, 100) 89, (500, 700) 31; "
                        f"placement: the labels in this class order shuffled by Python random.Random({SEED}), dealt "
                        "layer by layer, head by head (data/heads/make_minference_example.py)"),
        "q_heads": Q_HEADS,
        "kv_heads": KV_HEADS,
        "layers": layers,
    }
    # One head per line: readable, diffable, and still small.
    with open(path, "w") as f:
        head = {k: v for k, v in report.items() if k != "layers"}
        text = json.dumps(head, indent=2)[:-2] + ',\n  "layers": [\n'
        text += ",\n".join(
            '    {"heads": [\n' + ",\n".join("      " + json.dumps(h) for h in layer["heads"]) + "\n    ]}"
            for layer in layers)
        f.write(text + "\n  ]\n}\n")
    with open(path) as f:
        assert json.load(f) == report


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "llama3-8b-262k-minference.json")
