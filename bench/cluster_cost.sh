#!/usr/bin/env bash
# docs/07's cost model of the ring all-reduce, measured on network hosts (scripts/netns-cluster):
#
#   predicted = 2 (N - 1) / N x S / B  +  2 (N - 1) x latency
#
# for the large benchmark GPT's gradient (S = 43.2 MB of float32) on N = 2, 3, 4 hosts whose links
# are shaped to B = 100 Mbit/s and 1 Gbit/s (tc tbf). Open MPI's non-blocking all-reduce (what
# DistributedDataParallel starts per bucket) is timed with Open MPI's own choice of algorithm
# (OMPI_MCA_coll_libnbc_iallreduce_algorithm=0) and with the ring (=1, what distributed::init
# chooses unless told otherwise). Then the latency term: links given
# a one-way delay d (netns-cluster --delay), a one-number all-reduce against its prediction, and
# the large one again. Then a whole training step of the large GPT (bench_gpt, one thread per
# process) on the same hosts: its time, and how much of the all-reduce the backward hid. Needs
# root (the hosts are network namespaces). Prints markdown tables.
#
#   bench/cluster_cost.sh [BUILD_DIR] [allreduce|latency|step|all]   (default: build, all; about 7 minutes on 2 cores)
set -euo pipefail
build=${1:-build}
parts=${2:-all}
here=$(cd "$(dirname "$0")/.." && pwd)
cluster=$here/scripts/netns-cluster
allreduce=$build/bench/bench_allreduce
gpt=$build/bench/bench_gpt
[ -x "$allreduce" ] && [ -x "$gpt" ] || { echo "cluster_cost: build $allreduce and $gpt first (make build)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
S=43183364  # bytes: 10,795,841 float32 gradients
# the large GPT of bench/run.py
large="--vocab 65 --ctx 256 --d 384 --heads 6 --layers 6 --batch 12 --threads 1 --warmup 1"

field() { sed -n "s|.*$1=\([^ ]*\).*|\1|p"; }
echo "machine: $(nproc) cores, $(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
declare -A ring_ms
if [ "$parts" = all ] || [ "$parts" = allreduce ]; then
echo
echo "| hosts | link | one-number all-reduce | predicted (ring) | Open MPI's choice | ring forced | ring / predicted |"
echo "|---|---|---|---|---|---|---|"
for rate in 100mbit 1gbit; do
  bps=$([ $rate = 100mbit ] && echo 100000000 || echo 1000000000)
  reps=$([ $rate = 100mbit ] && echo 2 || echo 5)
  for n in 2 3 4; do
    own=$("$cluster" --rate $rate $n -- sh -c \
      "\$MG_CLUSTER_MPIRUN -x OMPI_MCA_coll_libnbc_iallreduce_algorithm=0 -np $n $allreduce --reps $reps")
    ring=$("$cluster" --rate $rate $n -- sh -c \
      "\$MG_CLUSTER_MPIRUN -x OMPI_MCA_coll_libnbc_iallreduce_algorithm=1 -np $n $allreduce --reps $reps")
    lat_us=$(field small_allreduce_us <<< "$own")
    own_ms=$(field allreduce_ms <<< "$own")
    ring_ms[$n$rate]=$(field allreduce_ms <<< "$ring")
    awk -v n=$n -v s=$S -v b=$bps -v lat=$lat_us -v own=$own_ms -v ring=${ring_ms[$n$rate]} -v rate=$rate 'BEGIN {
      pred = 2 * (n - 1) / n * s * 8 / b * 1e3 + lat / 1e3   # the one-number all-reduce: the latency term as it is here
      printf "| %d | %s | %.3f ms | %.0f ms | %.0f ms | %.0f ms | %.2f |\n", n, rate, lat / 1e3, pred, own, ring, ring / pred }'
  done
done
fi
[ "$parts" = allreduce ] && exit 0
if [ "$parts" = all ] || [ "$parts" = latency ]; then
echo
echo "| hosts | one-way delay d | one-number all-reduce: Open MPI's choice (tree) | predicted, 2 ceil(log2 N) d + base | ring forced | predicted, 2 (N-1) d + base | 43.2 MB ring at 1 Gbit/s | predicted |"
echo "|---|---|---|---|---|---|---|---|"
for n in 2 3 4; do
  base=$("$cluster" --rate 1gbit $n -- sh -c \
    "\$MG_CLUSTER_MPIRUN -x OMPI_MCA_coll_libnbc_iallreduce_algorithm=0 -np $n $allreduce --elements 1000 --reps 3" |
    field small_allreduce_us)
  for d in 1 5; do
    own=$("$cluster" --rate 1gbit --delay $d $n -- sh -c \
      "\$MG_CLUSTER_MPIRUN -x OMPI_MCA_coll_libnbc_iallreduce_algorithm=0 -np $n $allreduce --reps 2")
    ring=$("$cluster" --rate 1gbit --delay $d $n -- sh -c \
      "\$MG_CLUSTER_MPIRUN -x OMPI_MCA_coll_libnbc_iallreduce_algorithm=1 -np $n $allreduce --reps 2")
    awk -v n=$n -v d=$d -v base=$base -v s=$S -v tree=$(field small_allreduce_us <<< "$own") \
        -v ring=$(field small_allreduce_us <<< "$ring") -v big=$(field allreduce_ms <<< "$ring") 'BEGIN {
      rounds = 0; for (m = 1; m < n; m *= 2) rounds++
      printf "| %d | %d ms | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %.0f ms | %.0f ms |\n", n, d, tree / 1e3,
        2 * rounds * d + base / 1e3, ring / 1e3, 2 * (n - 1) * d + base / 1e3, big, 2 * (n - 1) / n * s * 8 / 1e9 * 1e3 + 2 * (n - 1) * d }'
  done
done
fi
[ "$parts" = latency ] && exit 0
echo
echo "| hosts | link | step (ms) | all-reduce alone, ring (ms) | blocked in wait (ms a step) | hidden behind the backward |"
echo "|---|---|---|---|---|---|"
for rate in 100mbit 1gbit; do
  steps=$([ $rate = 100mbit ] && echo 2 || echo 4)
  for n in 2 3 4; do
    out=$("$cluster" --rate $rate $n -- sh -c \
      "\$MG_CLUSTER_MPIRUN -x OMPI_MCA_coll_libnbc_iallreduce_algorithm=1 -np $n $gpt $large --steps $steps")
    ms=$(field ms/step <<< "$out")
    wait=$(field comm_wait_fraction <<< "$out")
    ar=${ring_ms[$n$rate]:-}
    if [ -z "$ar" ]; then  # the step table alone: time the all-reduce here
      ar=$("$cluster" --rate $rate $n -- sh -c \
        "\$MG_CLUSTER_MPIRUN -x OMPI_MCA_coll_libnbc_iallreduce_algorithm=1 -np $n $allreduce --reps 2" | field allreduce_ms)
    fi
    awk -v n=$n -v rate=$rate -v ms=$ms -v w=$wait -v ar=$ar 'BEGIN {
      blocked = w * ms; hidden = ar - blocked; if (hidden < 0) hidden = 0
      printf "| %d | %s | %.0f | %.0f | %.0f | %.0f%% |\n", n, rate, ms, ar, blocked, 100 * hidden / ar }'
  done
done
