package cudastage

// boxblur's kernels' tiling models, and its launcher tests' spec: a radius
// wider than the default's.
func init() {
	tilings["imgpipe_box_h"] = tiling{samples: true, work: hTiling}
	tilings["imgpipe_box_v"] = tiling{samples: true, work: vTiling}
	stageSpecs["boxblur"] = "boxblur radius=5"
}
