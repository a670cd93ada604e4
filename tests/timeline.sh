#!/bin/sh
# timeline.sh — hoff-plan timeline (SVG) and export (Perfetto / Chrome trace-event JSON) for every committed trace
# (tests/data/traces/*.trace*) and for synthetic ones: the SVG is well-formed XML with its parts, the JSON parses and
# carries the documented tracks.  Runs in the build directory ($builddir or cwd).
set -u

srcdir=${srcdir:-.}
case $srcdir in /*) ;; *) srcdir=$(pwd)/$srcdir ;; esac
cd "${builddir:-.}" || exit 99
. "$srcdir/tests/sim_memory.sh"
if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIP: python3 is needed to parse the SVG and the JSON"
    exit 77
fi
fail=0
tmp=${TMPDIR:-/tmp}/hoff-timeline-test.$$
trap 'rm -rf "$tmp".*' EXIT INT TERM
bad() { echo "FAIL: $*"; fail=1; }

# Synthetic traces always; the recorded ones when the tree has them.
./hoff-plan synth --layers 4 --hidden 512 --seq 2048 -o "$tmp.transformer.trace" >/dev/null 2>&1 ||
    bad "hoff-plan synth (transformer)"
./hoff-plan synth --events 1500 --seed 7 -o "$tmp.random.trace" >/dev/null 2>&1 || bad "hoff-plan synth --events"
traces="$tmp.transformer.trace $tmp.random.trace"
for t in "$srcdir"/tests/data/traces/*.trace*; do
    [ -f "$t" ] && traces="$traces $t"
done

n=0
for t in $traces; do
    n=$((n + 1))
    name=$(basename "$t")
    svg=$tmp.$n.svg
    js=$tmp.$n.json
    echo "--- $name"
    sim_run ./hoff-plan timeline "$t" --budget 25% --steps 2 -o "$svg" >"$tmp.out" 2>&1
    rc=$?
    cat "$tmp.out"
    if [ $rc -ne 0 ]; then
        bad "hoff-plan timeline $name exited $rc"
        continue
    fi
    sim_run ./hoff-plan export "$t" --budget 25% --steps 2 --perfetto "$js" >"$tmp.out" 2>&1
    rc=$?
    cat "$tmp.out"
    if [ $rc -ne 0 ]; then
        bad "hoff-plan export $name exited $rc"
        continue
    fi
    if command -v xmllint >/dev/null 2>&1 && ! xmllint --noout "$svg"; then
        bad "$name: xmllint rejects the SVG"
    fi
    python3 - "$svg" "$js" "$name" <<'EOF' || fail=1
import json, sys
import xml.dom.minidom

svg_path, json_path, name = sys.argv[1:]
problems = []

# The SVG: well-formed, an <svg> with a size, and every part of the picture.
try:
    doc = xml.dom.minidom.parse(svg_path)
except Exception as e:
    print("FAIL: %s: the SVG is not well-formed XML: %s" % (name, e))
    sys.exit(1)
root = doc.documentElement
if root.tagName != "svg" or root.getAttribute("xmlns") != "http://www.w3.org/2000/svg":
    problems.append("the root is not an SVG element")
if not root.getAttribute("width") or not root.getAttribute("viewBox"):
    problems.append("no width or viewBox")
text = " ".join(n.firstChild.data for n in doc.getElementsByTagName("text") if n.firstChild)
for want in ("Resident offload bytes over the step", "resident offload bytes (", "trace event",
             "without offload", "with the plan: on the device", "with the plan: on the host tier",
             "with the plan: on the NVMe tier", "replay on sim", "budget ", "late prefetch"):
    if want not in text:
        problems.append("no text %r" % want)
titles = " ".join(n.firstChild.data for n in doc.getElementsByTagName("title") if n.firstChild)
for want in ("without offload", "with the plan: resident on the device", "with the plan: on the host tier",
             "with the plan: on the NVMe tier", "replay on sim"):
    if want not in titles:
        problems.append("no series %r" % want)
paths = [p.getAttribute("d") for p in doc.getElementsByTagName("path")]
if sum(1 for d in paths if len(d) > 100) < 5:
    problems.append("fewer than 5 drawn series")

# The Perfetto JSON: parses, and carries the documented tracks.
try:
    trace = json.load(open(json_path))
except Exception as e:
    print("FAIL: %s: the Perfetto JSON does not parse: %s" % (name, e))
    sys.exit(1)
ev = trace.get("traceEvents") if isinstance(trace, dict) else None
if not isinstance(ev, list) or not ev:
    print("FAIL: %s: no traceEvents" % name)
    sys.exit(1)
for e in ev:
    if e.get("ph") not in ("M", "X", "C", "i") or not isinstance(e.get("pid"), int) or "name" not in e:
        problems.append("a malformed event: %r" % e)
        break
    if e["ph"] in ("X", "C", "i") and not (isinstance(e.get("ts"), (int, float)) and e["ts"] >= 0):
        problems.append("an event without a time: %r" % e)
        break
    if e["ph"] == "X" and not (isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0 and "tid" in e):
        problems.append("a slice without a duration or track: %r" % e)
        break
threads = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
want_tracks = {"compute": None, "D2H copy engine": None, "H2D copy engine": None, "NVMe tier": None}
for tid, tname in threads.items():
    for w in want_tracks:
        if tname.startswith(w):
            want_tracks[w] = tid
for w, tid in want_tracks.items():
    if tid is None:
        problems.append("no track %r" % w)
if not any(e["ph"] == "M" and e["name"] == "process_name" for e in ev):
    problems.append("no process name")
counters = {e["name"] for e in ev if e["ph"] == "C"}
for w in ("device: resident offload bytes", "host tier bytes", "NVMe tier bytes", "budget"):
    if w not in counters:
        problems.append("no counter track %r" % w)
slices = {}
for e in ev:
    if e["ph"] == "X":
        slices.setdefault(e["tid"], []).append(e)
if not slices.get(want_tracks["compute"]):
    problems.append("nothing on the compute track")
if not any(e["name"].startswith("step ") for e in slices.get(want_tracks["compute"], [])):
    problems.append("no step slices on the compute track")
moved = trace.get("otherData", {}).get("budget_bytes", 0) > 0
d2h = slices.get(want_tracks["D2H copy engine"], [])
h2d = slices.get(want_tracks["H2D copy engine"], [])
if moved and not d2h:
    problems.append("a budget under the peak, but no copies on the D2H track")
# Slices on one track nest or follow each other (Perfetto drops the others).
for tid, lst in slices.items():
    lst.sort(key=lambda e: (e["ts"], -e["dur"]))
    stack = []
    for e in lst:
        s, t = e["ts"], e["ts"] + e["dur"]
        while stack and stack[-1] <= s + 1e-6:
            stack.pop()
        if stack and t > stack[-1] + 1e-6:
            problems.append("track %s: slice %r at %.3f overlaps its parent" % (threads.get(tid), e["name"], s))
            break
        stack.append(t)
if problems:
    print("FAIL: %s: %s" % (name, "; ".join(problems)))
    sys.exit(1)
print("%s: SVG ok (%d paths), Perfetto ok (%d events; %d D2H, %d H2D copies; tracks %s)"
      % (name, len(paths), len(ev), len(d2h), len(h2d), ", ".join(sorted(threads.values()))))
EOF
done

# With a host cap and an NVMe tier, the NVMe track and band carry the spills
# (when this build has the tier: the sim's counters say whether it spilled).
t=$tmp.transformer.trace
mkdir "$tmp.spill" || exit 99
sim_run ./hoff-plan export "$t" --budget 25% --host-cap 40M --spill-dir "$tmp.spill" --steps 2 --perfetto "$tmp.nvme.json" \
    >"$tmp.out" 2>&1 || { bad "hoff-plan export --host-cap --spill-dir"; cat "$tmp.out"; }
sim_run ./hoff-plan timeline "$t" --budget 25% --host-cap 40M --spill-dir "$tmp.spill" --steps 2 -o "$tmp.nvme.svg" \
    >"$tmp.out" 2>&1 || { bad "hoff-plan timeline --host-cap --spill-dir"; cat "$tmp.out"; }
python3 - "$tmp.nvme.json" <<'EOF' || fail=1
import json, sys
trace = json.load(open(sys.argv[1]))
other = trace["otherData"]
if other["spills"] == 0:
    print("no spills in this build (no NVMe tier): the NVMe track is not checked")
    sys.exit(0)
ev = trace["traceEvents"]
tid = [e["tid"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name" and e["args"]["name"].startswith("NVMe")][0]
names = {e["name"] for e in ev if e["ph"] == "X" and e["tid"] == tid}
nvme = max(e["args"]["bytes"] for e in ev if e["ph"] == "C" and e["name"] == "NVMe tier bytes")
if "spill (write)" not in names or nvme == 0:
    print("FAIL: %d spills, but the NVMe track has %s and the NVMe counter peaks at %d" % (other["spills"], names, nvme))
    sys.exit(1)
print("NVMe tier: %d spills, %d restores on its track; the counter peaks at %d bytes" %
      (other["spills"], other["restores"], nvme))
EOF

# Usage errors and an unwritable file.
./hoff-plan timeline "$t" --budget 25% >"$tmp.out" 2>&1
[ $? -eq 2 ] || { bad "timeline without -o did not exit 2"; cat "$tmp.out"; }
./hoff-plan export "$t" --budget 25% >"$tmp.out" 2>&1
[ $? -eq 2 ] || { bad "export without --perfetto did not exit 2"; cat "$tmp.out"; }
./hoff-plan timeline "$t" -o "$tmp.x.svg" >"$tmp.out" 2>&1
[ $? -eq 2 ] || { bad "timeline without --budget did not exit 2"; cat "$tmp.out"; }
sim_run ./hoff-plan timeline "$t" --budget 25% -o "$tmp.nodir/x.svg" --steps 2 >"$tmp.out" 2>&1
[ $? -eq 1 ] || { bad "timeline to an unwritable path did not exit 1"; cat "$tmp.out"; }
grep -q "cannot write" "$tmp.out" || { bad "timeline to an unwritable path: no 'cannot write'"; cat "$tmp.out"; }
for sub in timeline export; do
    ./hoff-plan $sub --help >"$tmp.out" 2>&1
    [ $? -eq 0 ] && grep -q "usage: hoff-plan $sub" "$tmp.out" || { bad "hoff-plan $sub --help"; cat "$tmp.out"; }
done

exit $fail
