#!/bin/sh
# messages.sh — the tools' messages on bad input and unholdable runs: each refusal names what was wrong (the flag
# or variable, the value, the accepted range or the OS's reason) and exits non-zero; nothing runs on silently.
# Runs in the build directory ($builddir or cwd).
set -u

cd "${builddir:-.}" || exit 99
fail=0
tmp=${TMPDIR:-/tmp}/hoff-msgs-test.$$
trap 'rm -rf "$tmp".*' EXIT INT TERM

check() { # check FILE PATTERN WHAT
    if ! grep -qi -- "$2" "$1"; then
        echo "FAIL: $3: no '$2' in the output:"
        cat "$1"
        fail=1
    fi
}

absent() { # absent FILE PATTERN WHAT
    if grep -qi -- "$2" "$1"; then
        echo "FAIL: $3: '$2' in the output:"
        cat "$1"
        fail=1
    fi
}

expect_rc() { # expect_rc RC WANT WHAT OUTFILE
    if [ "$1" -ne "$2" ]; then
        echo "FAIL: $3 exited $1, expected $2"
        cat "$4"
        fail=1
    fi
}

trace=$tmp.trace
./hoff-plan synth --layers 2 --hidden 512 --seq 1024 -o "$trace" >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-plan synth" "$tmp.out"

# 1. synth -o into a directory that does not exist: the OS's reason, not an option error.
./hoff-plan synth -o /nonexistent-hoff-dir/x.trace >"$tmp.out" 2>&1
expect_rc $? 1 "hoff-plan synth -o /nonexistent-hoff-dir/x.trace" "$tmp.out"
check "$tmp.out" "/nonexistent-hoff-dir/x.trace" "synth -o missing dir (names the file)"
check "$tmp.out" "No such file or directory" "synth -o missing dir (the OS's reason)"
absent "$tmp.out" "option" "synth -o missing dir"

# 2. show: the per-event resident column counts block bytes (size classes, the 2 MiB managed grain) as the summary
# does.  Sizes that are not multiples of 2 MiB make the two differ when one counts requested bytes.
./hoff-plan synth --layers 2 --hidden 1000 --seq 1000 -o "$tmp.odd" >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-plan synth (odd sizes)" "$tmp.out"
./hoff-plan show "$tmp.odd" --budget 40% --json >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-plan show --json" "$tmp.out"
maxres=$(tr '{' '\n' <"$tmp.out" | sed -n 's/.*"resident_bytes":\([0-9]*\).*/\1/p' | sort -n | tail -n 1)
peak=$(sed -n 's/.*"summary":{[^}]*"peak_bytes":\([0-9]*\).*/\1/p' "$tmp.out")
if [ -z "$maxres" ] || [ "$maxres" != "$peak" ]; then
    echo "FAIL: hoff-plan show: the largest per-event resident_bytes ($maxres) is not the summary's peak ($peak)"
    fail=1
fi

exit $fail
