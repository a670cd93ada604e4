#!/bin/sh
# run.sh — builds the trace reader's libFuzzer harness (clang, ASan + UBSan) from the library sources and
# fuzzes it for FUZZ_SECONDS (default 60) on a copy of tests/fuzz/corpus.  One process; crashers are kept.
#
#   FUZZ_SECONDS=300 tests/fuzz/run.sh          # crashes land in the work directory it prints
#   FUZZ_WORKDIR=/tmp/fz tests/fuzz/run.sh      # reuse a work directory (its corpus grows)
#   tests/fuzz/run.sh -runs=0 crash-1234        # extra arguments go to the fuzzer (e.g. replay a crasher)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
secs=${FUZZ_SECONDS:-60}
CC=${CC:-clang}
work=${FUZZ_WORKDIR:-$(mktemp -d "${TMPDIR:-/tmp}/hoff-fuzz.XXXXXX")}
mkdir -p "$work/corpus"
cp "$here"/corpus/* "$work/corpus/"

# config.h: zlib when its header is there.
: > "$work/config.h"
zlib=
if printf '#include <zlib.h>\nint main(void){return 0;}\n' | $CC -x c - -lz -o "$work/ztest" >/dev/null 2>&1; then
    echo '#define HAVE_ZLIB 1' > "$work/config.h"
    zlib=-lz
fi
rm -f "$work/ztest"

# A dictionary of the format's words.
cat > "$work/trace.dict" <<'DICT'
"hoff-trace 1\x0a"
"budget "
"host_cap "
"h2d_gbps "
"d2h_gbps "
"step_ns "
"step_gpu_ns "
"backend "
"name "
"a "
"f "
"r "
"w "
"o "
"o - "
"rb "
"re "
" p"
" k"
" p k"
" fwd"
" bwd"
" loss"
" opt"
"end\x0a"
"\x5cx20"
"\x5cx"
"# "
"\x0d\x0a"
"18446744073709551615"
"140737488355327"
"1.5e3"
"\x1f\x8b"
DICT

$CC -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -DHOFF_LIBFUZZER \
    -I"$work" -I"$top/include" -I"$top/lib" \
    "$here/fuzz_trace.c" "$top/lib/trace/trace.c" "$top/lib/trace/trace_parse.c" "$top/lib/trace/trace_read.c" \
    "$top/lib/trace/trace_write.c" \
    "$top/lib/core/error.c" "$top/lib/core/log.c" "$top/lib/core/size.c" "$top/lib/core/outfile.c" $zlib -lm \
    -o "$work/fuzz_trace"

echo "run.sh: fuzzing for $secs s in $work"
cd "$work"
status=0
./fuzz_trace -max_total_time="$secs" -max_len=8192 -timeout=10 -rss_limit_mb=2048 -dict=trace.dict \
    -artifact_prefix="$work/" -print_final_stats=1 "$@" corpus || status=$?
if [ "$status" -ne 0 ]; then
    echo "run.sh: the fuzzer failed (status $status); crashers are in $work" >&2
    exit "$status"
fi
echo "run.sh: no crash in $secs s ($(ls corpus | wc -l) inputs in $work/corpus)"
