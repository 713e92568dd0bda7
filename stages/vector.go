package stages

// useVector selects the vector kernels (AVX2 on amd64, where the CPU has
// it: blur_amd64.s, grayscale_amd64.s) over the portable Go loops, for the
// blur sweeps and RGB grayscale. Both give the same bits: the kernels do the
// same integer arithmetic. Tests switch it to check both.
var useVector = hasVector()
