#!/usr/bin/env python3
"""Plots and tabulates benchmark records: imgpipe's and the peers', plus an imgpipe trace.

Inputs:
- one or more JSON Lines files of benchmark records (the schema of bench/peers/common.py, which
  `imgpipe bench ... --json` also writes, with "copy_limit_mpix_per_s" and
  "fraction_of_copy_limit" added); lines that are not such records are skipped with a warning;
- optionally a Chrome trace-event file from `imgpipe ... --trace` (a JSON array, possibly without
  its closing bracket, or an object with "traceEvents").

Outputs, in --out (default bench/results), named <device>-<date>:
- <name>.md: tables of the best configuration of each system, the sweeps, and trace totals;
- <name>-throughput.png: throughput by system, with a line at the copy-engine limit;
- <name>-streams.png and <name>-batch.png: throughput against streams and against batch size;
- <name>-timeline.png: a Gantt chart per track (stream or worker) with H2D, kernels, D2H, decode
  and save in different colours.
"""

import argparse
import collections
import datetime
import json
import math
import os
import re
import statistics
import sys

REQUIRED = ("system", "mode", "device", "img_per_s", "mpix_per_s", "median_s", "streams", "batch")
PHASE_COLOURS = {"H2D": "#1f77b4", "kernel": "#2ca02c", "D2H": "#d62728", "decode": "#9467bd", "save": "#ff7f0e", "host": "#7f7f7f"}


class InputError(Exception):
    """An input file that cannot be used at all; the message names the file."""


# ---------------------------------------------------------------------------------------------
# Records


def load_records(paths):
    """Reads JSON Lines benchmark records; skips (with a warning) lines that are not records."""
    recs = []
    for path in paths:
        try:
            f = open(path, encoding="utf-8")
        except OSError as e:
            raise InputError(f"{path}: {e.strerror}") from None
        with f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    r = json.loads(line)
                except json.JSONDecodeError as e:
                    print(f"warning: {path}:{n}: not JSON ({e.msg}); skipped", file=sys.stderr)
                    continue
                missing = [k for k in REQUIRED if not isinstance(r, dict) or k not in r]
                if missing:
                    print(f"warning: {path}:{n}: not a benchmark record (no {', '.join(missing)}); skipped", file=sys.stderr)
                    continue
                if not all(isinstance(r[k], (int, float)) and r[k] >= 0 for k in ("img_per_s", "mpix_per_s", "median_s")):
                    print(f"warning: {path}:{n}: throughput fields are not non-negative numbers; skipped", file=sys.stderr)
                    continue
                r["_src"] = f"{path}:{n}"
                recs.append(r)
    if not recs:
        raise InputError("no benchmark records in " + ", ".join(paths))
    return recs


def config_label(r):
    """A short description of the configuration a record was measured with."""
    parts = []
    s, t = r.get("streams"), r.get("threads")
    if s and not (t and s == 1):  # a CPU peer reports streams 1: its threads say more
        parts.append(f"{s} stream{'s' if s != 1 else ''}")
    if t:
        parts.append(f"{t} threads")
    if r.get("batch"):
        parts.append(f"batch {r['batch']}")
    return ", ".join(parts)


def best_by_system(recs, mode):
    """For each system, the record of mode with the highest throughput (its best configuration)."""
    best = {}
    for r in recs:
        if r["mode"] != mode:
            continue
        key = r["system"]
        if key not in best or r["mpix_per_s"] > best[key]["mpix_per_s"]:
            best[key] = r
    # imgpipe first, then by throughput
    return sorted(best.values(), key=lambda r: (r["system"] != "imgpipe", -r["mpix_per_s"]))


def copy_limit(recs):
    """The copy-engine limit in MP/s that imgpipe measured (median over its raw records), or None."""
    vals = [r["copy_limit_mpix_per_s"] for r in recs if isinstance(r.get("copy_limit_mpix_per_s"), (int, float)) and r["copy_limit_mpix_per_s"] > 0]
    return statistics.median(vals) if vals else None


def sweep(recs, system, mode, vary, fixed):
    """Points (x, MP/s) of one system over `vary`, at the `fixed` value of the other knob."""
    other = "batch" if vary == "streams" else "streams"
    pts = {}
    for r in recs:
        if r["system"] == system and r["mode"] == mode and r.get(other) == fixed:
            x = r[vary]
            pts[x] = max(pts.get(x, 0), r["mpix_per_s"])
    return sorted(pts.items())


def sweep_fixed(recs, mode, vary):
    """The value of the other knob at which the most records vary `vary` (imgpipe's, if any);
    among equals, the one of the fastest record, so a full grid is shown through its best point."""
    other = "batch" if vary == "streams" else "streams"
    for pool in ([r for r in recs if r["system"] == "imgpipe"], recs):
        seen, best = collections.defaultdict(set), collections.defaultdict(float)
        for r in pool:
            if r["mode"] == mode:
                seen[r.get(other)].add(r[vary])
                best[r.get(other)] = max(best[r.get(other)], r["mpix_per_s"])
        seen = {k: v for k, v in seen.items() if len(v) >= 2}
        if seen:
            return max(seen, key=lambda k: (len(seen[k]), best[k]))
    return None


def device_of(recs):
    """The GPU the records were measured on: imgpipe's device, or the commonest peer's GPU."""
    for r in recs:
        if r["system"] == "imgpipe" and r.get("device"):
            return r["device"]
    gpus = [r["device"] for r in recs if r.get("device") and not re.search(r"\bcores\)$|Xeon|EPYC|Core\(TM\)", r["device"])]
    if gpus:
        return collections.Counter(gpus).most_common(1)[0][0]
    return recs[0].get("device") or "unknown"


def slug(s):
    """A file-name-safe lowercase version of s."""
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-") or "unknown"


# ---------------------------------------------------------------------------------------------
# Trace


def load_trace(path):
    """Reads Chrome trace events; tolerates a missing closing bracket, as chrome://tracing does."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        t = text.rstrip().rstrip(",")
        try:
            data = json.loads(t + "]") if t.startswith("[") else None
        except json.JSONDecodeError:
            data = None
        if data is None:
            raise InputError(f"{path}: not a Chrome trace-event JSON file") from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise InputError(f"{path}: no trace events")
    return events


def phase_of(name, track=""):
    """The phase of a span: H2D, D2H, decode and save by name; any other span on a GPU stream's
    track is a kernel; anything else (the executor's submit spans, CPU stages) is host work."""
    n = (name or "").lower()
    for p in ("h2d", "d2h", "decode", "save"):
        if n == p or n.startswith(p + " ") or n.startswith(p + ":"):
            return {"h2d": "H2D", "d2h": "D2H"}.get(p, p)
    return "kernel" if "stream" in (track or "").lower() else "host"


def trace_tracks(events):
    """Groups complete ("X") spans by (pid, tid) track: {track name: [(start, dur, phase, name)]}."""
    names = {}
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e.get("pid"), e.get("tid"))] = str((e.get("args") or {}).get("name", e.get("tid")))
    tracks = collections.defaultdict(list)
    bad = 0
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        ts, dur = e.get("ts"), e.get("dur", 0)
        if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)) or dur < 0:
            bad += 1
            continue
        key = (e.get("pid"), e.get("tid"))
        track = names.get(key, f"tid {key[1]}")
        tracks[track].append((ts / 1e3, dur / 1e3, phase_of(e.get("name"), track), e.get("name")))
    if bad:
        print(f"warning: {bad} trace events without a numeric ts/dur were skipped", file=sys.stderr)
    return dict(tracks)


def track_order(name):
    """Streams first (in number order), then decode workers, save workers, anything else."""
    nums = re.findall(r"\d+", name)  # the last number: "NVIDIA H200 stream 3" is stream 3
    num = int(nums[-1]) if nums else 0
    low = name.lower()
    rank = 0 if "stream" in low else 1 if "submit" in low else 2 if "decode" in low else 3 if "save" in low else 4
    return (rank, re.sub(r"\d+", "#", low), num)


def overlap_stats(tracks):
    """Totals per phase (ms), the GPU wall time, and wall / max(sum H2D, sum kernels, sum D2H)."""
    tot = collections.Counter()
    lo, hi = math.inf, -math.inf
    for spans in tracks.values():
        for s, d, ph, _ in spans:
            tot[ph] += d
            if ph in ("H2D", "kernel", "D2H"):
                lo, hi = min(lo, s), max(hi, s + d)
    busiest = max(tot["H2D"], tot["kernel"], tot["D2H"])
    wall = hi - lo if hi > lo else 0.0
    return dict(totals_ms=dict(tot), gpu_wall_ms=wall, overlap_efficiency=(wall / busiest) if busiest > 0 else None)


# ---------------------------------------------------------------------------------------------
# Plots


def plot_throughput(plt, recs, path, title):
    """Bars of the best MP/s per system (raw) and img/s (files), with the copy-engine limit."""
    raw, files = best_by_system(recs, "raw"), best_by_system(recs, "files")
    panels = [(m, rs) for m, rs in (("raw", raw), ("files", files)) if rs]
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.8), squeeze=False)
    limit = copy_limit(recs)
    for ax, (mode, rs) in zip(axes[0], panels):
        key, unit = ("mpix_per_s", "MP/s") if mode == "raw" else ("img_per_s", "images/s")
        vals = [r[key] for r in rs]
        colours = ["#d62728" if r["system"] == "imgpipe" else "#7f7f7f" for r in rs]
        bars = ax.bar(range(len(rs)), vals, color=colours)
        ax.set_xticks(range(len(rs)))
        ax.set_xticklabels([f"{r['system']}\n{config_label(r)}" for r in rs], rotation=30, ha="right", fontsize=8)
        for b, v in zip(bars, vals):
            ax.annotate(f"{v:,.0f}", (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom", fontsize=8)
        ax.set_ylabel(unit)
        ax.set_title("raw frames, best configuration" if mode == "raw" else "folder of photos")
        if mode == "raw" and limit:
            ax.axhline(limit, color="black", linestyle="--", linewidth=1)
            ax.annotate(f"copy-engine limit {limit:,.0f} MP/s", (len(rs) - 0.5, limit), ha="right", va="bottom", fontsize=8)
            ax.set_ylim(0, max(max(vals), limit) * 1.15)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_sweep(plt, recs, vary, path, title):
    """MP/s against streams or batch for every system measured at several values; False if none."""
    fig = sweep_figure(plt, recs, vary, title)
    if fig is None:
        return False
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def sweep_figure(plt, recs, vary, title):
    """The figure plot_sweep saves (tests inspect its axes), or None when nothing varies."""
    fixed = sweep_fixed(recs, "raw", vary)
    if fixed is None:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    # The ticks are the swept values themselves, taken from the points drawn: never from the
    # axes' lines, which include the limit line, whose x data is axhline's [0, 1] in axes
    # coordinates (a 0 on a log axis squashed every point at the right edge).
    xs = set()
    for system in sorted({r["system"] for r in recs}, key=lambda s: (s != "imgpipe", s)):
        pts = sweep(recs, system, "raw", vary, fixed)
        if len(pts) < 2:
            continue
        px, py = zip(*pts)
        ax.plot(px, py, marker="o", label=system, linewidth=2.5 if system == "imgpipe" else 1.2)
        xs.update(px)
    if not xs:
        plt.close(fig)
        return None
    limit = copy_limit(recs)
    if limit:
        ax.axhline(limit, color="black", linestyle="--", linewidth=1, label="copy-engine limit")
    ax.set_xscale("log", base=2)
    xs = sorted(xs)
    # A margin of a quarter of an octave each side keeps the end points off the frame.
    ax.set_xlim(xs[0] / 2 ** 0.25, xs[-1] * 2 ** 0.25)
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{x:g}" for x in xs])
    ax.minorticks_off()
    ax.set_xlabel(vary)
    ax.set_ylabel("MP/s")
    other = "batch" if vary == "streams" else "streams"
    ax.set_title(f"{title}: throughput against {vary} ({other} {fixed})")
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def pick_window(tracks, window):
    """The (start, end) in ms to draw: the given window, all of a small trace, or its middle."""
    spans = [(s, d) for v in tracks.values() for s, d, _, _ in v]
    lo, hi = min(s for s, _ in spans), max(s + d for s, d in spans)
    if window:
        return window
    per_track = len(spans) / max(1, len(tracks))
    if per_track <= 40:  # about 10 batches per stream stay legible
        return lo, hi
    width = (hi - lo) * 40 / per_track
    mid = (lo + hi) / 2
    return mid - width / 2, mid + width / 2


def plot_timeline(plt, tracks, path, title, window=None):
    """A Gantt chart: one row per track, one coloured bar per span inside the window."""
    from matplotlib.patches import Patch

    names = sorted(tracks, key=track_order)
    t0, t1 = pick_window(tracks, window)
    fig, ax = plt.subplots(figsize=(12, 0.45 * len(names) + 1.8))
    for row, name in enumerate(names):
        by_phase = collections.defaultdict(list)
        for s, d, ph, _ in tracks[name]:
            if s + d >= t0 and s <= t1:
                by_phase[ph].append((s - t0, max(d, (t1 - t0) * 1e-4)))
        for ph, bars in by_phase.items():
            ax.broken_barh(bars, (row - 0.38, 0.76), facecolors=PHASE_COLOURS.get(ph, "#8c564b"), edgecolor="none")
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, t1 - t0)
    ax.set_xlabel(f"ms (from {t0:.1f} ms into the trace)")
    used = {ph for v in tracks.values() for _, _, ph, _ in v}
    ax.legend(handles=[Patch(color=c, label=p) for p, c in PHASE_COLOURS.items() if p in used], loc="lower right", bbox_to_anchor=(1.0, 1.0), fontsize=8, ncol=5, frameon=False)
    ax.set_title(title, loc="left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return t0, t1


# ---------------------------------------------------------------------------------------------
# Markdown


def fmt(v, nd=0):
    return "" if v is None else f"{v:,.{nd}f}"


def table(rows, header):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c).replace("|", "/") for c in r) + " |")
    return "\n".join(out)


def markdown(recs, device, date, plots, trace_info):
    """The results page: best configurations, ratios to imgpipe, sweeps and trace totals."""
    limit = copy_limit(recs)
    chains = sorted({r.get("chain", "?") for r in recs})
    sizes = sorted({f"{r['width']}x{r['height']}" for r in recs if r["mode"] == "raw" and r.get("width")})
    lines = [f"# imgpipe benchmarks: {device}, {date}", ""]
    lines.append(f"Chain: `{'`, `'.join(chains)}`. Raw frame size: {', '.join(sizes) or 'n/a'}. "
                 "Each figure is the median of the repeats of one run; ratios are between records of this run.")
    if limit:
        lines.append(f"Copy-engine limit measured by imgpipe: {limit:,.0f} MP/s.")
    lines.append("")
    for mode, title in (("raw", "Raw frames (best configuration of each system)"), ("files", "Folder of photos")):
        best = best_by_system(recs, mode)
        if not best:
            continue
        ref = next((r for r in best if r["system"] == "imgpipe"), None)
        rows = []
        for r in best:
            frac = r.get("fraction_of_copy_limit")
            if frac is None and limit and mode == "raw":
                frac = r["mpix_per_s"] / limit
            rows.append([
                r["system"], r.get("device", ""), config_label(r), fmt(r["img_per_s"], 1), fmt(r["mpix_per_s"]),
                f"{r['mpix_per_s'] / ref['mpix_per_s']:.2f}" if ref and ref["mpix_per_s"] > 0 else "",
                f"{100 * frac:.0f}%" if frac is not None and mode == "raw" else "",
                "yes" if r.get("exact") else "no", r.get("note", ""),
            ])
        lines += [f"## {title}", "", table(rows, ["system", "device", "config", "img/s", "MP/s", "vs imgpipe", "of copy limit", "exact", "note"]), ""]
    sw = [r for r in recs if r["mode"] == "raw"]
    by_sys = collections.defaultdict(list)
    for r in sw:
        by_sys[r["system"]].append(r)
    sweep_rows = []
    for system, rs in sorted(by_sys.items(), key=lambda kv: (kv[0] != "imgpipe", kv[0])):
        if len(rs) < 2:
            continue
        for r in sorted(rs, key=lambda r: (r.get("streams") or 0, r.get("batch") or 0)):
            sweep_rows.append([system, r.get("streams"), r.get("batch"), fmt(r["mpix_per_s"]), fmt(r["img_per_s"], 1)])
    if sweep_rows:
        lines += ["## Sweeps (raw frames)", "", table(sweep_rows, ["system", "streams", "batch", "MP/s", "img/s"]), ""]
    if trace_info:
        st, (t0, t1), path = trace_info
        tot = st["totals_ms"]
        rows = [[ph, fmt(tot.get(ph), 1)] for ph in ("H2D", "kernel", "D2H", "decode", "save", "host") if ph in tot]
        lines += ["## Trace", "", f"From `{path}`; the timeline shows {t0:.1f}-{t1:.1f} ms.", "",
                  table(rows, ["phase", "total ms (all tracks)"]), ""]
        if st["overlap_efficiency"] is not None:
            lines.append(f"GPU wall {st['gpu_wall_ms']:.1f} ms; overlap efficiency wall / max(ΣH2D, Σkernels, ΣD2H) = "
                         f"{st['overlap_efficiency']:.3f} (1.0 is perfect overlap).")
            lines.append("")
    if plots:
        lines += ["## Plots", ""] + [f"![{os.path.basename(p)}]({os.path.basename(p)})" for p in plots] + [""]
    srcs = sorted({r["_src"].rsplit(":", 1)[0] for r in recs})
    lines += [f"Records: {len(recs)} from {', '.join(f'`{s}`' for s in srcs)}.", ""]
    return "\n".join(lines)


def parse_window(s):
    try:
        a, b = (float(v) for v in s.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"window must be START_MS:END_MS, got {s!r}") from None
    if b <= a:
        raise argparse.ArgumentTypeError(f"window end must be after its start, got {s!r}")
    return a, b


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", nargs="+", help="JSON Lines files of benchmark records")
    ap.add_argument("--trace", help="Chrome trace-event JSON from imgpipe --trace")
    ap.add_argument("--trace-window", type=parse_window, help="START_MS:END_MS of the timeline (default: automatic)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "results"), help="output folder (default bench/results)")
    ap.add_argument("--date", default=datetime.date.today().isoformat(), help="date in the file names (default today)")
    ap.add_argument("--device", help="device name for the title and file names (default: from the records)")
    a = ap.parse_args(argv)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("error: matplotlib is missing (Debian: apt-get install -y python3-matplotlib)", file=sys.stderr)
        return 1
    try:
        recs = load_records(a.records)
        tracks = trace_tracks(load_trace(a.trace)) if a.trace else None
        if a.trace and not tracks:
            raise InputError(f"{a.trace}: no complete (\"X\") spans to draw")
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    device = a.device or device_of(recs)
    name = f"{slug(device)}-{a.date}"
    out = os.path.normpath(a.out)
    os.makedirs(out, exist_ok=True)
    plots = []
    p = os.path.join(out, f"{name}-throughput.png")
    plot_throughput(plt, recs, p, f"{device}, {a.date}")
    plots.append(p)
    for vary in ("streams", "batch"):
        p = os.path.join(out, f"{name}-{vary}.png")
        if plot_sweep(plt, recs, vary, p, device):
            plots.append(p)
        else:
            print(f"note: no system was measured at several {vary} values; {os.path.basename(p)} not drawn", file=sys.stderr)
    trace_info = None
    if tracks:
        p = os.path.join(out, f"{name}-timeline.png")
        win = plot_timeline(plt, tracks, p, f"imgpipe trace, {device}", a.trace_window)
        plots.append(p)
        trace_info = (overlap_stats(tracks), win, a.trace)
    md = os.path.join(out, f"{name}.md")
    with open(md, "w", encoding="utf-8") as f:
        f.write(markdown(recs, device, a.date, plots, trace_info))
    for p in [md] + plots:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
