#!/usr/bin/env python3
"""Derives the compact document-length tables Fulcrum embeds from the two published samples.

Usage: python3 data/derive_length_tables.py ../shared/data > data/length_tables.json

For each sample it keeps what the DistCA evaluation needs to rebuild its batches without the raw file:
  - the 1,001-point quantile table (p = 0, 0.001, ..., 1; linear interpolation) of the documents
    shorter than 65,536 tokens, and how many there are (the evaluation keeps half of them);
  - every document of at least 65,536 tokens, exactly (the evaluation repeats each 4 times).
The output is small, deterministic JSON; CMake embeds it into the library (data/CMakeLists.txt).
"""
import json
import sys
from pathlib import Path

LONG_THRESHOLD = 65536
QUANTILE_POINTS = 1001


def quantile(sorted_values, p):
    # numpy's default ("linear") definition: position p*(n-1), interpolated between neighbours.
    position = p * (len(sorted_values) - 1)
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = position - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


def table(path):
    lengths = json.loads(Path(path).read_text())
    short = sorted(x for x in lengths if x < LONG_THRESHOLD)
    long = sorted(x for x in lengths if x >= LONG_THRESHOLD)
    quantiles = [round(quantile(short, i / (QUANTILE_POINTS - 1)), 3) for i in range(QUANTILE_POINTS)]
    return {
        "source": Path(path).name,
        "documents": len(lengths),
        "short_documents": len(short),
        "short_quantiles": quantiles,
        "long_documents": long,
    }


def main():
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data")
    out = {
        "long_threshold_tokens": LONG_THRESHOLD,
        "pretrain": table(folder / "dist_wlbllm.json"),
        "prolong": table(folder / "dist_prolong.json"),
    }
    json.dump(out, sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
