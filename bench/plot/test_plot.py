"""Tests of plot.py on inputs made up here (never real results): python3 -m unittest in bench/plot."""

import io
import json
import math
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import plot  # noqa: E402

DEV = "NVIDIA H200"


def rec(system, mpix, streams=4, batch=16, mode="raw", **kw):
    r = dict(system=system, mode=mode, device=kw.pop("device", DEV), chain="gray|blur1.5|transpose|hist",
             width=1920 if mode == "raw" else None, height=1080 if mode == "raw" else None, frames=1024,
             batch=batch, streams=streams, median_s=1024 * 2.0736 / mpix, runs_s=[1.0], img_per_s=mpix / 2.0736,
             mpix_per_s=mpix, exact=True, note="made up")
    r.update(kw)
    return r


def sample_records():
    rs = [rec("imgpipe", 14000 + 500 * s, streams=s, copy_limit_mpix_per_s=18400.0) for s in (1, 2, 4, 8)]
    rs += [rec("imgpipe", 12000 + 100 * b, batch=b, copy_limit_mpix_per_s=18400.0) for b in (4, 8, 32)]
    rs += [rec("pytorch-tuned", 6000 + 300 * s, streams=s) for s in (1, 2, 4, 8)]
    rs += [rec("pytorch-naive", 900, streams=1), rec("cupy-rawkernel", 11000)]
    rs += [rec("opencv-cpu", 300, streams=1, batch=1, device="Xeon (16 cores)", threads=16, exact=False)]
    rs += [rec("imgpipe", 400, mode="files", copy_limit_mpix_per_s=18400.0), rec("torchvision-nvjpeg", 350, mode="files")]
    return rs


def sample_trace(streams=4, batches=40, truncated=False):
    ev = []
    for s in range(streams):
        ev.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": s + 1, "args": {"name": f"NVIDIA H200 stream {s}"}})
    ev.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": 99, "args": {"name": "save 0"}})
    for k in range(batches):
        s = k % streams
        t = 2000.0 * k / streams  # a stream's batches 2 ms apart, each 1.8 ms long
        for name, d in (("H2D", 900.0), ("gray_hblur", 300.0), ("vblur_t_hist", 300.0), ("D2H", 300.0)):
            ev.append({"name": name, "ph": "X", "ts": t, "dur": d, "pid": 1, "tid": s + 1})
            t += d
        ev.append({"name": "save", "ph": "X", "ts": t, "dur": 200.0, "pid": 1, "tid": 99})
    text = json.dumps(ev)
    return text[:-1] + ",\n" if truncated else text


class PlotTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def write(self, name, text):
        p = os.path.join(self.dir, name)
        with open(p, "w") as f:
            f.write(text)
        return p

    def run_main(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            rc = plot.main(list(argv))
        return rc, out.getvalue(), err.getvalue()

    def test_full_run_writes_table_and_plots(self):
        recs = self.write("r.jsonl", "\n".join(json.dumps(r) for r in sample_records()) + "\nnot json\n{\"x\": 1}\n")
        trace = self.write("t.json", sample_trace())
        rc, out, err = self.run_main(recs, "--trace", trace, "--out", self.dir, "--date", "2026-11-21")
        self.assertEqual(rc, 0, err)
        name = "nvidia-h200-2026-11-21"
        for suffix in (".md", "-throughput.png", "-streams.png", "-batch.png", "-timeline.png"):
            p = os.path.join(self.dir, name + suffix)
            self.assertTrue(os.path.getsize(p) > 1000, p)
        self.assertIn("not JSON", err)
        self.assertIn("not a benchmark record", err)
        with open(os.path.join(self.dir, name + ".md")) as f:
            md = f.read()
        # best imgpipe raw config is streams 8 at 18000 MP/s; pytorch-tuned's best is 8400
        self.assertIn("| imgpipe | NVIDIA H200 | 8 streams, batch 16 |", md)
        self.assertIn("| 8,400 | 0.47 |", md)
        self.assertIn("Copy-engine limit measured by imgpipe: 18,400 MP/s.", md)
        self.assertIn("## Folder of photos", md)
        self.assertIn("16 threads", md)
        self.assertIn("overlap efficiency", md)

    def test_overlap_stats(self):
        tracks = plot.trace_tracks(json.loads(sample_trace(streams=4, batches=40)))
        st = plot.overlap_stats(tracks)
        self.assertAlmostEqual(st["totals_ms"]["H2D"], 40 * 0.9)
        self.assertAlmostEqual(st["totals_ms"]["kernel"], 40 * 0.6)
        self.assertAlmostEqual(st["totals_ms"]["save"], 40 * 0.2)
        # last batch starts at 19.5 ms and takes 1.8 ms: wall 21.3 ms over 36 ms of H2D
        self.assertAlmostEqual(st["gpu_wall_ms"], 21.3)
        self.assertAlmostEqual(st["overlap_efficiency"], 21.3 / 36)

    def test_truncated_trace_is_read(self):
        p = self.write("t.json", sample_trace(truncated=True))
        self.assertEqual(len(plot.trace_tracks(plot.load_trace(p))), 5)

    def test_trace_object_form_and_names(self):
        p = self.write("t.json", json.dumps({"traceEvents": json.loads(sample_trace(streams=2, batches=2))}))
        tracks = plot.trace_tracks(plot.load_trace(p))
        self.assertEqual(sorted(tracks, key=plot.track_order), ["NVIDIA H200 stream 0", "NVIDIA H200 stream 1", "save 0"])
        self.assertEqual([ph for _, _, ph, _ in tracks["NVIDIA H200 stream 0"]], ["H2D", "kernel", "kernel", "D2H"])

    def test_track_order(self):
        names = ["worker 2", "save 1", "NVIDIA H200 stream 10", "decode 0", "NVIDIA H200 submit", "NVIDIA H200 stream 2", "worker 10"]
        self.assertEqual(sorted(names, key=plot.track_order), [
            "NVIDIA H200 stream 2", "NVIDIA H200 stream 10", "NVIDIA H200 submit", "decode 0", "save 1", "worker 2", "worker 10"])

    def test_phase_names(self):
        gpu, host = "NVIDIA H200 stream 1", "worker 3"
        cases = [("H2D", gpu, "H2D"), ("d2h", gpu, "D2H"), ("decode", host, "decode"), ("save", host, "save"),
                 ("blur_v", gpu, "kernel"), ("h2d: slot 3", gpu, "H2D"), ("saver", gpu, "kernel"), (None, gpu, "kernel"),
                 ("submit", "NVIDIA H200 submit", "host"), ("blur", host, "host"), ("grayscale", "", "host")]
        for name, track, want in cases:
            self.assertEqual(plot.phase_of(name, track), want, (name, track))

    def test_errors(self):
        cases = [
            (["/nonexistent.jsonl"], "No such file"),
            ([self.write("empty.jsonl", "\n\n")], "no benchmark records"),
            ([self.write("r.jsonl", json.dumps(rec("imgpipe", 1.0))), "--trace", self.write("bad.json", "{oops")], "not a Chrome trace"),
            ([self.write("r2.jsonl", json.dumps(rec("imgpipe", 1.0))), "--trace", self.write("m.json", '[{"ph":"M","name":"thread_name"}]')], "no complete"),
        ]
        for argv, msg in cases:
            rc, _, err = self.run_main(*argv, "--out", self.dir)
            self.assertEqual(rc, 1, argv)
            self.assertIn(msg, err)

    def test_bad_record_values_skipped(self):
        r = rec("imgpipe", 10.0)
        r["mpix_per_s"] = "fast"
        p = self.write("r.jsonl", json.dumps(r) + "\n" + json.dumps(rec("x", 5.0)))
        with redirect_stderr(io.StringIO()) as err:
            recs = plot.load_records([p])
        self.assertEqual([x["system"] for x in recs], ["x"])
        self.assertIn("not non-negative numbers", err.getvalue())

    def test_window_option(self):
        self.assertEqual(plot.parse_window("1.5:20"), (1.5, 20.0))
        for bad in ("5", "a:b", "3:1"):
            with self.assertRaises(Exception):
                plot.parse_window(bad)

    def test_sweep_axes(self):
        # The bug this guards against: the ticks came from every line of the axes, the
        # copy-limit line's x data [0, 1] included, so a log axis spanned 0..8 and squashed
        # every point at its right edge.
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        # (the lowest point: pytorch-tuned at 1 stream, imgpipe at batch 4)
        for vary, want, lowest in (("streams", [1, 2, 4, 8], 6300), ("batch", [4, 8, 16, 32], 12400)):
            fig = plot.sweep_figure(plt, sample_records(), vary, DEV)
            try:
                ax = fig.axes[0]
                self.assertEqual(ax.get_xscale(), "log")
                self.assertEqual(list(ax.get_xticks()), want, vary)
                self.assertEqual([t.get_text() for t in ax.get_xticklabels()], [str(x) for x in want])
                lo, hi = ax.get_xlim()
                self.assertTrue(want[0] / 2 < lo < want[0] and want[-1] < hi < want[-1] * 2, (vary, lo, hi))
                # Every point lies inside the limits, well away from the edges (in log space).
                span = math.log2(hi) - math.log2(lo)
                for line in ax.get_lines():
                    if line.get_label() == "copy-engine limit":
                        continue
                    for x in line.get_xdata():
                        pos = (math.log2(x) - math.log2(lo)) / span
                        self.assertTrue(0.02 < pos < 0.98, (vary, line.get_label(), x, pos))
                ylo, yhi = ax.get_ylim()
                self.assertLessEqual(ylo, lowest)
                self.assertGreaterEqual(yhi, 18400)  # the copy limit is in view
            finally:
                plt.close(fig)

    def test_sweep_fixed_prefers_the_best_point(self):
        # A full 2×2 grid: both batches vary streams twice; the fastest record is at batch 32.
        grid = [rec("imgpipe", 100 + s + (50 if b == 32 else 0), streams=s, batch=b) for s in (1, 2) for b in (16, 32)]
        self.assertEqual(plot.sweep_fixed(grid, "raw", "streams"), 32)
        self.assertEqual(plot.sweep_fixed(grid, "raw", "batch"), 2)

    def test_sweep_without_variation_is_skipped(self):
        p = self.write("r.jsonl", json.dumps(rec("imgpipe", 10.0)))
        rc, out, err = self.run_main(p, "--out", self.dir, "--date", "d")
        self.assertEqual(rc, 0, err)
        self.assertIn("streams.png not drawn", err)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "nvidia-h200-d-streams.png")))

    def test_config_label(self):
        self.assertEqual(plot.config_label(rec("a", 1.0, streams=1)), "1 stream, batch 16")
        self.assertEqual(plot.config_label(rec("a", 1.0, streams=1, batch=1, threads=16)), "16 threads, batch 1")
        self.assertEqual(plot.config_label(rec("a", 1.0, streams=2, threads=16)), "2 streams, 16 threads, batch 16")

    def test_device_and_slug(self):
        self.assertEqual(plot.slug("NVIDIA H100 80GB HBM3"), "nvidia-h100-80gb-hbm3")
        recs = [rec("opencv-cpu", 1.0, device="Intel(R) Xeon(R) Processor @ 2.30GHz (2 cores)"), rec("pytorch-tuned", 1.0)]
        self.assertEqual(plot.device_of(recs), DEV)


if __name__ == "__main__":
    unittest.main()
