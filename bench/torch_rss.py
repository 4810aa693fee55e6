#!/usr/bin/python3
"""Run a Python script unchanged, then print this process's peak RSS (VmHWM, as bench_gpt does).
Usage: torch_rss.py SCRIPT [ARGS...]"""
import runpy
import sys

script = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
with open("/proc/self/status") as f:
    hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
print(f"peak_rss_mb={hwm / 1024:.1f}")
