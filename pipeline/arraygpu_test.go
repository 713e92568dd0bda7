package pipeline

import (
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/userkernel"
)

// The kernel stage takes arrays: on the CPU the plan refuses to run, naming it; bound, its
// op is an array op with the array calling convention.
func TestArrayKernelStage(t *testing.T) {
	withKernelEnv(t, nil)
	requireNVRTC(t)
	src := kernelFile(t, "axpb.cu", `extern "C" __global__ void axpb(const float *in, float *out, long long n,
    int ndim, const long long *shape, float a, float b) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = __fadd_rn(__fmul_rn(a, in[i]), b);
}`)
	plan := mustArrayPlan(t, "load | kernel src="+src+" fn=axpb args=2f,1f | sum")
	if err := plan.CheckCPU(); err == nil || !strings.Contains(err.Error(), "runs only on a GPU") {
		t.Errorf("CheckCPU = %v, want the kernel stage refused", err)
	}
	ops, err := plan.DeviceOps()
	if err != nil || len(ops) != 2 || !ops[0].Array || ops[0].Name != stageKernel || ops[0].CPU != nil || ops[1].Reduce == nil {
		t.Fatalf("DeviceOps = %+v, %v", ops, err)
	}
	k, ok := ops[0].Args.(*userkernel.Kernel)
	if !ok || !k.Array || k.Fn != "axpb" || len(k.Params) != 2 {
		t.Errorf("kernel %+v", k)
	}
	if _, err := compileSpec("load | kernel src=" + src + " fn=axpb out=gray"); err == nil || !strings.Contains(err.Error(), "out=gray") {
		t.Errorf("an array kernel with out=gray: %v", err)
	}
	if _, err := compileSpec("load | histogram"); err == nil || !strings.Contains(err.Error(), "takes images") {
		t.Errorf("a pixel stage in an array chain: %v", err)
	}
}
