#!/usr/bin/env bash
# run.sh [SECONDS] -- builds tests/fuzz/token_fuzz.cpp with libFuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer (Debian's clang) and runs it
# for SECONDS (default: 60 with FENCING_PROFILE=long, else 5).
#
# Needs clang++ and libclang-rt-*-dev; when they are missing it says so and
# exits 0 (as a skip) unless FENCING_FUZZ_REQUIRED=1. Work files (binary,
# corpus, crash inputs) go to FENCING_TMP or a temporary directory; a crash
# input is kept and its path printed. The last line is
#   "token_fuzz: <runs> runs in <s> s, <n> corpus inputs, <coverage> edges: ok|FAILED"
# Exit status: 0 ok (or skipped), 1 when the fuzzer found a failing input,
# 2 when the build failed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
profile="${FENCING_PROFILE:-quick}"
seconds="${1:-}"
if [ -z "$seconds" ]; then
  if [ "$profile" = long ]; then seconds=60; else seconds=5; fi
fi

skip() {
  echo "token_fuzz: skipped: $*"
  if [ "${FENCING_FUZZ_REQUIRED:-0}" = 1 ]; then exit 2; fi
  exit 0
}

cxx=""
for c in clang++ clang++-19 clang++-18 clang++-17 clang++-16 clang++-15 clang++-14; do
  if command -v "$c" >/dev/null 2>&1; then cxx="$c"; break; fi
done
[ -n "$cxx" ] || skip "no clang++ (apt-get install clang libclang-rt-14-dev)"

work="${FENCING_TMP:-}"
if [ -z "$work" ]; then work="$(mktemp -d /tmp/fencing-fuzz.XXXXXX)"; fi
mkdir -p "$work/corpus" "$work/artifacts"
bin="$work/token_fuzz"

# Seed corpus: one input per target (the first byte chooses it).
printf '\0 +42 ' > "$work/corpus/seed-token"
printf '\0009223372036854775808' > "$work/corpus/seed-token-range"
printf '\001settlement:7' > "$work/corpus/seed-resource"
printf '\002\x3c\x05\x11\x07\x01\x2d\x12\x12\x03' > "$work/corpus/seed-decide"
printf '\003\x10\x01\x01\x02\x30\x01\x01\x02\x02\x01\x01\x06\x00\x00' > "$work/corpus/seed-ledger"

if ! "$cxx" -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$root/src" -o "$bin" "$here/token_fuzz.cpp" "$root"/src/core/*.cpp > "$work/build.log" 2>&1; then
  if grep -q "libclang_rt.fuzzer\|cannot find.*fuzzer\|libclang_rt" "$work/build.log"; then
    cat "$work/build.log" >&2
    skip "the libFuzzer runtime is missing (apt-get install libclang-rt-14-dev)"
  fi
  cat "$work/build.log" >&2
  echo "token_fuzz: build FAILED"
  exit 2
fi

log="$work/fuzz.log"
rc=0
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
  "$bin" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=1024 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$work/corpus" > "$log" 2>&1 || rc=$?

runs="$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || echo '?')"
edges="$(grep -Eo 'cov: [0-9]+' "$log" | tail -n 1 | grep -Eo '[0-9]+' || echo '?')"
corpus="$(find "$work/corpus" -type f | wc -l)"
if [ "$rc" -ne 0 ]; then
  grep -E 'invariant violated|ERROR: AddressSanitizer|runtime error|SUMMARY|Test unit written|disagrees' "$log" | head -n 20 >&2 || true
  tail -n 40 "$log" >&2
  echo "token_fuzz: crash inputs kept in $work/artifacts"
  echo "token_fuzz: $runs runs in $seconds s, $corpus corpus inputs, $edges edges: FAILED"
  exit 1
fi
echo "token_fuzz: $runs runs in $seconds s, $corpus corpus inputs, $edges edges: ok"
if [ -z "${FENCING_TMP:-}" ]; then rm -rf "$work"; fi
