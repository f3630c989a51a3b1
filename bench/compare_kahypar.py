#!/usr/bin/env python3
"""DCP's partitioner against KaHyPar on the same placement hypergraphs, at the same k and epsilon.

For every (dataset, mask), `dcp_partition` (bench/dcp_partition.cpp) builds one batch's placement
hypergraph, partitions it with Fulcrum's multilevel partitioner and writes it in hMetis format; KaHyPar
(`pip install kahypar`, used here only) partitions that file with its km1 configuration. Prints a
markdown table of both λ-1 objectives and run times (one core each).

  python3 bench/compare_kahypar.py --bin build/dev/bin/dcp_partition \
      --config PATH/TO/km1_kKaHyPar_sea20.ini   # config/ of the KaHyPar repository
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

import kahypar

MASKS = {"causal": "causal", "lambda": "lambda:64:4096", "causal-blockwise": "blockwise:256:2",
         "shared-question": "shared-question:4:20"}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True, help="path to dcp_partition")
    parser.add_argument("--config", required=True, help="KaHyPar .ini (km1_kKaHyPar_sea20.ini)")
    parser.add_argument("--datasets", default="pretrain,prolong")
    parser.add_argument("--masks", default=",".join(MASKS))
    parser.add_argument("--parts", type=int, default=32)
    parser.add_argument("--epsilon", type=float, default=0.1)
    parser.add_argument("--block", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tries", type=int, default=8, help="Fulcrum's initial partitions (the planner uses 8)")
    parser.add_argument("--vcycles", type=int, default=None, help="Fulcrum's V-cycles (default: the planner's)")
    args = parser.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for dataset in args.datasets.split(","):
            for mask in args.masks.split(","):
                name = f"{dataset}-{mask}"
                out = subprocess.run([args.bin, "--dataset", dataset, "--mask", MASKS[mask], "--block", str(args.block),
                                      "--parts", str(args.parts), "--epsilon", str(args.epsilon), "--seed",
                                      str(args.seed), "--tries", str(args.tries), "--out", tmp, "--name", name]
                                     + ([] if args.vcycles is None else ["--vcycles", str(args.vcycles)]),
                                     check=True, capture_output=True, text=True).stdout
                ours = json.loads(out.strip().splitlines()[-1])
                graph = kahypar.createHypergraphFromFile(os.path.join(tmp, name + ".hgr"), args.parts)
                context = kahypar.Context()
                context.loadINIconfiguration(args.config)
                context.setK(args.parts)
                context.setEpsilon(args.epsilon)
                context.setSeed(args.seed)
                context.suppressOutput(True)
                start = time.perf_counter()
                kahypar.partition(graph, context)
                seconds = time.perf_counter() - start
                theirs = kahypar.connectivityMinusOne(graph)
                rows.append((dataset, mask, ours, theirs, seconds, kahypar.imbalance(graph, context)))

    print(f"k = {args.parts}, epsilon = {args.epsilon}, block = {args.block} tokens, seed {args.seed}, "
          f"Fulcrum initial tries {args.tries}, V-cycles {'default' if args.vcycles is None else args.vcycles}\n")
    print("| dataset | mask | vertices | pins | Fulcrum λ-1 (MiB) | Fulcrum s | imbalance | KaHyPar λ-1 (MiB) "
          "| KaHyPar s | imbalance | Fulcrum / KaHyPar |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    ratios = []
    for dataset, mask, ours, theirs, seconds, imbalance in rows:
        # Both zero (every document whole on one part) counts as equal.
        ratio = ours["fulcrum_km1"] / theirs if theirs > 0 else (1.0 if ours["fulcrum_km1"] == 0 else float("inf"))
        ratios.append(ratio)
        print(f"| {dataset} | {mask} | {ours['vertices']} | {ours['pins']} | {ours['fulcrum_km1'] / 1024:.1f} | "
              f"{ours['fulcrum_s']:.3f} | {ours['fulcrum_imbalance']:.3f} | {theirs / 1024:.1f} | {seconds:.2f} | "
              f"{imbalance:.3f} | {ratio:.3f} |")
    print(f"\nmean Fulcrum / KaHyPar: {sum(ratios) / len(ratios):.3f}")


if __name__ == "__main__":
    main()
