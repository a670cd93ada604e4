/* timeline.c — hoff-plan timeline: an SVG of resident offload bytes over the last replayed step, events on the
 * x axis: without offload, with the plan (device, host and NVMe tiers stacked, transfers instant), the replay
 * as the sim measured it, the budget, and the late prefetches.  The SVG is written by hand.
 * Threading: single-threaded (the replay itself runs in recorder.c). */
#include "config.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/outfile.h"
#include "hoff-plan.h"
#include "mem/pool.h"

static void usage(FILE *f) {
    fprintf(f, "usage: hoff-plan timeline TRACE --budget SIZE|PCT%% -o FILE.svg [options]\n"
               "Draws resident offload bytes over the step, events on the x axis: without offload,\n"
               "and with the plan (on the device, the host tier and the NVMe tier stacked), the\n"
               "replay's own resident bytes as the sim measured them, the budget line, and marks\n"
               "where prefetches were late.  The last step of a replay on the sim backend is shown.\n"
               "No dependencies: the SVG is written by hand.\n"
               "\n"
               "  -o, --output FILE    the SVG to write (required)\n" PIC_FLAGS_HELP
               "  --width PX           picture width (default 1200, >= 400)\n"
               "  --height PX          picture height (default 640, >= 300)\n"
               "  -h, --help           this text\n"
               "\n"
               "Exit status: 0 ok, 1 unreadable trace, runtime error or unwritable file, 2 bad usage,\n"
               "3 refused: the machine has too little memory available now (--no-memory-check).\n");
}

enum { S_NOOFF, S_DEV, S_HOST, S_NVME, S_REAL, S_LATE, S_COUNT };

/* The picture: per event, the series (S_*); per column, their maxima (the
 * plan's tiers stacked: S_HOST is device + host, S_NVME all three); the
 * geometry. */
struct tl {
    struct pic p;
    size_t nev, nlate, late_total;
    uint64_t *ev[S_COUNT];
    double *col[S_COUNT];
    int ncol, last;
    double W, H, L, R, T, B, pw, ph, x0, y0, colw, ymax, unit, ystep, yscale;
    const char *uname;
};

/* The series per event.  0 or -1 (out of memory). */
static int series(struct tl *g) {
    struct hoff__schedule empty;
    struct pic *p = &g->p;
    uint64_t peak;
    uint32_t peak_ev;
    size_t i, k;

    for (k = 0; k < S_COUNT; k++)
        if (!(g->ev[k] = calloc(g->nev, sizeof *g->ev[k])))
            return -1;
    /* Without offload: the live managed bytes (what the budget counts). */
    hoff__schedule_init(&empty);
    empty.block_bytes = hoff__pool_block_bytes;
    if (hoff__schedule_resident(&p->ht.t, &empty, g->ev[S_NOOFF], &peak, &peak_ev) != 0)
        return -1;
    /* With the plan: the replayed schedule on the trace it was planned on
     * (the same events as TRACE, as the replay did not diverge), in the
     * library's one walk of the tiers. */
    if (!p->have_plan || p->planned.nev != g->nev ||
        hoff__schedule_tiers(&p->planned, &p->sched, g->ev[S_DEV], g->ev[S_HOST], g->ev[S_NVME], &peak, &peak_ev) !=
            0) {
        memcpy(g->ev[S_DEV], g->ev[S_NOOFF], g->nev * sizeof *g->ev[S_DEV]);
        memset(g->ev[S_HOST], 0, g->nev * sizeof *g->ev[S_HOST]);
        memset(g->ev[S_NVME], 0, g->nev * sizeof *g->ev[S_NVME]);
    }
    /* The replay as measured: resident bytes after each event of the last
     * step, and the late prefetches each event saw. */
    for (i = 0; i < g->nev; i++) {
        struct rec_sample *s = rec_at(&p->rec, g->last, i + 1), *s0 = rec_at(&p->rec, g->last, i);

        g->ev[S_REAL][i] = s ? s->st.resident_bytes : 0;
        g->ev[S_LATE][i] = s && s0 && s->st.late_prefetches > s0->st.late_prefetches
                               ? s->st.late_prefetches - s0->st.late_prefetches
                               : 0;
        g->nlate += g->ev[S_LATE][i] != 0;
        g->late_total += g->ev[S_LATE][i];
    }
    return 0;
}

/* Axis units: a 1-2-5 step that gives about `ticks` ticks. */
static double nice_step(double range, int ticks) {
    double raw = range / ticks, mag = pow(10, floor(log10(raw))), f = raw / mag;

    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

#define MAXTO(a, x) ((a) = (a) > (x) ? (a) : (x))

/* Columns: at most one per pixel, each the maximum of its events; the
 * y range and units.  0 or -1 (out of memory). */
static int columns(struct tl *g) {
    size_t i, k;
    int c;

    g->pw = g->W - g->L - g->R;
    g->ph = g->H - g->T - g->B;
    g->ncol = g->nev < (size_t)g->pw ? (int)g->nev : (int)g->pw;
    for (k = 0; k < S_COUNT; k++)
        if (!(g->col[k] = calloc((size_t)g->ncol, sizeof(double))))
            return -1;
    g->ymax = (double)g->p.ht.budget;
    for (i = 0; i < g->nev; i++) {
        double dev = (double)g->ev[S_DEV][i], host = dev + (double)g->ev[S_HOST][i],
               all = host + (double)g->ev[S_NVME][i];

        c = (int)((double)i * g->ncol / (double)g->nev);
        if (c >= g->ncol)
            c = g->ncol - 1;
        MAXTO(g->col[S_NOOFF][c], (double)g->ev[S_NOOFF][i]);
        MAXTO(g->col[S_DEV][c], dev);
        MAXTO(g->col[S_HOST][c], host);
        MAXTO(g->col[S_NVME][c], all);
        MAXTO(g->col[S_REAL][c], (double)g->ev[S_REAL][i]);
        g->col[S_LATE][c] += (double)g->ev[S_LATE][i];
        MAXTO(g->ymax, (double)g->ev[S_NOOFF][i]);
        MAXTO(g->ymax, all);
        MAXTO(g->ymax, (double)g->ev[S_REAL][i]);
    }
    if (g->ymax <= 0)
        g->ymax = 1;
    if (g->ymax >= (double)GiB) {
        g->unit = (double)GiB;
        g->uname = "GiB";
    } else if (g->ymax >= (double)(1 << 20)) {
        g->unit = (double)(1 << 20);
        g->uname = "MiB";
    } else {
        g->unit = 1024;
        g->uname = "KiB";
    }
    g->ystep = nice_step(g->ymax / g->unit * 1.05, 6);
    g->ymax = ceil(g->ymax / g->unit * 1.05 / g->ystep) * g->ystep * g->unit;
    g->x0 = g->L;
    g->y0 = g->T + g->ph;
    g->colw = g->pw / g->ncol;
    g->yscale = g->ph / g->ymax;
    return 0;
}

static void xml_text(FILE *f, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\n' || *s == '\t')
                fputc(*s, f);
            break;
        }
    }
}

/* A step function of one value per column as an SVG path: along the top
 * from left to right, then back along `base` (NULL: the x axis). */
static void band_path(FILE *f, const struct tl *g, const double *top, const double *base) {
    int c;

    fprintf(f, "M%.1f,%.1f", g->x0, g->y0 - top[0] * g->yscale);
    for (c = 0; c < g->ncol; c++) {
        double y = g->y0 - top[c] * g->yscale;

        fprintf(f, " L%.1f,%.1f L%.1f,%.1f", g->x0 + c * g->colw, y, g->x0 + (c + 1) * g->colw, y);
    }
    for (c = g->ncol - 1; c >= 0; c--) {
        double y = g->y0 - (base ? base[c] : 0) * g->yscale;

        fprintf(f, " L%.1f,%.1f L%.1f,%.1f", g->x0 + (c + 1) * g->colw, y, g->x0 + c * g->colw, y);
    }
    fputs(" Z", f);
}

static void line_path(FILE *f, const struct tl *g, const double *v) {
    int c;

    for (c = 0; c < g->ncol; c++) {
        double y = g->y0 - v[c] * g->yscale;

        fprintf(f, "%s%.1f,%.1f L%.1f,%.1f", c ? " L" : "M", g->x0 + c * g->colw, y, g->x0 + (c + 1) * g->colw, y);
    }
}

/* The head, the title and what was run. */
static void svg_head(FILE *f, const struct tl *g) {
    const struct pic *p = &g->p;

    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
            "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"13\">\n",
            g->W, g->H, g->W, g->H);
    fprintf(f, "<title>hoff-plan timeline: ");
    xml_text(f, hp_base_name(p->a.trace_path));
    fprintf(f, "</title>\n<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n", g->W, g->H);
    fprintf(f, "<text x=\"%.0f\" y=\"28\" font-size=\"18\" font-weight=\"bold\">Resident offload bytes over the step: ",
            g->L);
    xml_text(f, hp_base_name(p->a.trace_path));
    fprintf(f, "</text>\n");
    fprintf(f, "<text x=\"%.0f\" y=\"50\" fill=\"#444444\">planner %s, budget %s", g->L, p->planner, SZ(p->ht.budget));
    if (p->a.budget.pct >= 0)
        fprintf(f, " (%g%% of the %s peak)", p->a.budget.pct, SZ(p->ht.offload_peak));
    fprintf(f, ", copy engines %g GB/s; step %d of %d simulated on sim (", p->a.bandwidth, g->last, p->rec.steps);
    fprintf(f, "%s), %zu events", p->last.plans ? "replay" : "no plan", g->nev);
    if (p->a.host_cap)
        fprintf(f, ", host cap %s", SZ(p->a.host_cap));
    fprintf(f, "</text>\n");
}

/* The grid, the y axis, the plan's tiers and the two lines. */
static void svg_plot(FILE *f, const struct tl *g) {
    double v;

    fprintf(f, "<g stroke=\"#e4e4e4\" stroke-width=\"1\">\n");
    for (v = 0; v <= g->ymax / g->unit + 1e-9; v += g->ystep)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", g->x0, g->y0 - v * g->unit * g->yscale,
                g->x0 + g->pw, g->y0 - v * g->unit * g->yscale);
    fprintf(f, "</g>\n<g text-anchor=\"end\" fill=\"#333333\">\n");
    for (v = 0; v <= g->ymax / g->unit + 1e-9; v += g->ystep)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%g</text>\n", g->x0 - 8, g->y0 - v * g->unit * g->yscale + 4, v);
    fprintf(f, "</g>\n");
    fprintf(f,
            "<text transform=\"translate(%.0f,%.1f) rotate(-90)\" text-anchor=\"middle\" fill=\"#333333\">"
            "resident offload bytes (%s)</text>\n",
            g->L - 62, g->T + g->ph / 2, g->uname);
    /* The plan's tiers, stacked: NVMe on top, then host, then device. */
    fprintf(f, "<path fill=\"#b39ddb\" fill-opacity=\"0.85\" stroke=\"none\" d=\"");
    band_path(f, g, g->col[S_NVME], g->col[S_HOST]);
    fprintf(f, "\"><title>with the plan: on the NVMe tier</title></path>\n");
    fprintf(f, "<path fill=\"#ffcc80\" fill-opacity=\"0.9\" stroke=\"none\" d=\"");
    band_path(f, g, g->col[S_HOST], g->col[S_DEV]);
    fprintf(f, "\"><title>with the plan: on the host tier</title></path>\n");
    fprintf(f, "<path fill=\"#90caf9\" fill-opacity=\"0.95\" stroke=\"none\" d=\"");
    band_path(f, g, g->col[S_DEV], NULL);
    fprintf(f, "\"><title>with the plan: resident on the device (transfers instant)</title></path>\n");
    /* Without offload, and the replay as measured. */
    fprintf(f, "<path fill=\"none\" stroke=\"#757575\" stroke-width=\"1.4\" d=\"");
    line_path(f, g, g->col[S_NOOFF]);
    fprintf(f, "\"><title>without offload: %s peak</title></path>\n", SZ(g->p.ht.offload_peak));
    fprintf(f, "<path fill=\"none\" stroke=\"#0d47a1\" stroke-width=\"1.6\" d=\"");
    line_path(f, g, g->col[S_REAL]);
    fprintf(f, "\"><title>replay on sim: resident bytes measured after each event</title></path>\n");
}

/* The budget line, its label where the curves stay lowest under it (the
 * right end, the left end, or a tenth of the way in between). */
static void svg_budget(FILE *f, const struct tl *g) {
    uint64_t budget = g->p.ht.budget;
    double yb = g->y0 - (double)budget * g->yscale, lw, best_x, best = -1;
    int cand, c;

    if (!budget)
        return;
    fprintf(f,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#d32f2f\" stroke-width=\"2\" "
            "stroke-dasharray=\"10,5\"/>\n",
            g->x0, yb, g->x0 + g->pw, yb);
    lw = 8.0 * (7 + (double)strlen(SZ(budget)));
    best_x = g->x0 + g->pw - 4 - lw;
    for (cand = 0; cand <= 10; cand++) {
        double lx = g->x0 + 4 + (g->pw - 8 - lw) * (10 - cand) / 10.0, top = 0;
        int c0 = (int)((lx - g->x0) / g->colw), c1 = (int)((lx + lw - g->x0) / g->colw);

        for (c = c0 < 0 ? 0 : c0; c <= c1 && c < g->ncol; c++) {
            MAXTO(top, g->col[S_NOOFF][c]);
            MAXTO(top, g->col[S_NVME][c]);
            MAXTO(top, g->col[S_REAL][c]);
        }
        if (best < 0 || top < best) {
            best = top;
            best_x = lx;
        }
    }
    fprintf(f,
            "<text x=\"%.1f\" y=\"%.1f\" fill=\"#d32f2f\" font-weight=\"bold\" "
            "stroke=\"#ffffff\" stroke-width=\"3\" paint-order=\"stroke\">budget %s</text>\n",
            best_x, yb - 6, SZ(budget));
}

/* Late prefetches (a red triangle under the axis at each event that waited
 * for one), the axes and the x ticks. */
static void svg_axes(FILE *f, const struct tl *g) {
    double xstep, v;
    int c, tick;

    fprintf(f, "<g fill=\"#d32f2f\">\n");
    for (c = 0; c < g->ncol; c++) {
        double xc = g->x0 + (c + 0.5) * g->colw;

        if (g->col[S_LATE][c] <= 0)
            continue;
        fprintf(f, "<path d=\"M%.1f,%.1f l-5,9 l10,0 Z\"><title>%.0f late prefetch%s</title></path>\n", xc, g->y0 + 3,
                g->col[S_LATE][c], g->col[S_LATE][c] == 1 ? "" : "es");
    }
    fprintf(f, "</g>\n");
    fprintf(f,
            "<g stroke=\"#333333\" stroke-width=\"1.2\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/></g>\n",
            g->x0, g->y0, g->x0 + g->pw, g->y0, g->x0, g->y0, g->x0, g->T);
    xstep = nice_step((double)g->nev, 10);
    if (xstep < 1)
        xstep = 1;
    fprintf(f, "<g text-anchor=\"middle\" fill=\"#333333\">\n");
    for (v = 0, tick = 0; v <= (double)g->nev + 1e-9 && tick < 100; v += xstep, tick++) {
        double xv = g->x0 + v / (double)g->nev * g->pw;

        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333333\"/>", xv, g->y0, xv,
                g->y0 + 5);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%.0f</text>\n", xv, g->y0 + 28, v);
    }
    fprintf(f,
            "</g>\n<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#333333\">trace event "
            "(allocations, frees, accesses and op marks of one step, in order)</text>\n",
            g->x0 + g->pw / 2, g->y0 + 50);
}

/* The legend, two rows under the axis: the plan's three tiers, then the
 * lines and marks. */
static void svg_legend(FILE *f, const struct tl *g) {
    static const struct item {
        const char *kind; /* "fill", "line", "budget", "late" */
        const char *color;
        const char *text;
    } items[] = {
        {"fill", "#90caf9", "with the plan: on the device"},
        {"fill", "#ffcc80", "with the plan: on the host tier"},
        {"fill", "#b39ddb", "with the plan: on the NVMe tier"},
        {"line", "#757575", "without offload"},
        {"line", "#0d47a1", "replay on sim (measured)"},
        {"budget", "#d32f2f", "budget"},
        {"late", "#d32f2f", "late prefetch"},
    };
    int n = (int)(sizeof items / sizeof items[0]), k;

    for (k = 0; k < n; k++) {
        int row = k < 3 ? 0 : 1, col = k < 3 ? k : k - 3;
        double lx = g->x0 + col * (row ? g->pw / 4 : g->pw / 3), yy = g->y0 + 78 + row * 24;

        if (!strcmp(items[k].kind, "fill"))
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"22\" height=\"12\" fill=\"%s\"/>", lx, yy - 10,
                    items[k].color);
        else if (!strcmp(items[k].kind, "late"))
            fprintf(f, "<path d=\"M%.1f,%.1f l-5,9 l10,0 Z\" fill=\"%s\"/>", lx + 11, yy - 10, items[k].color);
        else
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s/>", lx,
                    yy - 4, lx + 22, yy - 4, items[k].color,
                    !strcmp(items[k].kind, "budget") ? " stroke-dasharray=\"10,5\"" : "");
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", lx + 30, yy);
        xml_text(f, items[k].text);
        if (!strcmp(items[k].kind, "late"))
            fprintf(f, " (%zu at %zu events)", g->late_total, g->nlate);
        else if (!strcmp(items[k].kind, "budget"))
            fprintf(f, " %s", g->p.ht.budget ? SZ(g->p.ht.budget) : "(none)");
        else if (k == 2 && !g->p.last.spills)
            fprintf(f, "%s", g->p.a.host_cap ? " (none)" : " (none: no host cap)");
        fprintf(f, "</text>\n");
    }
}

/* Write the picture to its file (replaced only when complete).  0 or -1 (reported). */
static int write_svg(const struct tl *g) {
    struct hoff__outfile of;
    FILE *f;

    if (hoff__out_open(&of, g->p.a.output) < 0) {
        fprintf(stderr, "%s timeline: %s\n", hp_cmd, hoff_last_error());
        return -1;
    }
    f = of.f;
    svg_head(f, g);
    svg_plot(f, g);
    svg_budget(f, g);
    svg_axes(f, g);
    svg_legend(f, g);
    fprintf(f, "</svg>\n");
    if (hoff__out_commit(&of) < 0) {
        fprintf(stderr, "%s timeline: %s\n", hp_cmd, hoff_last_error());
        return -1;
    }
    return 0;
}

int hp_cmd_timeline(int argc, char **argv) {
    struct tl g;
    int rc, exit_code = EXIT_FAIL;
    size_t k;

    memset(&g, 0, sizeof g);
    rc = pic_setup(&g.p, "timeline", argc, argv, HP_F(OUTPUT) | HP_F(WIDTH) | HP_F(HEIGHT), HP_F(OUTPUT),
                   "-o FILE.svg is required", usage);
    if (rc)
        return rc == HP_HELP_SHOWN ? 0 : rc;
    g.nev = g.p.ht.t.nev;
    g.last = g.p.rec.steps - 1;
    g.W = (double)g.p.a.width;
    g.H = (double)g.p.a.height;
    g.L = 96;
    g.R = 24;
    g.T = 74;
    g.B = 150;
    if (g.nev == 0)
        fprintf(stderr, "%s timeline: %s has no events\n", hp_cmd, g.p.a.trace_path);
    else if (series(&g) || columns(&g))
        fprintf(stderr, "%s timeline: out of memory\n", hp_cmd);
    else if (write_svg(&g) == 0) {
        printf("%s: %zu events, budget %s, peak %s without offload; %zu late prefetches in the last step\n",
               g.p.a.output, g.nev, SZ(g.p.ht.budget), SZ(g.p.ht.offload_peak), g.late_total);
        exit_code = 0;
    }
    for (k = 0; k < S_COUNT; k++) {
        free(g.ev[k]);
        free(g.col[k]);
    }
    pic_free(&g.p);
    return exit_code;
}
