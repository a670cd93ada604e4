#!/usr/bin/env python3
"""shapes_svg.py -- the step-time-against-budget plot (SVG) of `bench/shapes --json`.

usage: bench/shapes --json | bench/shapes_svg.py > shapes.svg

One line per shape: the step time of timed's plan (solid) and of greedy's (dotted), and the bound
max(compute, bytes that must move / link bandwidth) (dashed), each divided by the no-offload step,
at budgets of 100% (no offload) and the budgets of the rows; a marker where the offloaded fraction is
within what the FLOP-per-byte rule says moves for free.  Standard library only.
"""
import json
import sys

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]


def main():
    rows = [json.loads(line) for line in sys.stdin if line.strip()]
    if not rows:
        sys.exit("shapes_svg.py: no rows on stdin (pipe bench/shapes --json in)")
    shapes = []
    for r in rows:
        if r["shape"] not in shapes:
            shapes.append(r["shape"])
    W, H, L, R, T, B = 640, 400, 70, 180, 30, 50
    ymax = max(max(r["timed_step_ns"], r["greedy_step_ns"]) / r["no_offload_step_ns"] for r in rows)
    ymax = max(1.1, round(ymax * 10 + 0.5) / 10)
    x = lambda pct: L + (100 - pct) / 80.0 * (W - L - R)  # 100% .. 20%
    y = lambda v: T + (ymax - v) / (ymax - 1.0 + 0.05) * (H - T - B) if ymax > 1 else T
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'font-size="12">' % (W, H),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="18" font-size="14">Step time against budget (sim model, 50 GB/s each way, '
           '400 TFLOP/s)</text>' % L]
    # axes and grid
    v = 1.0
    while v <= ymax + 1e-9:
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (L, y(v), W - R, y(v)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%.2fx</text>' % (L - 6, y(v) + 4, v))
        v += 0.05 if ymax <= 1.4 else 0.1
    for pct in (100, 75, 50, 25):
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>' % (x(pct), T, x(pct), H - B))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%d%%</text>' % (x(pct), H - B + 16, pct))
    out.append('<text x="%d" y="%d" text-anchor="middle">budget (%% of the activation peak; 100%% = no offload)'
               '</text>' % ((L + W - R) // 2, H - 12))
    out.append('<text x="16" y="%d" transform="rotate(-90 16 %d)" text-anchor="middle">step / no-offload step'
               '</text>' % ((T + H - B) // 2, (T + H - B) // 2))
    for k, name in enumerate(shapes):
        c = COLORS[k % len(COLORS)]
        rs = sorted((r for r in rows if r["shape"] == name), key=lambda r: -r["budget_pct"])
        for key, dash in (("timed_step_ns", ""), ("greedy_step_ns", ' stroke-dasharray="2,3"'),
                          ("bound_ns", ' stroke-dasharray="6,4"')):
            pts = [(x(100), y(1.0))] + [(x(r["budget_pct"]), y(r[key] / r["no_offload_step_ns"])) for r in rs]
            out.append('<polyline fill="none" stroke="%s" stroke-width="%s"%s points="%s"/>'
                       % (c, "2" if key == "timed_step_ns" else "1.2", dash,
                          " ".join("%.1f,%.1f" % p for p in pts)))
        for r in rs:
            free = r["offload_fraction"] <= r["free_fraction"] + 1e-9
            out.append('<circle cx="%.1f" cy="%.1f" r="4" fill="%s" stroke="%s"/>'
                       % (x(r["budget_pct"]), y(r["timed_step_ns"] / r["no_offload_step_ns"]),
                          c if free else "white", c))
        ly = T + 20 + 18 * k
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>'
                   % (W - R + 10, ly, W - R + 30, ly, c))
        out.append('<text x="%d" y="%d">%s (free %.0f%%)</text>'
                   % (W - R + 34, ly + 4, name, 100 * rs[0]["free_fraction"]))
    ly = T + 20 + 18 * len(shapes) + 10
    for i, (txt, dash) in enumerate((("timed", ""), ("greedy", ' stroke-dasharray="2,3"'),
                                     ("bound", ' stroke-dasharray="6,4"'))):
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#444"%s/>'
                   % (W - R + 10, ly + 16 * i, W - R + 30, ly + 16 * i, dash))
        out.append('<text x="%d" y="%d">%s</text>' % (W - R + 34, ly + 16 * i + 4, txt))
    out.append('<text x="%d" y="%d">filled: offload within</text>' % (W - R + 10, ly + 16 * 3 + 4))
    out.append('<text x="%d" y="%d">the free fraction</text>' % (W - R + 10, ly + 16 * 4 + 4))
    out.append("</svg>")
    print("\n".join(out))


if __name__ == "__main__":
    main()
