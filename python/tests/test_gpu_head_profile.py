"""bench/gpu_head_profile.py on CPU: its masks, its --check, and a tiny end-to-end profile.

The script measures FlexAttn's runtime profile with torch (made for a GPU). Its masks must be exactly the pairs
Fulcrum's C++ heads::to_mask keeps (src/fulcrum/planners/heads/patterns.cpp, seeded by head_mask_seed(seed, 0, 0)
as `fulcrum profile --heads` does); it takes them from to_mask itself (fulcrum.head_pattern_mask) and reads them
into index lists. The expected lists and pair counts below are the C++ to_mask's (+ MaskSpec::document_pairs),
pinned: a change to the masks' sampling, or to the script's reading of them, shows here. The a-shape, full and
budget-cut counts also follow by hand (e.g. a-shape:4:64 at 300: 64*65/2 + 236*64 window pairs + 938 sink pairs
= 18122).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="bench/gpu_head_profile.py needs PyTorch")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu_head_profile.py"
EXAMPLE = ROOT / "data" / "heads" / "llama3-8b-262k-minference.json"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_head_profile", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_head_profile"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


g = load_script()

# (key, prompt tokens) -> pairs kept by the C++ to_mask with head_mask_seed(1, 0, 0).
CPP_PAIRS = {
    ("full", 300): 45150,
    ("a-shape:4:64", 300): 18122,
    ("a-shape:300:100", 1000): 320200,
    ("vertical-slash:30:80", 300): 20440,
    ("vertical-slash:400:600", 640): 204302,
    ("vertical-slash:400:600", 1000): 444248,
    ("vertical-slash:4000:3", 1000): 500500,  # verticals cut to the prompt: every column, i.e. causal
    ("block-sparse:64:blocks=3", 1000): 147732,
    ("block-sparse:64:density=0.3", 300): 12126,
    ("block-sparse:64:density=0.3", 1000): 136468,
    ("block-sparse:48:density=0.5", 640): 102976,
    ("block-sparse:16:blocks=1000", 300): 45150,
    ("block-sparse:7:blocks=2", 1000): 10948,
    ("block-sparse:64:density=0.1", 4097): 747905,
    ("vertical-slash:1000:6096", 16384): 72685398,
    ("vertical-slash:3500:100", 16384): 40992392,
}

# (key, prompt tokens, seed) -> the C++ to_mask's index lists (verticals, slashes) or block pairs.
CPP_LISTS = {
    ("vertical-slash:6:5", 100, 1): ([0, 1, 2, 19, 38, 53], [0, 1, 2, 50, 59]),
    ("vertical-slash:2:9", 12, 1): ([0, 7], [0, 1, 2, 3, 4, 5, 7, 9, 11]),  # the complement sampler
}
CPP_BLOCK_PAIRS = {
    ("block-sparse:7:blocks=4", 50, 1): "0-0,1-0,1-1,2-0,2-1,2-2,3-0,3-1,3-2,3-3,4-0,4-2,4-3,4-4,5-0,5-2,5-3,5-5,"
    "6-0,6-1,6-5,6-6,7-0,7-4,7-6,7-7",
    ("block-sparse:5:density=0.5", 40, 1): "0-0,1-1,2-0,2-2,3-0,3-3,4-0,4-1,4-4,5-0,5-4,5-5,6-0,6-2,6-5,6-6,7-0,"
    "7-1,7-4,7-7",
    ("block-sparse:2:blocks=5", 20, 3): "0-0,1-0,1-1,2-0,2-1,2-2,3-0,3-1,3-2,3-3,4-0,4-1,4-2,4-3,4-4,5-0,5-2,5-3,"
    "5-4,5-5,6-0,6-2,6-3,6-5,6-6,7-0,7-1,7-3,7-5,7-7,8-0,8-4,8-6,8-7,8-8,9-0,9-2,9-6,9-8,9-9",
}

CPU = torch.device("cpu")


def mask(key: str, tokens: int, seed: int = 1):  # -> g.HeadMask
    return g.to_mask(g.HeadPattern.parse(key), tokens, g.fulcrum.head_mask_seed(seed, 0, 0))


def test_keys_round_trip_and_the_example_report_patterns() -> None:
    for key in ["full", "a-shape:128:4096", "vertical-slash:1000:6096", "block-sparse:64:blocks=100",
                "block-sparse:64:density=0.1", "block-sparse:64:density=1e-05"]:
        assert g.HeadPattern.parse(key).key() == key
    layers = g.read_report(str(EXAMPLE))
    expected = ["full", "vertical-slash:30:800", "vertical-slash:1000:6096", "vertical-slash:100:800",
                "vertical-slash:3500:100", "vertical-slash:500:700"]
    assert [p.key() for p in g.profiled_patterns(layers, 1)] == expected
    assert [p.key() for p in g.profiled_patterns(layers, None)] == expected  # all 32 layers: the same five
    with pytest.raises(ValueError, match="layers = 33"):
        g.profiled_patterns(layers, 33)


def test_index_lists_are_the_cpp_to_mask_lists() -> None:
    for (key, tokens, seed), (verticals, slashes) in CPP_LISTS.items():
        m = mask(key, tokens, seed)
        assert (m.verticals, m.slashes) == (verticals, slashes), key
    for (key, tokens, seed), text in CPP_BLOCK_PAIRS.items():
        m = mask(key, tokens, seed)
        assert ",".join(f"{q}-{k}" for q, k in zip(m.pairs_q, m.pairs_k, strict=True)) == text, key


def test_pair_counts_are_the_cpp_to_mask_counts() -> None:
    for (key, tokens), pairs in CPP_PAIRS.items():
        m = mask(key, tokens)
        assert int(g.tile_counts(m, tokens, CPU).sum()) == pairs, (key, tokens)
        if tokens <= 4097:
            assert int(g.dense_mask(m, tokens).sum()) == pairs, (key, tokens)


def test_check_passes_on_cpu_and_counts_agree() -> None:
    lengths = [300, 640, 1000]
    pairs = g.run_check(CPU, lengths, seed=1, tolerance=2e-5, compile_flex=False, log=lambda _: None)
    assert len(pairs) == len(lengths) * len(g.CHECK_KEYS)
    compared = 0
    for (key, tokens), expected in CPP_PAIRS.items():
        if (key, tokens) in pairs:
            assert pairs[(key, tokens)] == expected, (key, tokens)
            compared += 1
    assert compared >= 10


def test_check_catches_a_wrong_mask(monkeypatch: pytest.MonkeyPatch) -> None:
    # A mask_mod one diagonal short of the derived lists (slash 1: rows 1.., keys mostly not columns) must fail
    # the check, which compares token by token.
    real = g.MaskMods._fill

    def drop_a_slash(self: Any, slot: Any, m: Any, length: int) -> None:
        real(self, slot, m, length)
        if m.kind == "vslash":
            slot.buffers[1][m.slashes[1]] = False

    monkeypatch.setattr(g.MaskMods, "_fill", drop_a_slash)
    monkeypatch.setattr(g, "CHECK_KEYS", [("vertical-slash:30:80", False)])
    with pytest.raises(AssertionError, match="mask_mod differs"):
        g.run_check(CPU, [300], seed=1, tolerance=2e-5, compile_flex=False, log=lambda _: None)


def test_tiny_profile_writes_a_runtime_profile(tmp_path: Path) -> None:
    heads = [{"kind": "full"}, {"kind": "a-shape", "sink": 4, "window": 64},
             {"kind": "vertical-slash", "verticals": 30, "slashes": 80}, {"kind": "a-shape", "sink": 4, "window": 64}]
    layer2 = [{"kind": "block-sparse", "block": 64, "blocks": 3}, {"kind": "block-sparse", "block": 64,
                                                                    "density": 0.3}, {"kind": "full"}, {"kind": "full"}]
    layer3 = [{"kind": "vertical-slash", "verticals": 7, "slashes": 9}] * 4  # beyond --layers 2: not profiled
    report = {"q_heads": 4, "kv_heads": 2, "layers": [{"heads": heads}, {"heads": layer2}, {"heads": layer3}]}
    (tmp_path / "report.json").write_text(json.dumps(report))
    out = tmp_path / "profile.json"
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--patterns", str(tmp_path / "report.json"), "--layers", "2", "--device", "cpu",
         "--prompt-tokens", "256,512", "--repeats", "1", "--head-dim", "64", "--hidden", "256", "--dtype", "fp32",
         "--extrapolate", "--out", str(out), "--details", str(tmp_path / "details.json")],
        capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr
    profile = json.loads(out.read_text())
    # The RuntimeProfile format (cost_model.hpp; from_json rejects other keys).
    assert set(profile) == {"device", "prompt_tokens", "extrapolate", "t_qkvo_s", "t_qo_s", "attention_s"}
    assert profile["prompt_tokens"] == [256, 512] and profile["extrapolate"] is True
    assert profile["device"].startswith("cpu: ") and "fp32" in profile["device"] and "untimed" in profile["device"]
    keys = ["full", "a-shape:4:64", "vertical-slash:30:80", "block-sparse:64:blocks=3", "block-sparse:64:density=0.3"]
    assert list(profile["attention_s"]) == keys
    series = [profile["t_qkvo_s"], profile["t_qo_s"], *profile["attention_s"].values()]
    for values in series:
        assert len(values) == 2 and all(isinstance(x, float) and x > 0 for x in values)
    for key in keys:
        assert g.HeadPattern.parse(key).key() == key
    # Progress on stderr (one line per measurement), the table on stdout.
    assert run.stderr.count("] T=") == 2 * (len(keys) + 1)
    assert "t_qkvo" in run.stdout and "block-sparse:64:density=0.3" in run.stdout
    details = json.loads((tmp_path / "details.json").read_text())
    pairs = {(d["pattern"], d["prompt_tokens"]): d["pairs"] for d in details}
    assert pairs[("full", 512)] == 512 * 513 // 2
    assert pairs[("a-shape:4:64", 256)] == int(g.dense_mask(mask("a-shape:4:64", 256), 256).sum())


def test_bad_input_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"prompt tokens\[1\] = 256"):
        g.validate(g.Options(patterns=[g.HeadPattern()], prompt_tokens=[512, 256]))
    with pytest.raises(ValueError, match="extrapolate"):
        g.validate(g.Options(patterns=[g.HeadPattern()], prompt_tokens=[512], extrapolate=True))
    bad = {"q_heads": 1, "kv_heads": 1, "layers": [{"heads": [{"kind": "a-shape", "sink": 4, "window": 0}]}]}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match=r"heads\[0\]\.window = 0"):
        g.read_report(str(tmp_path / "bad.json"))
