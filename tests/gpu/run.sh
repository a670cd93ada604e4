#!/usr/bin/env bash
# shellcheck disable=SC2034,SC2317  # the parts' variables are read as ${!name}; functions run in traps and bash -c
# run.sh — the one GPU run: on a machine with a GPU and the CUDA toolkit (no autotools, liburing, hwloc or CUnit
# needed) build libhoff.so and the C programs, then run the cuda backend's suite (test_cuda), the raw runtime
# probes (probes), the A/B PyTorch training check (ab_train.py), every torch.cuda memory call of hoff's table under
# python -m hoff (seams.py) and a 1-GPU DDP step (ddp_step.py: nccl, world size 1, bitwise against the default
# allocator), each under its share of one wall-clock limit, and write $OUT/gpu.json on every exit (skip, build failure, timeout, signal, success).
# Usage: OUT=dir tests/gpu/run.sh      (README, "On a GPU"; exit 0 ok, 1 failed, 77 skipped)
# Env: OUT (default: a new temp dir, printed), CUDA_HOME (default /usr/local/cuda), HOFF_GPU_TIMEOUT (whole run, s,
#   default 540), HOFF_GPU_DIRECT=1 (gcc even where a generated configure exists), HOFF_GPU_FORCE_BUILD=1 (build
#   even without a GPU; the parts then skip), HOFF_JOBS, HOFF_DEVICE, PYTHON (a python3 with torch), KEEP=1.
# Threading: one shell; each part runs as a background child that a signal or its limit kills.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
CUDA=${CUDA_HOME:-/usr/local/cuda}
jobs=${HOFF_JOBS:-$(nproc 2>/dev/null || echo 2)}
total=${HOFF_GPU_TIMEOUT:-540}
export LC_ALL=C

if [ -z "${OUT:-}" ]; then
    OUT=$(mktemp -d "${TMPDIR:-/tmp}/hoff-gpu-out.XXXXXX") || { echo "run.sh: cannot make a temp dir for OUT" >&2; exit 1; }
    echo "run.sh: OUT is not set; results go to $OUT"
fi
if ! mkdir -p "$OUT" || [ ! -w "$OUT" ]; then
    echo "run.sh: OUT=$OUT is not a writable directory; nowhere to write gpu.json" >&2
    exit 1
fi
OUT=$(cd "$OUT" && pwd)
export OUT

start=$(date +%s)
started_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)
work=$(mktemp -d "${TMPDIR:-/tmp}/hoff-gpu.XXXXXX") || { echo "run.sh: cannot make a temp dir" >&2; exit 1; }

# ---- the report ------------------------------------------------------------------------------
# Every part has a status (pending, running, ok, failed, timeout, skipped), a reason, seconds, an exit code, a
# log tail and (suite, probes, train, ddp) the JSON its program wrote.
status=running reason="" exit_code="" child="" no_gpu=""
st_build=pending st_suite=pending st_probes=pending st_train=pending st_seams=pending st_ddp=pending
why_build="" why_suite="" why_probes="" why_train="" why_seams="" why_ddp=""
sec_build=null sec_suite=null sec_probes=null sec_train=null sec_seams=null sec_ddp=null
rc_build=null rc_suite=null rc_probes=null rc_train=null rc_seams=null rc_ddp=null
log_build="" log_suite="" log_probes="" log_train="" log_seams="" log_ddp=""
json_build="" json_suite="" json_probes="" json_train="" json_seams="" json_ddp=""
build_path="" libhoff="" exports="" host_gpu="" host_driver="" python_bin="" torch_version=""

py=
for c in python3 /usr/bin/python3; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import json' >/dev/null 2>&1; then py=$(command -v "$c"); break; fi
done

# A JSON string of $1: quotes, backslashes and control characters escaped, invalid UTF-8 dropped.
jstr() {
    local s=$1
    if command -v iconv >/dev/null 2>&1; then s=$(printf '%s' "$s" | iconv -c -f UTF-8 -t UTF-8 2>/dev/null || printf '%s' "$s"); fi
    printf '%s' "$s" | tr -d '\000-\010\013\014\016-\037' |
        awk 'BEGIN { ORS = ""; print "\"" }
             { if (NR > 1) print "\\n"; gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); gsub(/\t/, "\\t"); gsub(/\r/, "\\r"); print }
             END { print "\"" }'
}

# Is $1 one valid JSON object?  (python3 where there is one; else its first and last characters.)
json_ok() {
    [ -s "$1" ] || return 1
    if [ -n "$py" ]; then
        # (An explicit status: a bare `return` in the EXIT trap would return the script's exit code.)
        "$py" -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if isinstance(d, dict) else 1)' "$1" \
            >/dev/null 2>&1 && return 0
        return 1
    fi
    [ "$(tr -d ' \t\r\n' < "$1" | head -c 1)" = "{" ] && [ "$(tr -d ' \t\r\n' < "$1" | tail -c 1)" = "}" ]
}

# The last $2 lines of file $1 (empty if none).
tail_of() {
    [ -f "$1" ] && tail -n "$2" "$1" 2>/dev/null
}

part_json() {
    local p=$1 st why sec rc log js
    st=st_$p why=why_$p sec=sec_$p rc=rc_$p log=log_$p js=json_$p
    printf '  "%s": {\n    "status": "%s",\n    "reason": %s,\n    "seconds": %s,\n    "exit": %s' \
        "$p" "${!st}" "$(jstr "${!why}")" "${!sec}" "${!rc}"
    if [ "$p" = build ]; then
        printf ',\n    "path": %s,\n    "libhoff": %s,\n    "exports": %s' "$(jstr "$build_path")" \
            "$(jstr "$libhoff")" "$(jstr "$exports")"
    elif [ -n "${!js}" ] && json_ok "${!js}"; then
        printf ',\n    "results": '
        cat "${!js}"
    else
        printf ',\n    "results": null'
    fi
    if [ -n "${!log}" ] && [ -f "${!log}" ]; then
        printf ',\n    "log_tail": %s' "$(jstr "$(tail_of "${!log}" 40)")"
    fi
    printf '\n  }'
}

write_report() {
    local now f=$OUT/gpu.json tmp=$OUT/gpu.json.tmp
    now=$(date +%s)
    {
        printf '{\n  "schema": "hoff-gpu-run/1",\n  "status": "%s",\n  "reason": %s,\n' "$status" "$(jstr "$reason")"
        [ "$status" = skipped ] && printf '  "skipped": %s,\n' "$(jstr "$reason")"
        printf '  "exit": %s,\n  "started": "%s",\n  "wall_s": %s,\n  "time_limit_s": %s,\n' \
            "${exit_code:-null}" "$started_at" "$((now - start))" "$( [[ $total =~ ^[0-9]+$ ]] && echo "$total" || echo null)"
        printf '  "host": {\n    "hostname": %s,\n    "gpu": %s,\n    "driver": %s,\n    "cuda_home": %s,\n' \
            "$(jstr "$(hostname 2>/dev/null)")" "$(jstr "$host_gpu")" "$(jstr "$host_driver")" "$(jstr "$CUDA")"
        printf '    "python": %s,\n    "torch": %s,\n    "source": %s\n  },\n' "$(jstr "$python_bin")" \
            "$(jstr "$torch_version")" "$(jstr "$(git -C "$top" describe --always --dirty 2>/dev/null || echo "$top")")"
        part_json build
        printf ',\n'
        part_json suite
        printf ',\n'
        part_json probes
        printf ',\n'
        part_json train
        printf ',\n'
        part_json seams
        printf ',\n'
        part_json ddp
        printf '\n}\n'
    } > "$tmp" 2>/dev/null
    if ! json_ok "$tmp"; then
        # Never leave the caller without a valid gpu.json, even if a part's text broke it.
        {
            printf '{\n  "schema": "hoff-gpu-run/1",\n  "status": "failed",\n'
            printf '  "reason": "run.sh could not assemble a valid gpu.json (%s); the parts: build %s, suite %s, probes %s, train %s, seams %s, ddp %s",\n' \
                "$status" "$st_build" "$st_suite" "$st_probes" "$st_train" "$st_seams" "$st_ddp"
            printf '  "exit": %s,\n  "wall_s": %s\n}\n' "${exit_code:-null}" "$((now - start))"
        } > "$tmp"
    fi
    mv -f "$tmp" "$f"
}

# Where it all ends (the EXIT trap): the overall status and exit code from the parts, then gpu.json.
# shellcheck disable=SC2317  # called by the trap
finish() {
    local p st bad="" skipped_parts=""
    trap - EXIT INT TERM HUP
    if [ -n "$child" ]; then
        # The running part: `timeout` passes the TERM on; KILL whatever is left after 10 s.
        kill -TERM "$child" 2>/dev/null
        for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$child" 2>/dev/null || break; sleep 1; done
        kill -KILL "$child" 2>/dev/null
        wait "$child" 2>/dev/null
    fi
    if [ "$status" = running ]; then
        for p in build suite probes train seams ddp; do
            st=st_$p
            case ${!st} in
            ok) ;;
            failed|timeout) bad="$bad${bad:+; }$p: ${!st}" ;;
            running) printf -v "st_$p" '%s' failed; printf -v "why_$p" '%s' "stopped: $reason"
                     bad="$bad${bad:+; }$p: stopped" ;;
            skipped) [ "$p" != build ] && skipped_parts="$skipped_parts${skipped_parts:+, }$p" ;;
            esac
        done
        for p in suite probes train seams ddp; do
            st=st_$p
            if [ "${!st}" = pending ]; then
                printf -v "st_$p" '%s' skipped
                printf -v "why_$p" '%s' "not run: ${reason:-${bad:-the run stopped before it}}"
            fi
        done
        if [ -n "$reason" ]; then          # a signal or an error stopped the run
            status=failed
            reason="$reason${bad:+ ($bad)}"
        elif [ -n "$bad" ]; then
            status=failed reason=$bad
        elif [ "$st_suite$st_probes$st_train$st_seams$st_ddp" = skippedskippedskippedskippedskipped ]; then
            status=skipped
            reason="${no_gpu:+$no_gpu (built anyway: HOFF_GPU_FORCE_BUILD=1); }every part skipped: suite: $why_suite; probes: $why_probes; train: $why_train; seams: $why_seams; ddp: $why_ddp"
        else
            status=ok reason="${skipped_parts:+skipped: $skipped_parts}"
        fi
    fi
    case $status in
    ok) exit_code=0 ;;
    skipped) exit_code=77 ;;
    *) exit_code=1 ;;
    esac
    write_report
    if [ "${KEEP:-0}" = 1 ]; then echo "run.sh: work dir kept in $work"; else rm -rf "$work"; fi
    echo "run.sh: $status${reason:+: $reason}"
    echo "run.sh: $OUT/gpu.json (exit $exit_code, $(( $(date +%s) - start )) s)"
    exit "$exit_code"
}

# shellcheck disable=SC2317  # called by the traps
on_signal() {
    reason="killed by SIG$1 after $(( $(date +%s) - start )) s"
    exit 1
}
trap finish EXIT
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM
trap 'on_signal HUP' HUP

skip_all() {
    status=skipped reason=$1
    for p in build suite probes train seams ddp; do
        printf -v "st_$p" '%s' skipped
        printf -v "why_$p" '%s' "$1"
    done
    echo "run.sh: skip: $1"
    exit 77
}

if ! [[ $total =~ ^[0-9]+$ ]] || [ "$total" -lt 60 ]; then
    reason="HOFF_GPU_TIMEOUT=$total: expected a whole number of seconds, at least 60"
    status=failed
    echo "run.sh: $reason" >&2
    exit 1
fi
deadline=$((start + total))

# Seconds a part may use: its cap, less what the parts after it keep back (a percentage of the whole limit:
# at 540 s the suite, the probes and the training keep 225 s from the build), never past the deadline.
budget() {
    local cap=$1 keep=$(($2 * total / 100)) left
    left=$((deadline - $(date +%s) - keep - 5))
    [ "$left" -lt "$cap" ] && cap=$left
    echo "$cap"
}

# Run a part's command (the rest of the arguments) in the background under `timeout`, its output in the part's
# log; sets rc_PART and sec_PART.  A signal to run.sh kills it.
run_part() {
    local p=$1 limit=$2 t0 rc
    shift 2
    if [ "$limit" -lt 5 ]; then
        printf -v "rc_$p" '%s' 124
        printf -v "sec_$p" '%s' 0
        echo "run.sh: $p: no time left (HOFF_GPU_TIMEOUT=$total)" > "$work/$p.log"
        printf -v "log_$p" '%s' "$work/$p.log"
        return 124
    fi
    printf -v "st_$p" '%s' running
    printf -v "log_$p" '%s' "$work/$p.log"
    write_report
    t0=$(date +%s)
    timeout -k 10 "$limit" "$@" > "$work/$p.log" 2>&1 &
    child=$!
    wait "$child"
    rc=$?
    child=""
    printf -v "rc_$p" '%s' "$rc"
    printf -v "sec_$p" '%s' "$(( $(date +%s) - t0 ))"
    return "$rc"
}

# Status of a part from its exit code: 0 ok, 77 skipped, 124/137 timeout, else failed.
settle() {
    local p=$1 rc=$2 limit=$3 why=$4
    case $rc in
    0) printf -v "st_$p" '%s' ok ;;
    77) printf -v "st_$p" '%s' skipped ;;
    124|137) printf -v "st_$p" '%s' timeout; why="ran past its limit of $limit s${why:+; $why}" ;;
    *) printf -v "st_$p" '%s' failed; why="exit $rc${why:+; $why}" ;;
    esac
    printf -v "why_$p" '%s' "$why"
    echo "run.sh: $p: $(eval echo "\$st_$p")${why:+ ($why)} in $(eval echo "\$sec_$p") s"
    write_report
}

# ---- 1. is there a GPU and a toolkit? (seconds, before anything is built) --------------------
write_report
force=${HOFF_GPU_FORCE_BUILD:-0}
gpu_signs=""
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L > "$work/smi" 2>&1; then
    gpu_signs="nvidia-smi"
    host_gpu=$(head -n 1 "$work/smi")
    host_driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)
fi
ls /dev/nvidia[0-9]* >/dev/null 2>&1 && gpu_signs="$gpu_signs /dev/nvidia*"
[ -z "$gpu_signs" ] && no_gpu="no GPU: nvidia-smi -L is absent or fails and there is no /dev/nvidia[0-9]*"

cudalib=
if [ -f "$CUDA/include/cuda_runtime_api.h" ]; then
    for l in lib64 lib targets/x86_64-linux/lib targets/sbsa-linux/lib; do
        if [ -e "$CUDA/$l/libcudart.so" ]; then cudalib="$CUDA/$l"; break; fi
    done
fi
no_toolkit=""
if [ -z "$cudalib" ]; then
    no_toolkit="no CUDA toolkit at $CUDA (cuda_runtime_api.h and libcudart.so are needed; set CUDA_HOME)"
fi
if [ -n "$no_gpu" ] && [ "$force" != 1 ]; then
    skip_all "$no_gpu${no_toolkit:+; also $no_toolkit}"
fi
[ -n "$no_toolkit" ] && skip_all "$no_toolkit"
if ! command -v gcc >/dev/null 2>&1; then
    status=failed reason="no gcc: the build needs a C compiler"
    exit 1
fi

# A cheap runtime probe: how many devices does the CUDA runtime see?
if [ -z "$no_gpu" ]; then
    printf '#include <stdio.h>\n#include <cuda_runtime_api.h>\nint main(void) { int n = 0; cudaError_t e = cudaGetDeviceCount(&n);\n  if (e != cudaSuccess) { printf("cudaGetDeviceCount: %%s\\n", cudaGetErrorName(e)); return 1; }\n  printf("%%d\\n", n); return 0; }\n' \
        > "$work/count.c"
    if gcc -I"$CUDA/include" -o "$work/count" "$work/count.c" -L"$cudalib" -Wl,-rpath,"$cudalib" -lcudart \
        > "$work/count.log" 2>&1; then
        n=$(timeout 60 "$work/count" 2>&1 | tail -n 1)
        if ! [[ $n =~ ^[0-9]+$ ]] || [ "$n" -eq 0 ]; then
            no_gpu="no usable GPU: $gpu_signs present but the CUDA runtime sees none (${n:-no answer})"
        fi
    else
        no_gpu="cannot compile a cudaGetDeviceCount probe against $CUDA: $(tail -n 3 "$work/count.log")"
    fi
    [ -n "$no_gpu" ] && [ "$force" != 1 ] && skip_all "$no_gpu"
fi
[ -n "$no_gpu" ] && echo "run.sh: $no_gpu; building anyway (HOFF_GPU_FORCE_BUILD=1), the parts will skip"

# ---- 2. build libhoff.so, test_cuda and probes (at most 5 minutes) ---------------------------

# The .c files of libhoff_core_la_SOURCES and libhoff_internal_la_SOURCES (cuda.c) in Makefile.am, with only the
# HAVE_CUDA conditional true (the GPU machine has no liburing/hwloc/CUnit).
lib_sources() {
    awk '
    function active(   i) { for (i = 1; i <= depth; i++) if (!on[i]) return 0; return 1 }
    /^if[ \t]/ { c = $2; neg = (c ~ /^!/); sub(/^!/, "", c); depth++;
                 on[depth] = ((c == "HAVE_CUDA") != neg); next }
    /^else([ \t]|$)/ { on[depth] = !on[depth]; next }
    /^endif([ \t]|$)/ { depth--; next }
    {
        line = $0
        if (!cont && line ~ /^libhoff_(core|internal)_la_SOURCES[ \t]*\+?=/) { cont = 1; sub(/^[^=]*=/, "", line) }
        else if (!cont) next
        more = (line ~ /\\[ \t]*$/)
        sub(/\\[ \t]*$/, "", line)
        if (active()) { n = split(line, w, /[ \t]+/); for (i = 1; i <= n; i++) if (w[i] ~ /\.c$/) print w[i] }
        cont = more
    }' "$top/Makefile.am"
}

# The direct path, in $work/build: config.h, every object with gcc (in parallel: xargs -P), then the three
# links.  No configure, and no make either.
direct_build() {
    local b=$work/build hdr=$CUDA/include/cuda_runtime_api.h d_discard=0 d_prefetch=0 d_dap=0 version zdef=""
    local srcs=() objs=() libs s o i
    mkdir -p "$b"
    grep -q 'cudaMemDiscardBatchAsync[ \t]*(' "$hdr" && d_discard=1
    grep -q 'cudaMemPrefetchBatchAsync[ \t]*(' "$hdr" && d_prefetch=1
    grep -q 'cudaMemDiscardAndPrefetchBatchAsync[ \t]*(' "$hdr" && d_dap=1
    libs=(-L"$cudalib" "-Wl,-rpath,$cudalib" -lcudart -pthread -lm -lrt -ldl)
    if printf '#include <zlib.h>\nint main(void) { return zlibVersion() == 0; }\n' |
        gcc -x c -o "$b/zcheck" - -lz >/dev/null 2>&1; then
        zdef="#define HAVE_ZLIB 1"
        libs+=(-lz)
    fi
    version=$(sed -n 's/^AC_INIT(\[hoff\], *\[\([^]]*\)\].*/\1/p' "$top/configure.ac" 2>/dev/null)
    version=${version:-0.0.0}
    cat > "$b/config.h" <<EOF
/* config.h written by tests/gpu/run.sh */
#define HAVE_CUDA 1
#define HAVE_DECL_CUDAMEMDISCARDBATCHASYNC $d_discard
#define HAVE_DECL_CUDAMEMPREFETCHBATCHASYNC $d_prefetch
#define HAVE_DECL_CUDAMEMDISCARDANDPREFETCHBATCHASYNC $d_dap
$zdef
#define PACKAGE "hoff"
#define PACKAGE_NAME "hoff"
#define PACKAGE_TARNAME "hoff"
#define PACKAGE_VERSION "$version"
#define PACKAGE_STRING "hoff $version"
#define PACKAGE_BUGREPORT ""
#define PACKAGE_URL ""
#define VERSION "$version"
#define HAVE_STDINT_H 1
#define HAVE_STDLIB_H 1
#define HAVE_STRING_H 1
#define HAVE_UNISTD_H 1
#define HAVE_DLFCN_H 1
EOF
    if [ -f "$top/Makefile.am" ]; then
        while IFS= read -r s; do
            [ -f "$top/$s" ] && srcs+=("$top/$s")
        done < <(lib_sources)
    fi
    if [ "${#srcs[@]}" -eq 0 ]; then
        while IFS= read -r s; do srcs+=("$s"); done < <(find "$top/lib" -name '*.c' | sort)
    fi
    # One line per object: OBJECT SOURCE [FLAGS].  The library's objects are position-independent with hidden
    # visibility, as libhoff_internal.la's: libhoff.so exports the HOFF_API symbols only, and test_cuda links
    # the same objects statically.
    : > "$b/objects"
    i=0
    for s in "${srcs[@]}"; do
        o="$b/$i-$(basename "${s%.c}").o"
        i=$((i + 1))
        objs+=("$o")
        printf '%s %s -fPIC -fvisibility=hidden\n' "$o" "$s" >> "$b/objects"
    done
    for s in test_cuda probes; do
        printf '%s %s\n' "$b/$s.o" "$top/tests/gpu/$s.c" >> "$b/objects"
    done
    export HOFF_CFLAGS="-std=gnu11 -O2 -g -Wall -Wextra -Wshadow -Wno-unused-parameter -pthread -I$top/include -I$top/lib -I$b -I$CUDA/include"
    export HOFF_TOP=$top
    # shellcheck disable=SC2016  # expanded by the sh that xargs starts
    xargs -P "$jobs" -L 1 sh -c 'echo "  CC   ${2#"$HOFF_TOP"/}"; exec gcc $HOFF_CFLAGS $3 $4 -c -o "$1" "$2"' sh \
        < "$b/objects" || return 1
    echo "  CCLD libhoff.so"
    gcc -shared -Wl,-soname,libhoff.so -o "$b/libhoff.so" "${objs[@]}" "${libs[@]}" || return 1
    echo "  CCLD test_cuda"
    gcc -o "$b/test_cuda" "$b/test_cuda.o" "${objs[@]}" "${libs[@]}" || return 1
    echo "  CCLD probes"
    gcc -o "$b/probes" "$b/probes.o" "${libs[@]}"
}

build_all() {
    local b=$work/build
    if [ "${HOFF_GPU_DIRECT:-0}" != 1 ] && [ -x "$top/configure" ] && [ ! -f "$top/config.status" ]; then
        # An unpacked `make dist` tarball (or a tree with a generated configure): out of tree, the source
        # stays clean.
        mkdir -p "$b" && cd "$b" &&
            "$top/configure" -q --with-cuda="$CUDA" --without-liburing --without-hwloc --without-cunit &&
            make -j"$jobs" libhoff.la tests/gpu/test_cuda tests/gpu/probes &&
            ln -sf .libs/libhoff.so libhoff.so && ln -sf tests/gpu/test_cuda test_cuda && ln -sf tests/gpu/probes probes
    else
        direct_build
    fi
}

if [ "${HOFF_GPU_DIRECT:-0}" != 1 ] && [ -x "$top/configure" ] && [ ! -f "$top/config.status" ]; then
    build_path=configure
else
    build_path=direct
fi
limit=$(budget 300 42)
echo "run.sh: $build_path build in $work/build (limit $limit s)"
run_part build "$limit" bash -c "$(declare -f lib_sources direct_build build_all); $(declare -p top CUDA cudalib work jobs); build_all"
rc=$?
why=""
if [ "$rc" -eq 0 ]; then
    libhoff=$(readlink -f "$work/build/libhoff.so")
    for f in libhoff.so test_cuda probes; do
        [ -e "$work/build/$f" ] || { rc=1; why="$why${why:+; }$f was not built"; }
    done
    if [ "$rc" -eq 0 ] && command -v nm >/dev/null 2>&1; then
        # The Python package calls these; a build that hides them is no good.
        exports=$(nm -D --defined-only "$libhoff" 2>/dev/null | awk '$2 ~ /^[TDBRVW]$/ { print $3 }' | sort)
        for s in hoff_torch_alloc hoff_torch_free hoff_torch_init hoff_init hoff_stats_json; do
            grep -qx "$s" <<<"$exports" || { rc=1; why="$why${why:+; }libhoff.so does not export $s"; }
        done
        others=$(grep -v '^hoff_' <<<"$exports" | grep -v '^_' | head -n 5 | tr '\n' ' ')
        exports="$(grep -c '^hoff_' <<<"$exports") hoff_* symbols${others:+; also $others}"
    fi
else
    why="first errors: $(grep -E 'error:|Error [0-9]' "$work/build.log" | head -n 3 | tr '\n' ' ' | sed 's/ *$//') (the last lines are in log_tail)"
fi
settle build "$rc" "$limit" "$why"
[ "$st_build" = ok ] || exit 1
bin=$work/build

# ---- 3. the C suite ------------------------------------------------------------------------
mkdir -p "$work/suite" "$work/probes"
json_suite=$work/suite/test_cuda.json
limit=$(budget 150 31)
run_part suite "$limit" env OUT="$work/suite" "$bin/test_cuda"
rc=$?
why=$(grep -E '^# skip:|^FAIL' "$work/suite.log" | head -n 5 | sed 's/^# skip: //' | tr '\n' ' ' | sed 's/ *$//')
[ "$rc" -eq 0 ] && why=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$work/suite.log" | tail -n 1)
settle suite "$rc" "$limit" "$why"

# ---- 4. the probes -------------------------------------------------------------------------
json_probes=$work/probes/probes.json
limit=$(budget 90 22)
run_part probes "$limit" env OUT="$work/probes" HOFF_PROBE_TIMEOUT="$((limit > 10 ? limit - 5 : limit))" "$bin/probes"
rc=$?
why=$(grep -E '^# skip:|^FAIL|\.error:' "$work/probes.log" | head -n 5 | sed 's/^# skip: //' | tr '\n' ' ' | sed 's/ *$//')
settle probes "$rc" "$limit" "$why"

# ---- 5. the A/B training check -------------------------------------------------------------
for c in ${PYTHON:-} python3 /usr/bin/python3; do
    if command -v "$c" >/dev/null 2>&1 &&
        v=$(timeout 60 "$c" -c 'import torch; print(torch.__version__)' 2>/dev/null | tail -n 1) && [ -n "$v" ]; then
        python_bin=$(command -v "$c") torch_version=$v
        break
    fi
done
# python_part PART CAP KEEP TIMED SCRIPT: run a Python part (its JSON in $work/PART.json, given as --out; with
# TIMED=1 also --time-limit, its limit less 10 s) under budget CAP KEEP, or skip it without a python3 that has torch;
# its status and the reason its JSON gives.
python_part() {
    local p=$1 cap=$2 keep=$3 timed=$4 script=$5 limit rc why="" js extra=()
    if [ -z "$python_bin" ]; then
        printf -v "st_$p" '%s' skipped
        printf -v "why_$p" '%s' "no python3 with torch (tried ${PYTHON:+$PYTHON, }python3, /usr/bin/python3)"
        echo "run.sh: $p: skipped (no python3 with torch)"
        return
    fi
    js=$work/$p.json
    printf -v "json_$p" '%s' "$js"
    limit=$(budget "$cap" "$keep")
    [ "$timed" = 1 ] && extra=(--time-limit "$((limit > 20 ? limit - 10 : limit))")
    run_part "$p" "$limit" "$python_bin" "$script" --out "$js" --hoff-library "$libhoff" "${extra[@]}"
    rc=$?
    if json_ok "$js"; then
        why=$("$python_bin" -c 'import json, sys; print(json.load(open(sys.argv[1])).get("reason", ""))' "$js" 2>/dev/null)
    fi
    settle "$p" "$rc" "$limit" "$why"
}

python_part train 100000 24 1 "$here/ab_train.py"  # the seams part and the DDP step keep 12% of the whole limit each

# ---- 6. every torch.cuda memory call of hoff's table, under python -m hoff -------------------------
python_part seams 240 12 1 "$here/seams.py"       # the DDP step keeps 12%

# ---- 7. a 1-GPU DDP step (torch.distributed, nccl, world size 1) --------------------------------
python_part ddp 300 0 0 "$here/ddp_step.py"
exit 0
