#!/bin/sh
# man.sh — the man pages say what the code does: every HOFF_* option in hoff-config(7) (hoff(7) is its alias), every
# statistics counter in hoff_stats(3) and in hoff-stat's JSON schema, every option of hoff-stat in hoff-stat(1),
# every hoff-plan command in hoff-plan(1); and the pages format without warnings.  Reads $srcdir only.
set -u

srcdir=${srcdir:-.}
fail=0
bad() { echo "FAIL: $*"; fail=1; }
man=$srcdir/doc/man

# 1. Options: each .env = "HOFF_X" of the table is in hoff-config.7.
for v in $(sed -n 's/.*\.env = "\(HOFF_[A-Z0-9_]*\)".*/\1/p' "$srcdir/lib/core/options.c"); do
    grep -q "$v" "$man/hoff-config.7" || bad "hoff-config.7 does not document $v"
done
grep -q '^\.so man7/hoff-config\.7' "$man/hoff.7" || bad "hoff.7 is not an alias of hoff-config.7"
# ...and every other HOFF_* variable hoff reads or sets (a quoted name in lib/, tools/, bench/ or the Python
# package; an assignment in hoff-record) is a reserved name: hoff_config_from_env lets it pass (options.c's
# reserved[]), and hoff-config(7)'s RESERVED VARIABLES lists it.  One missing makes hoff_init(NULL) refuse an
# environment hoff itself set up or documents.
opts=$(sed -n 's/.*\.env = "\(HOFF_[A-Z0-9_]*\)".*/\1/p' "$srcdir/lib/core/options.c")
reserved=$(sed -n '/reserved\[\] = {/,/};/p' "$srcdir/lib/core/options.c" | grep -o '"HOFF_[A-Z0-9_]*"' | tr -d '"')
[ -n "$reserved" ] || bad "no reserved[] names found in lib/core/options.c"
resdoc=$(sed -n '/^\.SH RESERVED VARIABLES/,/^\.SH /p' "$man/hoff-config.7")
read_vars=$( (find "$srcdir/lib" "$srcdir/tools" "$srcdir/bench" "$srcdir/python/hoff" -type f \
    \( -name '*.c' -o -name '*.h' -o -name '*.py' -o -name '*.in' \) -exec cat {} + |
    grep -oE "[\"']HOFF_[A-Z0-9_]+[\"']" | tr -d "\"'"
    grep -hoE '(^|[^A-Za-z0-9_])HOFF_[A-Z0-9_]+=' "$srcdir/tools/hoff-record.in" | grep -oE 'HOFF_[A-Z0-9_]+') |
    sort -u)
for v in $read_vars; do
    echo " $opts " | tr '\n' ' ' | grep -q " $v " && continue
    echo " $reserved " | tr '\n' ' ' | grep -q " $v " ||
        bad "$v is read or set by hoff but is neither an option nor in options.c's reserved[]: hoff_init(NULL) refuses it"
    echo "$resdoc" | grep -q "\b$v\b" || bad "hoff-config.7's RESERVED VARIABLES does not list $v"
done
# ...and the options the table marks live (.live = 1) are the ones hoff_torch(3) says may change on a live context.
live=$(awk '/\.name = "/ { s = $0; sub(/.*\.name = "/, "", s); sub(/".*/, "", s); name = s }
    /\.live = 1/ { print name }' "$srcdir/lib/core/options.c")
[ -n "$live" ] || bad "no .live = 1 option found in lib/core/options.c"
doc=$(sed -n '/context created afterwards; and, for$/,/^to a live context at once/p' "$man/hoff_torch.3" |
    sed -n 's/^\.BR* \([a-z_]*\).*/\1/p')
[ -n "$doc" ] || bad "hoff_torch.3 lists no options a live context takes (after 'context created afterwards; and, for')"
for o in $live; do
    echo " $doc " | tr '\n' ' ' | grep -q " $o " || bad "hoff_torch.3 does not list $o among the options a live context takes"
done
for o in $doc; do
    echo " $live " | tr '\n' ' ' | grep -q " $o " || bad "hoff_torch.3 lists $o as live; the option table does not mark it .live"
done

# 2. Counters: each HOFF_STATS_FIELDS name in hoff_stats.3 and in the schema.
fields=$(sed -n '/#define HOFF_STATS_FIELDS/,/^$/p' "$srcdir/include/hoff.h" |
    sed -n 's/.*X(\([a-z0-9_]*\),.*/\1/p')
[ -n "$fields" ] || bad "no HOFF_STATS_FIELDS found in hoff.h"
for f in $fields; do
    grep -q "^\.B[RI]* .*\b$f\b" "$man/hoff_stats.3" || bad "hoff_stats.3 does not document $f"
    grep -q "\"$f\"" "$srcdir/doc/hoff-stat.schema.json" || bad "doc/hoff-stat.schema.json does not list $f"
done

# 3. hoff-stat's options and hoff-plan's commands.
for o in pid job interval count once json clean dir help version; do
    grep -q -- "\\\\-\\\\-$o" "$man/hoff-stat.1" || bad "hoff-stat.1 does not document --$o"
done
# The commands are listed once, in HOFF_PLAN_COMMANDS (tools/hoff-plan/hoff-plan.h).
cmds=$(sed -n '/#define HOFF_PLAN_COMMANDS/,/^$/p' "$srcdir/tools/hoff-plan/hoff-plan.h" |
    sed -n 's/^ *X(\([a-z]*\),.*/\1/p')
[ -n "$cmds" ] || bad "no HOFF_PLAN_COMMANDS found in tools/hoff-plan/hoff-plan.h"
for c in $cmds; do
    grep -q "^\.SS $c\$" "$man/hoff-plan.1" || bad "hoff-plan.1 has no section for '$c'"
    grep -q "^\.B hoff-plan $c\$\|^\.B hoff-plan $c " "$man/hoff-plan.1" || bad "hoff-plan.1's SYNOPSIS lacks '$c'"
done
# ...and no section or synopsis line names a command that is not in the table.
for c in $(sed -n 's/^\.SS \([a-z]*\)$/\1/p' "$man/hoff-plan.1"); do
    echo " $cmds " | tr '\n' ' ' | grep -q " $c " || bad "hoff-plan.1 documents '$c', which is not a command"
done

# 4. The pages this part of hoff owns format without warnings.
if command -v groff >/dev/null 2>&1; then
    for p in hoff-stat.1 hoff-plan.1 hoff-config.7 hoff_stats.3 hoff.3 hoff_group.3; do
        out=$(groff -man -Tutf8 -ww -z "$man/$p" 2>&1)
        [ -z "$out" ] || bad "groff warns on $p: $out"
    done
else
    echo "(no groff: formatting not checked)"
fi

exit $fail
