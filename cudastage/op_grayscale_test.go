package cudastage

// The model of kernels/grayscale.cu's tiling (TestLaunchTables).
func init() { tilings["imgpipe_grayscale"] = tiling{work: rowGroups(kThreads)} }
