#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpus (fuzz/corpus/<target>/): small valid inputs of every kind, from which
libFuzzer mutates. Re-run after a format change (a plan version) so the seeds stay valid:

    PYTHONPATH=build/dev/python python3 fuzz/make_corpus.py
"""
import json
import struct
from pathlib import Path

import fulcrum

HERE = Path(__file__).parent / "corpus"
MASKS = ["causal", "full", "window:5", "lambda:2:4", "blockwise:3:1", "shared-question:3:25", "vslash:0,7:0,2",
         "blocksparse:4:0-0,1-0,2-1,2-2,4-4", "vsblocks:4:0,9:0,2", "striped:2:4:causal",
         "striped:1:1:vsblocks:2:5:0,3"]


def write(target: str, name: str, data: bytes) -> None:
    folder = HERE / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)


def tiny_model() -> fulcrum.ModelShape:
    m = fulcrum.ModelShape()
    m.name, m.layers, m.hidden, m.ffn_hidden = "fuzz", 1, 32, 64
    m.q_heads, m.kv_heads, m.head_dim, m.dtype_bytes = 4, 2, 8, 4
    return m


def plans():
    """(name, Plan): every op kind, both passes, head ranges (DCP head blocks), rings, a striped layout."""
    model = tiny_model()
    cases = [("distca", 2, [40, 20, 36], "causal", {"granularity": 8}), ("dcp", 2, [48, 16], "window:5",
             {"dcp_block": 16, "dcp_head_blocks": 2}), ("ring", 2, [64], "causal", {}),
             ("perdoc-cp", 2, [50, 14], "lambda:2:4", {"cp_degree": 2}), ("striped", 2, [64], "causal",
             {"mtraining_block": 8})]
    for planner, ranks, lengths, mask, options in cases:
        docs = fulcrum.documents(lengths, mask=fulcrum.Mask(mask))
        batch = fulcrum.pack_batch(docs, ranks, -(-sum(lengths) // ranks))
        assignment = fulcrum.make_planner(planner, fulcrum.PlannerOptions(model, **options)).plan(batch)
        for pass_, mode in [("forward", "pingpong"), ("backward", "single-stream")]:
            yield f"{planner}-{pass_}", fulcrum.compile_plan(assignment, model, pass_, mode, 4)


def main() -> None:
    for name, plan in plans():
        assert fulcrum.verify_plan(plan).ok
        write("plan_binary", name + ".fcpl", plan.to_bytes())
        write("plan_json", name + ".json", json.dumps(plan.to_dict(), separators=(",", ":")).encode())
    for name, text in [("lines", "100\n200\n3\n"), ("spaces", " 5 \r\n\n7\t\n"), ("json", "[1, 2, 4096]"),
                       ("one", "[65536]")]:
        write("lengths", name, text.encode())
    for i, mask in enumerate(MASKS):
        # Two bytes of document length, four of a query and a key range (mask_fuzz.cpp), then the spec.
        write("mask", mask.split(":")[0] + str(i), struct.pack("<HBBBB", 40 + i, 3, 30, 0, 40) + mask.encode())
    for name in ("h200-dgx", "rtx3090x4-pcie"):
        write("hardware", name + ".json", json.dumps(fulcrum.hardware(name).to_dict()).encode())
    data = Path(__file__).parents[1] / "data"
    write("hardware", "cpu-local.json", (data / "hardware" / "cpu-local.json").read_bytes())
    for name in ("tiny", "llama3-8b"):  # Hugging Face configs
        write("model_config", name + ".json", (data / "models" / name / "config.json").read_bytes())
    write("model_config", "fulcrum-format.json", json.dumps(fulcrum.model_shape_json(fulcrum.model_shape("tiny")))
          .encode())
    report = json.loads((data / "heads" / "llama3-8b-262k-minference.json").read_text())
    report["layers"] = report["layers"][:2]  # under libFuzzer's 64 KiB inputs
    write("head_patterns", "minference-2-layers.json", json.dumps(report, separators=(",", ":")).encode())
    kinds = [{"kind": "full"}, {"kind": "a-shape", "sink": 4, "window": 64},
             {"kind": "vertical-slash", "verticals": 8, "slashes": 16},
             {"kind": "block-sparse", "block": 16, "blocks": 4}]
    write("head_patterns", "every-kind.json", json.dumps({"model": "tiny", "q_heads": 4, "kv_heads": 2,
                                                          "layers": [{"heads": kinds}]}).encode())
    # 600 levels deep, past the 512 every reader takes: 100,000 levels overflowed the parser's stack.
    for target in ("hardware", "model_config", "head_patterns", "plan_json"):
        write(target, "deep.json", b"[" * 600 + b"]" * 600)


if __name__ == "__main__":
    main()
