package cudastage

import (
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/userkernel"
	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/array"
)

// TestKernelConstants checks that the Go tiling constants are the numbers the
// kernels were written with: every IMGPIPE_* macro of the kernel sources
// (kernels/*.cu and *.cuh) must be mirrored here with the same value, so the
// two cannot drift apart; and every kernel a launcher launches must be an
// extern "C" __global__ function of its stage's kernels/<stage>.cu.
func TestKernelConstants(t *testing.T) {
	cuFiles, err := filepath.Glob("../kernels/*.cu")
	if err != nil {
		t.Fatal(err)
	}
	cuh, err := filepath.Glob("../kernels/*.cuh")
	if err != nil {
		t.Fatal(err)
	}
	files := append(cuFiles, cuh...)
	if len(cuFiles) == 0 || len(cuh) == 0 {
		t.Fatalf("kernel sources: %v", files)
	}
	want := map[string]int{
		"THREADS":         kThreads,
		"GRAY_PIXELS":     kGrayPixels,
		"IMG_BYTES":       kImgBytes,
		"HIST_GROUPS":     kHistGroups,
		"TR_TILE_Y":       kTrTileY,
		"TR_TILE_X1":      kTrTileX1,
		"TR_TILE_X3":      kTrTileX3,
		"H_TILE":          kHTile,
		"H_ROWS":          kHRows,
		"V_TILE_X":        kVTileX,
		"V_TILE_Y":        kVTileY,
		"MAX_BLUR_RADIUS": kMaxBlurRadius,
		"MAX_BOX_RADIUS":  kMaxBoxRadius,
		"PNG_BLOCK":       kPngBlock,
		"PNG_REC_BYTES":   kPngRecBytes,
		"PNG_STAGE_BYTES": kPngStageBytes,
		"RESIZE_LANCZOS":  kResizeLanczos,
		"RESIZE_TILE_X":   kResizeTileX,
		"RESIZE_TILE_Y":   kResizeTileY,
		"RESIZE_RECORD":   kResizeRecord,
		"CROP_RECORD":     kCropRecord,
		"NAN_BITS":        kNaNBits,
		"JPEG_SUB_BITS":   jpegSubBits,
		"JPEG_BAD_SHORT":  jpegBadShort,
	}
	defineRe := regexp.MustCompile(`(?m)^[ \t]*#[ \t]*define[ \t]+IMGPIPE_(\w+)[ \t]+(\S+)`)
	globalRe := regexp.MustCompile(`extern "C" __global__ void(?:\s+__launch_bounds__\([^)]*\))?\s+(\w+)\s*\(`)
	definedIn := map[string]string{} // macro → file
	kernelIn := map[string]string{}  // kernel → file
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(f)
		for _, m := range defineRe.FindAllStringSubmatch(string(src), -1) {
			if prev, dup := definedIn[m[1]]; dup {
				t.Errorf("IMGPIPE_%s is defined in both %s and %s", m[1], prev, base)
			}
			definedIn[m[1]] = base
			v, err := strconv.Atoi(m[2])
			w, ok := want[m[1]]
			switch {
			case err != nil:
				t.Errorf("%s defines IMGPIPE_%s as %q, not a plain number the Go code can mirror", base, m[1], m[2])
			case !ok:
				t.Errorf("%s defines IMGPIPE_%s = %d, which the Go code does not mirror", base, m[1], v)
			case v != w:
				t.Errorf("IMGPIPE_%s is %d in %s but %d in the Go code", m[1], v, base, w)
			}
		}
		for _, m := range globalRe.FindAllStringSubmatch(string(src), -1) {
			if prev, dup := kernelIn[m[1]]; dup {
				t.Errorf("kernel %s is defined in both %s and %s", m[1], prev, base)
			}
			kernelIn[m[1]] = base
		}
	}
	for name := range want {
		if _, ok := definedIn[name]; !ok {
			t.Errorf("no kernel source defines IMGPIPE_%s", name)
		}
	}
	// The file decoder's orientation kernel is launched by Kernels.Orient.
	launched := map[string]bool{orientKernel: true}
	for _, k := range jpegKernels { // the turbo-cuda decoder's, launched by turboLaunch
		launched[k] = true
		if f := kernelIn[k]; f != "jpegdec.cu" {
			t.Errorf("kernel %s is in %q, want kernels/jpegdec.cu", k, f)
		}
	}
	if f := kernelIn[orientKernel]; f != "orient.cu" {
		t.Errorf("kernel %s is in %q, want kernels/orient.cu", orientKernel, f)
	}
	for _, stage := range slices.Sorted(maps.Keys(launchers)) {
		for _, p := range launchers[stage].passes {
			launched[p.kernel] = true
			file := stage + ".cu"
			if stage == "save" {
				file = "pngenc.cu" // save's GPU side is its png-fast encoder
			}
			switch f, ok := kernelIn[p.kernel]; {
			case !ok:
				t.Errorf("stage %s: no kernel source defines extern \"C\" __global__ %s", stage, p.kernel)
			case f != file:
				t.Errorf("stage %s: kernel %s is in %s, want kernels/%s", stage, p.kernel, f, file)
			}
		}
	}
	for _, stage := range slices.Sorted(maps.Keys(arrayLaunchers)) {
		for _, k := range arrayLaunchers[stage].kernels {
			launched[k] = true
			if f := kernelIn[k]; f != "array.cu" {
				t.Errorf("array stage %s: kernel %s is in %q, want kernels/array.cu", stage, k, f)
			}
		}
	}
	if kNaNBits != math.Float32bits(array.NaN) || kThreads != array.Block {
		t.Errorf("the array kernels' NaN %#x and block %d differ from package stages/array's %#x and %d",
			kNaNBits, kThreads, math.Float32bits(array.NaN), array.Block)
	}
	for k, f := range kernelIn {
		if !launched[k] {
			t.Errorf("%s defines kernel %s, which no launcher launches", f, k)
		}
	}

	// The kernels' limits must be those of package stages (Run copies the
	// taps into a fixed array of 2·kMaxBlurRadius+1) and those the launchers
	// check (TestLauncherFor has the cases on either side).
	maxTaps := 2*kMaxBlurRadius + 1
	if kMaxBoxRadius != stages.MaxBoxRadius || maxTaps != len(stages.BlurTaps(stages.MaxBlurSigma)) {
		t.Errorf("limits differ from package stages: box radius %d vs %d, blur taps %d vs %d",
			kMaxBoxRadius, stages.MaxBoxRadius, maxTaps, len(stages.BlurTaps(stages.MaxBlurSigma)))
	}
	longest := stages.BlurTaps(stages.MaxBlurSigma)
	if _, err := launcherFor(sched.Op{Name: "blur", Args: stages.BlurArgs{Taps: longest}}); err != nil {
		t.Errorf("blur launcher refuses the taps of sigma %d: %v", stages.MaxBlurSigma, err)
	}
	if _, err := launcherFor(sched.Op{Name: "boxblur", Args: stages.BoxBlurArgs{Radius: stages.MaxBoxRadius}}); err != nil {
		t.Errorf("boxblur launcher refuses radius %d: %v", stages.MaxBoxRadius, err)
	}
	if _, err := launcherFor(sched.Op{Name: "boxblur", Args: stages.BoxBlurArgs{Radius: stages.MaxBoxRadius + 1}}); err == nil {
		t.Errorf("boxblur launcher accepts radius %d", stages.MaxBoxRadius+1)
	}
	if len(tapsParam{}.W) != maxTaps {
		t.Errorf("tapsParam holds %d taps, want %d", len(tapsParam{}.W), maxTaps)
	}
}

// TestLauncherFor is the kernels' view of an op's arguments: every limit
// they rely on, checked by the stage's launcher (launcherFor, and through it
// Device.CheckOp and Batch.Check).
func TestLauncherFor(t *testing.T) {
	taps := stages.BlurTaps(1.5)
	asym := slices.Clone(taps)
	asym[0]++
	asym[len(asym)-2]-- // still sums to 16384
	heavy := slices.Clone(taps)
	heavy[len(heavy)/2]++
	tests := []struct {
		name string
		op   sched.Op
		err  string
	}{
		{"grayscale", opOf("grayscale"), ""},
		{"transpose", opOf("transpose"), ""},
		{"histogram", opOf("histogram"), ""},
		{"blur 0.5", opOf("blur sigma=0.5"), ""},
		{"blur 32", opOf("blur sigma=32"), ""},
		{"blur no taps", sched.Op{Name: "blur", Args: stages.BlurArgs{}}, "0 taps"},
		{"blur one tap", sched.Op{Name: "blur", Args: stages.BlurArgs{Taps: []uint32{16384}}}, "1 taps"},
		{"blur even taps", sched.Op{Name: "blur", Args: stages.BlurArgs{Taps: []uint32{8192, 8192}}}, "2 taps"},
		{"blur too long", sched.Op{Name: "blur", Args: stages.BlurArgs{Taps: make([]uint32, len(stages.BlurTaps(stages.MaxBlurSigma))+2)}}, "195 taps"},
		{"blur asymmetric", sched.Op{Name: "blur", Args: stages.BlurArgs{Taps: asym}}, "not symmetric"},
		{"blur bad sum", sched.Op{Name: "blur", Args: stages.BlurArgs{Taps: heavy}}, "sum to 16385"},
		{"box 0", opOf("boxblur radius=0"), ""},
		{"box 15", opOf("boxblur radius=15"), ""},
		{"box 0 by hand", sched.Op{Name: "boxblur", Args: stages.BoxBlurArgs{Radius: 0}}, ""},
		{"box 15 by hand", sched.Op{Name: "boxblur", Args: stages.BoxBlurArgs{Radius: 15}}, ""},
		{"box -1", sched.Op{Name: "boxblur", Args: stages.BoxBlurArgs{Radius: -1}}, "radius -1"},
		{"box 16", sched.Op{Name: "boxblur", Args: stages.BoxBlurArgs{Radius: 16}}, "radius 16"},
		{"unknown stage", sched.Op{Name: "sharpen", Spec: "sharpen amount=2"}, `stage "sharpen" has no GPU kernel`},
		{"host-only stage", sched.Op{Name: "decode"}, `stage "decode" has no GPU kernel`},
		{"zero", sched.Op{}, `stage "" has no GPU kernel`},
		{"args to grayscale", sched.Op{Name: "grayscale", Args: stages.BoxBlurArgs{Radius: 3}}, "grayscale: takes no launch arguments, got stages.BoxBlurArgs"},
		{"args to histogram", sched.Op{Name: "histogram", Args: stages.BlurArgs{Taps: []uint32{1}}}, "takes no launch arguments, got stages.BlurArgs"},
		{"typed nil args to transpose", sched.Op{Name: "transpose", Args: (*userkernel.Kernel)(nil)}, "takes no launch arguments"},
		{"blur boxblur args", sched.Op{Name: "blur", Spec: "blur sigma=1", Args: stages.BoxBlurArgs{Radius: 3}}, "blur sigma=1: launch arguments are stages.BoxBlurArgs, want stages.BlurArgs"},
		{"blur kernel args", sched.Op{Name: "blur", Args: &userkernel.Kernel{}}, "launch arguments are *userkernel.Kernel"},
		{"blur no args", sched.Op{Name: "blur"}, "launch arguments are <nil>"},
		{"box rotate args", sched.Op{Name: "boxblur", Args: stages.RotateArgs{Angle: 3}}, "launch arguments are stages.RotateArgs, want stages.BoxBlurArgs"},
		{"box no args", sched.Op{Name: "boxblur"}, "launch arguments are <nil>"},
		{"flip v", opOf("flip axis=v"), ""},
		{"flip bad axis", sched.Op{Name: "flip", Args: stages.FlipArgs{Axis: "d"}}, `flip axis "d"`},
		{"flip crop args", sched.Op{Name: "flip", Args: stages.CropArgs{}}, "launch arguments are stages.CropArgs, want stages.FlipArgs"},
		{"rotate 270", opOf("rotate angle=270"), ""},
		{"rotate 45", sched.Op{Name: "rotate", Args: stages.RotateArgs{Angle: 45}}, "rotate angle 45"},
		{"crop gravity", opOf("crop width=5 gravity=center"), ""},
		{"crop negative", sched.Op{Name: "crop", Args: stages.CropArgs{Spec: stages.CropSpec{X: -1}}}, "may be negative"},
		{"crop no args", sched.Op{Name: "crop"}, "launch arguments are <nil>"},
		{"resize cover", opOf("resize width=9 height=4 fit=cover filter=linear"), ""},
		{"resize no size", sched.Op{Name: "resize", Args: stages.ResizeArgs{Spec: stages.ResizeSpec{Fit: stages.FitExact, Filter: stages.FilterArea}}}, "give width, height or both"},
		{"resize bad filter", sched.Op{Name: "resize", Args: stages.ResizeArgs{Spec: stages.ResizeSpec{Width: 3, Fit: stages.FitExact, Filter: "cubic"}}}, `unknown filter "cubic"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := launcherFor(tc.op)
			checkErr(t, err, tc.err)
			if err == nil && l != launchers[tc.op.Name] {
				t.Errorf("launcherFor(%s) is not the launcher registered for %s", tc.op, tc.op.Name)
			}
			var d *Device // CheckOp needs no GPU
			checkErr(t, d.CheckOp(tc.op), tc.err)
		})
	}
}

// TestLauncherPasses checks the shape every launcher must have: the first
// pass reads the batch's source, the last writes its destination, passes in
// between go through scratch (and only then does the launcher ask for it),
// and functions that read the op's Args only exist where check validated
// them first.
func TestLauncherPasses(t *testing.T) {
	for _, name := range fatbinStages() {
		l := launchers[name]
		n := len(l.passes)
		if n == 0 {
			t.Errorf("%s: no passes", name)
			continue
		}
		usesScratch := false
		for i, p := range l.passes {
			wantSrc, wantDst := roleScratch, roleScratch
			if i == 0 || p.extra != nil { // a pass with extra buffers reads the source itself
				wantSrc = roleSrc
			}
			if i == n-1 || p.extra != nil {
				wantDst = roleDst
			}
			for _, r := range p.extra {
				usesScratch = usesScratch || r == roleScratch
				if r == roleLens && l.encode == "" {
					t.Errorf("%s pass %d: a pixel stage is given the lengths buffer", name, i)
				}
			}
			if p.src != wantSrc || p.dst != wantDst {
				t.Errorf("%s pass %d (%s): reads role %d, writes role %d, want %d, %d", name, i, p.kernel, p.src, p.dst, wantSrc, wantDst)
			}
			usesScratch = usesScratch || p.src == roleScratch || p.dst == roleScratch
			if p.kernel == "" || p.tiles == nil {
				t.Errorf("%s pass %d: kernel %q, tiles set %v", name, i, p.kernel, p.tiles != nil)
			}
			if p.smem != nil && l.check == nil {
				t.Errorf("%s pass %d: shared memory from unchecked Args", name, i)
			}
		}
		if usesScratch != (l.scratch != nil) {
			t.Errorf("%s: scratch %v, but its passes use scratch: %v", name, l.scratch, usesScratch)
		}
		if l.params != nil && l.check == nil {
			t.Errorf("%s: kernel parameters from unchecked Args", name)
		}
	}
	for _, bad := range []struct {
		name string
		l    *launcher
	}{
		{"blur", &launcher{passes: direct("imgpipe_blur_h", hTiles)}},
		{"nothing", &launcher{}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("register(%q) of a duplicate or empty launcher did not panic", bad.name)
				}
			}()
			register(bad.name, bad.l)
		}()
	}
	if _, ok := launchers["nothing"]; ok {
		t.Error("an empty launcher was registered")
	}
}

// checkErr fails unless err is nil (want "") or contains want.
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && err == nil:
		t.Fatalf("no error, want one containing %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error %q does not contain %q", err, want)
	}
}
