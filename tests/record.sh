#!/bin/sh
# record.sh — hoff-record and its preload on a known C program (tests/record_prog): the recorded step's exact
# events, whole-run mode, the threshold, the chosen step, usage errors.  Runs in the build directory.
set -u

cd "${builddir:-.}" || exit 99
lib=.libs/libhoff-record.so
if [ ! -f "$lib" ]; then
    echo "SKIP: $lib was not built"
    exit 77
fi
# A preload built with a sanitizer cannot go first in another program's
# library list (the sanitizer runtime must): skip rather than fail.
if command -v readelf >/dev/null 2>&1 && readelf -d "$lib" | grep -q 'lib[a-z]*san'; then
    echo "SKIP: $lib is linked against a sanitizer runtime; an LD_PRELOAD library cannot be (run this test in a build without -fsanitize)"
    exit 77
fi

fail=0
tmp=${TMPDIR:-/tmp}/hoff-record-test.$$
trap 'rm -rf "$tmp".*' EXIT INT TERM

check() { # check FILE PATTERN WHAT
    if ! grep -q -- "$2" "$1"; then
        echo "FAIL: $3: no '$2' in:"
        cat "$1"
        fail=1
    fi
}

# The events of a trace with the times cut off: "a 0 2097152 1 0", "rb", ...
events() {
    sed -n '/^[afrwo] \|^rb\|^re\|^end/p' "$1" | awk '
        $1 == "a" { line = $1 " " $2 " " $3 " " $4 " " $5; if ($NF == "p") line = line " p"; print line; next }
        $1 == "f" || $1 == "r" || $1 == "w" { print $1 " " $2 " " $3; next }
        $1 == "o" { print $1 " " $2; next }
        { print $1 }'
}

# 1. The second step (the default), with every mark.
./hoff-record -o "$tmp.trace" -- tests/record_prog >"$tmp.out" 2>&1
rc=$?
if [ "$rc" -ne 0 ]; then
    echo "FAIL: hoff-record -- tests/record_prog exited $rc"
    cat "$tmp.out"
    fail=1
fi
check "$tmp.out" "step 1 recorded: " "hoff-record message"
cat >"$tmp.want" <<'EOF'
o 0
a 0 2097152 1 0
a 1 4194304 1 0
a 2 3145728 1 0
f 2 0
a 3 5242880 1 0
r 0 0
rb
a 4 1572864 0 0 p
re
o 1
w 1 0
f 4 0
f 1 0
f 3 0
f 0 0
a 5 1048576 1 0
end
EOF
if [ -f "$tmp.trace" ]; then
    events "$tmp.trace" >"$tmp.got"
    if ! diff -u "$tmp.want" "$tmp.got"; then
        echo "FAIL: the recorded step's events differ from the program's (above)"
        fail=1
    fi
    check "$tmp.trace" "^backend record$" "trace header"
    check "$tmp.trace" "^name 0 fwd$" "trace op names"
    ./hoff-plan info "$tmp.trace" >"$tmp.out" 2>&1 || { echo "FAIL: hoff-plan info on the recorded trace"; cat "$tmp.out"; fail=1; }
    check "$tmp.out" "retained at step end: 1" "hoff-plan info (the retained block)"
else
    echo "FAIL: no trace written"
    fail=1
fi

# 2. --step 0, gzip output, and a threshold above 2 MiB: blocks a, d and e are gone.
./hoff-record -q -o "$tmp.trace.gz" --step 0 --threshold 2M+1 -- tests/record_prog >"$tmp.out" 2>&1
rc=$?
if [ "$rc" -ne 2 ]; then
    echo "FAIL: --threshold 2M+1 exited $rc, expected 2 (a bad size)"
    cat "$tmp.out"
    fail=1
fi
./hoff-record -q -o "$tmp.trace.gz" --step 0 --threshold 2100000 -- tests/record_prog --lax >"$tmp.out" 2>&1
rc=$?
if [ "$rc" -ne 0 ] || [ ! -s "$tmp.trace.gz" ]; then
    echo "FAIL: hoff-record --step 0 --threshold 2100000 exited $rc or wrote nothing"
    cat "$tmp.out"
    fail=1
elif [ -s "$tmp.out" ]; then
    echo "FAIL: hoff-record -q printed something:"
    cat "$tmp.out"
    fail=1
else
    gzip -dc "$tmp.trace.gz" >"$tmp.trace0"
    n=$(grep -c '^a ' "$tmp.trace0")
    if [ "$n" -ne 3 ]; then
        echo "FAIL: threshold 2100000: $n allocations recorded, expected 3 (4M, 3M, 5M)"
        cat "$tmp.trace0"
        fail=1
    fi
fi

# 3. Without marks the whole run is one step: 3 steps x 6 blocks, all freed.
./hoff-record -o "$tmp.whole" -- tests/record_prog --no-marks >"$tmp.out" 2>&1
rc=$?
check "$tmp.out" "whole run recorded" "whole-run mode"
if [ "$rc" -ne 0 ] || [ ! -s "$tmp.whole" ]; then
    echo "FAIL: whole-run mode exited $rc or wrote nothing"
    fail=1
else
    n=$(grep -c '^a ' "$tmp.whole")
    f=$(grep -c '^f ' "$tmp.whole")
    if [ "$n" -ne 18 ] || [ "$f" -ne 18 ]; then
        echo "FAIL: whole run: $n allocations and $f frees, expected 18 and 18"
        fail=1
    fi
fi

# 4. A step that never comes: no trace, exit 1, and a message saying why.
./hoff-record -o "$tmp.never" --step 7 -- tests/record_prog >"$tmp.out" 2>&1
rc=$?
if [ "$rc" -ne 1 ] || [ -e "$tmp.never" ]; then
    echo "FAIL: --step 7 of 3: exit $rc (expected 1), trace file present: $([ -e "$tmp.never" ] && echo yes || echo no)"
    fail=1
fi
check "$tmp.out" "never came" "--step 7 message"

# 4b. Nothing at the output path is removed up front: an old trace survives a
# run that records nothing; -o DIR and -o X.%p.trace that write nothing exit
# non-zero and say so.
printf 'the old trace\n' >"$tmp.keep"
./hoff-record -o "$tmp.keep" --step 7 -- tests/record_prog >"$tmp.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] || { echo "FAIL: --step 7 over an old trace exited $rc, expected 1"; fail=1; }
[ "$(cat "$tmp.keep" 2>/dev/null)" = "the old trace" ] ||
    { echo "FAIL: the old trace was removed or changed by a run that recorded nothing"; fail=1; }
./hoff-record -o "$tmp.keep" -- tests/record_prog >"$tmp.out" 2>&1 ||
    { echo "FAIL: hoff-record over an old trace failed"; cat "$tmp.out"; fail=1; }
check "$tmp.keep" "^hoff-trace " "a new trace replaces the old one"
mkdir "$tmp.dir"
./hoff-record -o "$tmp.dir" -- tests/record_prog >"$tmp.out" 2>&1
rc=$?
[ "$rc" -ne 0 ] || { echo "FAIL: hoff-record -o DIR exited 0"; fail=1; }
check "$tmp.out" "is a directory" "hoff-record -o DIR (message)"
./hoff-record -o "$tmp.%p.never" --step 7 -- tests/record_prog >"$tmp.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] || { echo "FAIL: -o X.%p.trace --step 7 (nothing written) exited $rc, expected 1"; fail=1; }
check "$tmp.out" "no trace was written" "-o X.%p.trace, nothing written (message)"
./hoff-record -q -o "$tmp.%p.pid" -- tests/record_prog >"$tmp.out" 2>&1 ||
    { echo "FAIL: -o X.%p.trace exited non-zero though a trace was written"; cat "$tmp.out"; fail=1; }
ls "$tmp".[0-9]*.pid >/dev/null 2>&1 || { echo "FAIL: -o X.%p.trace wrote no X.PID.trace"; fail=1; }
# 4c. Ranks of a torchrun job share -o: a name without %r or %p is refused in every rank (nothing written, the
#     old file kept, a message saying why); with %r each rank writes its own.
echo "old" >"$tmp.shared"
RANK=1 WORLD_SIZE=2 ./hoff-record -o "$tmp.shared" -- tests/record_prog >"$tmp.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] || { echo "FAIL: -o FILE with WORLD_SIZE=2 exited $rc, expected 1 (no trace)"; fail=1; }
check "$tmp.out" "the 2 ranks of this job would all write that one file" "-o FILE with WORLD_SIZE=2 (message)"
[ "$(cat "$tmp.shared")" = old ] || { echo "FAIL: -o FILE with WORLD_SIZE=2 replaced the file"; fail=1; }
for r in 0 1; do
    RANK=$r WORLD_SIZE=2 ./hoff-record -q -o "$tmp.rank%r" -- tests/record_prog >"$tmp.out" 2>&1 ||
        { echo "FAIL: -o X.%r with RANK=$r exited non-zero"; cat "$tmp.out"; fail=1; }
    [ -s "$tmp.rank$r" ] || { echo "FAIL: -o X.%r with RANK=$r wrote no X.$r"; fail=1; }
done
if [ "$(id -u)" = 0 ]; then
    # Twins of /dev/null and /dev/full: never removed; the full one is a failure.
    mknod "$tmp.null" c 1 3 && mknod "$tmp.full" c 1 7
    ./hoff-record -o "$tmp.null" -- tests/record_prog >"$tmp.out" 2>&1 ||
        { echo "FAIL: hoff-record -o NULLDEV failed"; cat "$tmp.out"; fail=1; }
    [ -c "$tmp.null" ] || { echo "FAIL: hoff-record -o NULLDEV removed or replaced the device node"; fail=1; }
    ./hoff-record -o "$tmp.full" -- tests/record_prog >"$tmp.out" 2>&1
    rc=$?
    [ "$rc" -eq 1 ] || { echo "FAIL: hoff-record -o FULLDEV exited $rc, expected 1"; cat "$tmp.out"; fail=1; }
    [ -c "$tmp.full" ] || { echo "FAIL: hoff-record -o FULLDEV removed the device node"; fail=1; }
    check "$tmp.out" "No space left" "hoff-record -o FULLDEV (the cause)"
fi

# 5. The command's own failure is passed on.
./hoff-record -q -o "$tmp.false" -- sh -c 'exit 5' >"$tmp.out" 2>&1
rc=$?
if [ "$rc" -ne 5 ]; then
    echo "FAIL: hoff-record -- sh -c 'exit 5' exited $rc, expected 5"
    fail=1
fi

# 6. Usage errors: exit 2 with a message.
for args in "" "-o" "-o $tmp.x" "--bogus -o $tmp.x -- true" "-o $tmp.x --step x -- true" \
            "-o /nonexistent/dir/t -- true"; do
    # shellcheck disable=SC2086  # word splitting wanted
    ./hoff-record $args >"$tmp.out" 2>&1
    rc=$?
    if [ "$rc" -ne 2 ]; then
        echo "FAIL: hoff-record $args exited $rc, expected 2"
        cat "$tmp.out"
        fail=1
    fi
    check "$tmp.out" "hoff-record: " "hoff-record $args (message)"
done
./hoff-record --help >"$tmp.out" 2>&1 || { echo "FAIL: hoff-record --help"; fail=1; }
check "$tmp.out" "usage: hoff-record" "hoff-record --help"

exit $fail
