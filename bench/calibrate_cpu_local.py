#!/usr/bin/env python3
"""Calibrates the simulator's `cpu-local` hardware model on this machine and writes its JSON.

    python3 bench/calibrate_cpu_local.py FULCRUM_BINARY OUT.json [--ranks 4] [--q-heads 4 --kv-heads 2 --head-dim 64]

What it measures, with Fulcrum's own commands:
  - attention throughput per shard shape (down to 8 x 8, the shards of launch-bound batches), and the calls'
    fixed costs per call and per item (out of the table's rates), with ONE kernel thread
    (`OMP_NUM_THREADS=1 fulcrum profile`), since
    `fulcrum run` gives each of its ranks one thread when ranks >= cores; one such profile runs on every
    core at once and the tables are averaged, because that is how the ranks run (sharing caches, memory
    bandwidth and clock);
  - one-way latency and bandwidth between two MPI ranks through Fulcrum's communicator, and memcpy
    bandwidth (`fulcrum bench comm`).
The model then describes `fulcrum run --ranks RANKS` on this machine: RANKS devices on one node that share
os.cpu_count() compute slots (ranks oversubscribing the cores run at their share).
"""
import argparse
import json
import os
import subprocess
import tempfile

parser = argparse.ArgumentParser()
parser.add_argument("fulcrum")
parser.add_argument("out")
parser.add_argument("--ranks", type=int, default=4)
parser.add_argument("--q-heads", default="4")
parser.add_argument("--kv-heads", default="2")
parser.add_argument("--head-dim", default="64")
args = parser.parse_args()

with tempfile.TemporaryDirectory() as tmp:
    profile_path = os.path.join(tmp, "profile.json")
    comm_path = os.path.join(tmp, "comm.json")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    runs = [subprocess.Popen([args.fulcrum, "profile", "--q-heads", args.q_heads, "--kv-heads", args.kv_heads,
                              "--head-dim", args.head_dim, "--query-lengths", "8,16,32,64,128,256,512,1024,2048,4096",
                              "--key-lengths", "8,16,32,64,256,1024,4096,16384", "--repeats", "3",
                              "--json", f"{profile_path}.{i}"], env=env, stdout=subprocess.DEVNULL)
            for i in range(os.cpu_count())]
    for run in runs:
        if run.wait() != 0:
            raise SystemExit("fulcrum profile failed")
    profiles = [json.load(open(f"{profile_path}.{i}")) for i in range(len(runs))]
    subprocess.run([args.fulcrum, "bench", "comm", "--json", comm_path], check=True)
    comm = json.load(open(comm_path))

profile = profiles[0]
table = {k: v for k, v in profile.items() if k in ("forward", "backward")}
for k in table:
    cells = zip(*(p[k]["flops_per_s"] for p in profiles), strict=True)
    table[k]["flops_per_s"] = [sum(c) / len(profiles) for c in cells]
overheads = {k: sum(p["overheads"][k] for p in profiles) / len(profiles) for k in profile["overheads"]}
# The peak (what the matrix layers run at, times linear_mfu) from shards of at least 64 x 64, where tiles are
# full: a tiny shard's rate is its fixed costs' remainder, not the machine's speed.
peak = max(rate for k in ("forward", "backward")
           for (q, key), rate in zip(((q, key) for q in table[k]["query_lengths"] for key in table[k]["key_lengths"]),
                                     table[k]["flops_per_s"], strict=True) if q >= 64 and key >= 64)
link = {"bandwidth_bytes_per_s": comm["bandwidth_bytes_per_s"], "latency_s": comm["latency_s"]}
memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
model = {
    "name": "cpu-local",
    "devices_per_node": args.ranks,
    "compute_slots_per_node": os.cpu_count(),
    "peak_flops": peak,
    "memory_bytes": memory / args.ranks,
    "memory_bandwidth": comm["memcpy_bytes_per_s"],
    "intra_node": link,
    "inter_node": link,
    "linear_mfu": 0.5,
    "overheads": overheads,
    "attention": table,
}
with open(args.out, "w") as f:
    json.dump(model, f, indent=1)
    f.write("\n")
print(f"wrote {args.out}: peak {peak / 1e9:.1f} GFLOP/s per rank-thread, "
      f"link {link['bandwidth_bytes_per_s'] / 1e9:.2f} GB/s "
      f"+ {link['latency_s'] * 1e6:.0f} us, memcpy {comm['memcpy_bytes_per_s'] / 1e9:.1f} GB/s, "
      f"{os.cpu_count()} compute slots for {args.ranks} ranks")
