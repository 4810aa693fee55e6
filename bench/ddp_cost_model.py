#!/usr/bin/python3
"""The ring all-reduce cost model of docs/07-data-parallel.md, filled in for the benchmark GPTs.

    time = 2 (N - 1) / N * bytes / bandwidth  +  2 (N - 1) * latency

A ring all-reduce of S bytes over N machines is a reduce-scatter then an all-gather, each N - 1
steps in which every machine sends and receives S / N bytes. Prints the markdown table the
chapter shows (python3 bench/ddp_cost_model.py).
"""
PARAMS = {"small": 818241, "large": 10795841}  # bench_gpt's params= for the two configs
LATENCY = 20e-6  # seconds per message step: a TCP round over Ethernet, order of magnitude

print("| model (float32 gradients) | machines | 10 Gbit/s | 100 Gbit/s |")
print("|---|---|---|---|")
for name, p in PARAMS.items():
    size = 4 * p
    for n in (8, 64, 512):
        row = []
        for gbit in (10, 100):
            bw = gbit * 1e9 / 8
            t = 2 * (n - 1) / n * size / bw + 2 * (n - 1) * LATENCY
            row.append(f"{t * 1e3:.1f} ms")
        print(f"| {name} ({size / 1e6:.1f} MB) | {n} | {row[0]} | {row[1]} |")
