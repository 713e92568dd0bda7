package cudastage

// blur's kernels' tiling models, and its launcher tests' spec: a radius
// wider than the default's.
func init() {
	tilings["imgpipe_blur_h"] = tiling{samples: true, work: hTiling}
	tilings["imgpipe_blur_v"] = tiling{samples: true, work: vTiling}
	stageSpecs["blur"] = "blur sigma=1.5"
}
