#!/bin/sh
# Checks a binary linked with minigrad (tests/CMakeLists.txt runs it on test_cpu as
# Cpu.CopiesUseTheirInstructionSets):
#   - the AVX2 copies of the kernels (mg::detail::run_avx2<...>) use 256-bit registers, and the
#     AVX-512 copies (run_avx512<...>) 512-bit ones: the compiler really vectorised them wider;
#   - no other function executes an AVX instruction (a VEX/EVEX-encoded one, whose mnemonic starts
#     with "v"): the rest of the library is baseline code, safe on any x86-64 CPU.
# Usage: tests/check_cpu_copies.sh BINARY (objdump, from binutils)
set -eu
objdump -d --no-show-raw-insn -C "$1" | awk '
  /^[0-9a-f]+ <.*>:$/ { fn = $0; copy = 0
                        if (fn ~ /run_avx2(<|I)/) copy = 2
                        if (fn ~ /run_avx512(<|I)/) copy = 3
                        next }
  /^ +[0-9a-f]+:\t/ { split($0, parts, "\t"); split(parts[2], words, " "); op = words[1]
                      if (copy == 2 && $0 ~ /%ymm/) ymm++
                      if (copy == 3 && $0 ~ /%zmm/) zmm++
                      if (copy == 0 && op ~ /^v/) { bad++; if (bad <= 5) print "AVX outside the copies: " op " in " fn } }
  END { printf "AVX2 copies: %d instructions on ymm registers; AVX-512 copies: %d on zmm; AVX outside them: %d\n", ymm, zmm, bad
        exit (ymm > 0 && zmm > 0 && bad == 0) ? 0 : 1 }'
