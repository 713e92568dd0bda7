package cudastage

// The model of kernels/histogram.cu's tiling (TestLaunchTables).
func init() { tilings["imgpipe_histogram"] = tiling{work: rowGroups(kThreads * kHistGroups)} }
