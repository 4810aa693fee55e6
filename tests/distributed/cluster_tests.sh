#!/usr/bin/env bash
# Data parallelism across network hosts: each case starts a cluster of hosts on this machine
# (scripts/netns-cluster: network namespaces on a bridge; the ranks talk over TCP only) and checks
# what a run on several machines must do. ctest runs one case per test (tests/CMakeLists.txt):
#
#   cluster_tests.sh CASE TEST_DDP CLUSTER_TRAIN NETNS_CLUSTER
#
#   hosts2, hosts3  the DDP tests (N hosts equal one process, 1e-12 in float64) on 2 and 3 hosts,
#                   and every host's link carried the traffic
#   lossy           1% of every host's packets dropped: the same numbers as one process, and
#                   packets were dropped
#   link-down       host 2's link taken down mid-run: every rank ends with a DistributedError within
#                   MG_DIST_TIMEOUT, no rank process is left, the last checkpoint loads; then the
#                   run resumes from it on 2 hosts (elastic): no sample skipped or read twice, and
#                   the result equals one process's uninterrupted run
#   zero            ZeRO-1 (optimizer state sharded) on 3 hosts for 10 steps, resumed from its
#                   consolidated checkpoint on 2 hosts: one process's model, every sample once
#   bad-launches    a hostfile naming a host that does not exist, and more ranks than slots: each
#                   a clear error from mpirun, within seconds; a rank that joins later than
#                   MG_DIST_TIMEOUT: a DistributedError on the ranks that waited, and the run ends;
#                   the cluster script without root, or without ip: it refuses, saying what is missing;
#                   a COMMAND that fails and a cluster stopped mid-run leave no namespace behind
#
# Exit 77 (ctest's skip) when this machine cannot make network namespaces (not root).
set -uo pipefail

case_name=$1 test_ddp=$2 train=$3 cluster=$4
fail() {
  echo "FAIL ($case_name): $*" >&2
  exit 1
}
if [ "$(id -u)" -ne 0 ] || ! unshare -n true 2>/dev/null; then
  echo "SKIP: the multi-host tests need root, allowed to make network namespaces (scripts/netns-cluster)"
  exit 77
fi
"$cluster" clean  # what an earlier run killed by a timeout left
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d "/tmp/mg-cluster-$case_name.XXXXXX")
trap 'rm -rf "$work"' EXIT


case "$case_name" in
  hosts2 | hosts3)
    n=${case_name#hosts}
    N=$n DDP=$test_ddp "$cluster" "$n" -- bash -c '
      set -e
      $MG_CLUSTER_MPIRUN -np $N -x MG_DIST_TIMEOUT=60 "$DDP"
      for ((i = 0; i < N; i++)); do  # the bytes host i sent and received on its link
        b=$(ip netns exec $MG_CLUSTER_NAME-h$i cat /sys/class/net/mgeth0/statistics/{rx,tx}_bytes | awk "{ s += \$1 } END { print s }")
        echo "host $i: $b bytes over its link"
        [ "$b" -gt 100000 ] || { echo "host $i carried only $b bytes: the ranks did not talk over the network" >&2; exit 1; }
      done' || fail "the DDP tests on $n hosts"
    ;;

  lossy)
    "$train" --out "$work/one" --steps 20 --hidden 256 >/dev/null || fail "the one-process run"
    mkdir -p "$work/two" "$work/clean"
    start=$(date +%s%N)
    OUT=$work/clean TRAIN=$train "$cluster" 2 -- bash -c '
      $MG_CLUSTER_MPIRUN -np 2 -x MG_DIST_TIMEOUT=120 "$TRAIN" --out "$OUT" --steps 20 --hidden 256' ||
      fail "the run on 2 hosts without loss"
    clean_ms=$((($(date +%s%N) - start) / 1000000))
    start=$(date +%s%N)
    OUT=$work/two TRAIN=$train "$cluster" --loss 1 2 -- bash -c '
      set -e
      $MG_CLUSTER_MPIRUN -np 2 -x MG_DIST_TIMEOUT=120 "$TRAIN" --out "$OUT" --steps 20 --hidden 256
      for i in 0 1; do  # the drop counters of the loss rule
        ip netns exec $MG_CLUSTER_NAME-h$i nft list ruleset | grep -o "packets [0-9]*" | head -1
      done > "$OUT/dropped"' || fail "the run on 2 lossy hosts"
    echo "2 hosts: ${clean_ms} ms without loss, $((($(date +%s%N) - start) / 1000000)) ms with 1% loss;" \
      "dropped (per host): $(tr '\n' ' ' < "$work/two/dropped")"
    dropped=$(awk '{ s += $2 } END { print s + 0 }' "$work/two/dropped")
    [ "$dropped" -gt 0 ] || fail "no packet was dropped: the loss rule did not act"
    "$train" --compare "$work/one/final.safetensors" "$work/two/final.safetensors" ||
      fail "the lossy run's model differs from one process's"
    ;;

  link-down)
    timeout_s=5
    "$train" --out "$work/one" --steps 40 >/dev/null || fail "the one-process run"
    mkdir -p "$work/run"
    OUT=$work/run TRAIN=$train T=$timeout_s "$cluster" 3 -- bash -c '
      $MG_CLUSTER_MPIRUN -np 3 -x MG_DIST_TIMEOUT=$T "$TRAIN" --out "$OUT" --steps 400 --step-ms 100 \
        > "$OUT/mpirun.log" 2>&1 &
      mpirun_pid=$!
      for ((k = 0; k < 300; k++)); do  # until rank 0 has checkpointed 5 steps
        [ "$({ wc -l < "$OUT/samples.3.0"; } 2>/dev/null || echo 0)" -ge 5 ] && break
        sleep 0.1
      done
      date +%s.%N > "$OUT/link_down_at"
      $MG_CLUSTER_CONTROL link 2 down
      # The ranks end with the error after T s; mpirun then waits until TCP gives up on the lost host
      # (the cluster makes that about 13 s), and the daemon on the lost host gives up the same way.
      processes() { for i in 0 1 2; do for p in $(ip netns pids $MG_CLUSTER_NAME-h$i); do cat /proc/$p/comm; done; done; }
      for ((k = 0; k < 10 * (T + 40); k++)); do
        kill -0 $mpirun_pid 2>/dev/null || break
        sleep 0.1
      done
      if kill -0 $mpirun_pid 2>/dev/null; then echo "mpirun still running $((T + 40)) s after the link went down" >&2; exit 1; fi
      wait $mpirun_pid
      echo "mpirun: exit code $?, $(awk -v t=$(cat "$OUT/link_down_at") -v n=$(date +%s.%N) "BEGIN { printf \"%.1f\", n - t }") s after the link went down"
      left=$(processes | grep -c cluster_train)
      [ "$left" -eq 0 ] || { echo "$left rank processes left after mpirun ended" >&2; exit 1; }
      for ((k = 0; k < 300; k++)); do [ -z "$(processes)" ] && break; sleep 0.1; done
      [ -z "$(processes)" ] || { echo "left on the hosts 30 s after mpirun ended: $(processes | tr "\n" " ")" >&2; exit 1; }
      echo "nothing of the run left on any host $(awk -v t=$(cat "$OUT/link_down_at") -v n=$(date +%s.%N) "BEGIN { printf \"%.1f\", n - t }") s after the link went down"' ||
      { cat "$work/run/mpirun.log" >&2; fail "the run with a link taken down did not end cleanly"; }
    down_at=$(cat "$work/run/link_down_at")
    for r in 0 1 2; do
      [ -f "$work/run/error.$r" ] || { cat "$work/run/mpirun.log" >&2; fail "rank $r reported no error"; }
      grep -q "did not finish within $timeout_s s" "$work/run/error.$r" || fail "rank $r: $(cat "$work/run/error.$r")"
      after=$(awk -v t="$down_at" '{ printf "%.1f", $1 - t }' "$work/run/error.$r")
      echo "rank $r: DistributedError ${after} s after the link went down"
      awk -v a="$after" -v t=$timeout_s 'BEGIN { exit !(a <= t + 2) }' || fail "rank $r's error came ${after} s after the link went down"
    done
    ckpt_step=$("$train" --check "$work/run/checkpoint.safetensors" | awk '{ print $4 }') || fail "the last checkpoint does not load"
    echo "last checkpoint: step $ckpt_step"
    # Elastic restart on 2 hosts (a new cluster of 2: the lost host is not in it), from rank 0's checkpoint.
    OUT=$work/run TRAIN=$train "$cluster" 2 -- bash -c '
      $MG_CLUSTER_MPIRUN -np 2 -x MG_DIST_TIMEOUT=60 "$TRAIN" --out "$OUT" --steps 40 --resume' ||
      fail "the resumed run on 2 hosts"
    "$train" --compare "$work/one/final.safetensors" "$work/run/final.safetensors" ||
      fail "3 hosts then 2 did not give one process's model"
    # Every sample of the 2 epochs trained on exactly once per epoch: the steps before the
    # checkpoint from the 3-host run's logs, the rest from the 2-host run's.
    "$train" --count "$work/run" 40 "$ckpt_step" 3 2 || fail "samples skipped or read twice"
    ;;

  zero)
    "$train" --out "$work/one" --steps 20 >/dev/null || fail "the one-process run"
    OUT=$work/run TRAIN=$train "$cluster" 3 -- bash -c '
      $MG_CLUSTER_MPIRUN -np 3 -x MG_DIST_TIMEOUT=60 "$TRAIN" --out "$OUT" --steps 10 --zero' ||
      fail "ZeRO on 3 hosts"
    OUT=$work/run TRAIN=$train "$cluster" 2 -- bash -c '
      $MG_CLUSTER_MPIRUN -np 2 -x MG_DIST_TIMEOUT=60 "$TRAIN" --out "$OUT" --steps 20 --zero --resume' ||
      fail "ZeRO resumed on 2 hosts"
    "$train" --compare "$work/one/final.safetensors" "$work/run/final.safetensors" ||
      fail "ZeRO on 3 hosts then 2 did not give one process's model"
    "$train" --count "$work/run" 20 10 3 2 || fail "samples skipped or read twice"
    ;;

  bad-launches)
    TRAIN=$train "$cluster" 2 -- bash -c '
      start=$SECONDS
      printf "10.88.0.1 slots=1\n10.99.0.7 slots=1\n" > /tmp/mg-bad-hostfile.$$
      out=$(timeout 60 ${MG_CLUSTER_MPIRUN/--hostfile $MG_CLUSTER_HOSTFILE/--hostfile /tmp/mg-bad-hostfile.$$} -np 2 \
        "$TRAIN" --out /tmp 2>&1); rc=$?
      rm -f /tmp/mg-bad-hostfile.$$
      echo "unknown host: exit $rc after $((SECONDS - start)) s"
      [ $rc -ne 0 ] && [ $rc -ne 124 ] || { echo "$out"; echo "an unknown host did not end the launch with an error" >&2; exit 1; }
      grep -q "unknown host 10.99.0.7" <<< "$out" || { echo "$out"; echo "the error does not name the host" >&2; exit 1; }
      start=$SECONDS
      out=$(timeout 60 $MG_CLUSTER_MPIRUN -np 3 "$TRAIN" --out /tmp 2>&1); rc=$?
      echo "3 ranks on 2 slots: exit $rc after $((SECONDS - start)) s"
      [ $rc -ne 0 ] && [ $rc -ne 124 ] || { echo "$out"; echo "more ranks than slots was not refused" >&2; exit 1; }
      grep -qi "not enough slots" <<< "$out" || { echo "$out"; echo "the error does not say there are not enough slots" >&2; exit 1; }' ||
      fail "bad launches"
    # Rank 1 arrives 8 s late, past a 3 s timeout: rank 0 ends with the error, mpirun ends the run.
    start=$SECONDS
    OUT=$work/late TRAIN=$train "$cluster" 2 -- bash -c '
      timeout 60 $MG_CLUSTER_MPIRUN -np 2 -x MG_DIST_TIMEOUT=3 "$TRAIN" --out "$OUT" --steps 5 --late-rank 1 --late-ms 8000 \
        > /dev/null 2>&1
      rc=$?; [ $rc -ne 0 ] && [ $rc -ne 124 ]' || fail "a late rank did not end the run with an error (or it hung)"
    echo "a rank 8 s late: the run ended after $((SECONDS - start)) s; rank 0: $(cut -d" " -f2- "$work/late/error.0")"
    grep -q "did not finish within 3 s on rank 0" "$work/late/error.0" || fail "rank 0 did not report the late rank"
    # The cluster script itself: as a user other than root, and without ip on the PATH.
    cp "$cluster" "$work/netns-cluster" && chmod 755 "$work" "$work/netns-cluster"  # readable by nobody
    out=$(setpriv --reuid=65534 --regid=65534 --clear-groups bash "$work/netns-cluster" 2 -- true 2>&1) &&
      fail "it ran without root"
    grep -q "needs root" <<< "$out" || fail "without root it said: $out"
    echo "without root: $out"
    mkdir -p "$work/bin" && ln -sf "$(command -v readlink)" "$(command -v id)" "$work/bin/"
    out=$(PATH=$work/bin /bin/bash "$cluster" 2 -- true 2>&1) && fail "it ran without ip"
    grep -q "needs 'ip'" <<< "$out" || fail "without ip it said: $out"
    echo "without ip: $out"
    # Nothing is left behind when COMMAND fails, or when the script is stopped mid-run.
    "$cluster" --name "mgf$$" 2 -- sh -c 'exit 7'
    [ $? -eq 7 ] || fail "COMMAND's exit status was not passed on"
    "$cluster" --rate 100mbit --loss 1 --name "mgt$$" 2 -- sleep 60 &
    pid=$!
    for ((k = 0; k < 50; k++)); do ip netns list | grep -q "^mgt$$-launch" && break; sleep 0.1; done
    kill -TERM $pid
    wait $pid
    left=$(ip netns list | grep -c "^mg[ft]$$-")
    [ "$left" -eq 0 ] || fail "$left namespaces left after a failed and a stopped cluster"
    echo "a failed COMMAND and a stopped cluster: nothing left behind"
    ;;

  *)
    fail "unknown case (hosts2, hosts3, lossy, link-down, zero, bad-launches)"
    ;;
esac
echo "PASS ($case_name)"
