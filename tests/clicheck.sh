# clicheck.sh — sourced by the shell tests of hoff's command-line tools (demo.sh, messages.sh, plan.sh, advise.sh):
#   check FILE PATTERN WHAT           fails the test (fail=1) when FILE lacks PATTERN (case-insensitive), showing FILE
#   expect_rc RC WANT WHAT OUTFILE    fails the test when a command exited RC instead of WANT, showing its output
# The caller sets fail=0 first.  Threading: shell.

check() { # check FILE PATTERN WHAT
    if ! grep -qi -- "$2" "$1"; then
        echo "FAIL: $3: no '$2' in the output:"
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
