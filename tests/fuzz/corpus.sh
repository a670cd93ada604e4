#!/bin/sh
# corpus.sh — the automake test that replays the fuzz corpus through the trace reader (tests/fuzz/fuzz_trace
# built without libFuzzer); it fails if any input crashes or breaks a property.  Run from the build directory.
set -u
here=$(cd "$(dirname "$0")" && pwd)
srcdir=${srcdir:-$here/../..}
prog=./tests/fuzz/fuzz_trace
[ -x "$prog" ] || prog=$here/fuzz_trace
if [ ! -x "$prog" ]; then
    echo "corpus.sh: tests/fuzz/fuzz_trace is not built" >&2
    exit 99
fi
exec "$prog" "$srcdir/tests/fuzz/corpus"
