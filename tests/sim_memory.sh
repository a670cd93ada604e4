# sim_memory.sh — sourced by the shell tests that run simulations (hoff-plan simulate, timeline and export, and
# bench/bound.py, which runs hoff-plan simulate).  Exit status 3 from them means the simulation was refused
# before it started: the machine has too little memory available now (other work on it), not a bug.  Such a
# test skips (exit 77), and its log says so with hoff-plan's message.
#   sim_run CMD ARGS...       runs the command; skips on 3, else returns its status, its stdout and stderr going
#                             where the caller sent them (stderr after stdout)
#   sim_skip STATUS WHAT MSG  the rule itself, for a status a test got by other means
# Threading: shell; keeps the test's stdout (its log) on fd 8, from where this file is sourced.
exec 8>&1

sim_skip() { # sim_skip STATUS WHAT MESSAGE
    [ "$1" -eq 3 ] || return 0
    printf 'SKIP: %s exited 3: the simulation was refused for memory (the machine is short of it now):\n%s\n' \
        "$2" "$3" >&8
    exit 77
}

sim_run() { # sim_run CMD ARGS...
    _sim_err=${TMPDIR:-/tmp}/hoff-sim-run.$$
    "$@" 2>"$_sim_err"
    _sim_rc=$?
    _sim_msg=$(cat "$_sim_err")
    rm -f "$_sim_err"
    sim_skip "$_sim_rc" "$*" "$_sim_msg"
    [ -z "$_sim_msg" ] || printf '%s\n' "$_sim_msg" >&2
    return "$_sim_rc"
}
