#!/usr/bin/env bash
# Fuzz the native batch decoder (cffi_build/src/wire/records.c) with libFuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer, for a bounded time.
#
#   scripts/fuzz-native.sh [SECONDS]      default 60
#
# Environment: CC (default clang), FUZZ_JOBS (parallel workers, default 1),
# FUZZ_COVERAGE=0 to skip the line-coverage report.
# Outputs (git-ignored): cffi_build/fuzz/out/ (binaries, seeds, log, crash
# artifacts, coverage report) and cffi_build/fuzz/corpus-run/ (the corpus the
# fuzzer grows; kept between runs so each run starts where the last stopped).
# Exits non-zero when clang is missing or the fuzzer finds a crash.
set -euo pipefail

duration=${1:-60}
case $duration in
    '' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/cffi_build/src
fuzz=$root/cffi_build/fuzz
out=$fuzz/out
corpus=$fuzz/corpus-run
cc=${CC:-clang}

if ! command -v "$cc" >/dev/null 2>&1; then
    cat >&2 <<MSG
fuzz-native.sh: '$cc' not found. libFuzzer needs clang with its runtime:
    apt-get install -y clang libclang-rt-14-dev     (Debian 12; or set CC=clang-NN)
MSG
    exit 3
fi

mkdir -p "$out/seeds" "$corpus"
cflags=(-std=c11 -g -O1 -Wall -Wextra -I "$src")

# Seeds come from the real writer, so they are valid batches by construction.
"$cc" "${cflags[@]}" "$fuzz/gen_seeds.c" "$src/wire/records.c" -o "$out/gen_seeds"
"$out/gen_seeds" "$out/seeds"

if ! "$cc" "${cflags[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    "$fuzz/fuzz_records.c" "$src/wire/records.c" -o "$out/fuzz_records"; then
    echo "fuzz-native.sh: building with -fsanitize=fuzzer failed; is the clang runtime" \
        "(libclang-rt-NN-dev) installed?" >&2
    exit 3
fi

echo "fuzz-native.sh: fuzzing for ${duration}s; log in $out/fuzz.log"
jobs=()
if [ "${FUZZ_JOBS:-1}" -gt 1 ]; then
    # Job mode writes fuzz-N.log into the working directory, hence the cd below.
    jobs=(-jobs="$FUZZ_JOBS" -workers="$FUZZ_JOBS")
fi
status=0
(cd "$out" && ./fuzz_records -max_total_time="$duration" -print_final_stats=1 \
    -dict="$fuzz/records.dict" -artifact_prefix="$out/" "${jobs[@]}" \
    "$corpus" "$out/seeds") >"$out/fuzz.log" 2>&1 || status=$?
grep -E '^#[0-9]+ +DONE|^stat::|^Done|ERROR|SUMMARY' "$out/fuzz.log" || tail -n 20 "$out/fuzz.log"
if [ "$status" -ne 0 ]; then
    echo "fuzz-native.sh: the fuzzer failed (exit $status); crash inputs: $out/crash-*" >&2
    exit "$status"
fi

# Line coverage of records.c reached by the corpus (optional; needs llvm-cov).
if [ "${FUZZ_COVERAGE:-1}" != 0 ] && command -v llvm-profdata >/dev/null \
    && command -v llvm-cov >/dev/null; then
    "$cc" "${cflags[@]}" -fsanitize=fuzzer -fprofile-instr-generate -fcoverage-mapping \
        "$fuzz/fuzz_records.c" "$src/wire/records.c" -o "$out/fuzz_records_cov"
    LLVM_PROFILE_FILE="$out/cov.profraw" "$out/fuzz_records_cov" -runs=0 \
        "$corpus" "$out/seeds" >/dev/null 2>&1
    llvm-profdata merge -sparse "$out/cov.profraw" -o "$out/cov.profdata"
    llvm-cov report "$out/fuzz_records_cov" -instr-profile="$out/cov.profdata" \
        "$src/wire/records.c" | tee "$out/coverage.txt"
fi
echo "fuzz-native.sh: corpus has $(find "$corpus" -type f | wc -l) inputs; no crash found."
