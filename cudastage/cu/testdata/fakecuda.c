// A fake libcuda for the CPU tests of package cu: it exports every symbol the
// binding looks up, with "device memory" in host memory, so the Go side
// (argument passing, result codes, strings, the 11-argument cuLaunchKernel)
// can be checked without a GPU. Built by the tests with the system C
// compiler when there is one.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int cfg_version = 13000, cfg_init = 0, cfg_count = 1;
static uint64_t last_launch[16];

void fake_config(int version, int init_result, int count) {
	cfg_version = version; cfg_init = init_result; cfg_count = count;
}
void fake_last_launch(uint64_t *out) { memcpy(out, last_launch, sizeof last_launch); }

int cuDriverGetVersion(int *v) { *v = cfg_version; return 0; }
int cuInit(unsigned flags) { return flags ? 1 : cfg_init; }
int cuGetErrorName(int code, const char **s) {
	switch (code) {
	case 1: *s = "CUDA_ERROR_INVALID_VALUE"; return 0;
	case 2: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
	case 100: *s = "CUDA_ERROR_NO_DEVICE"; return 0;
	case 700: *s = "CUDA_ERROR_ILLEGAL_ADDRESS"; return 0;
	}
	*s = 0; return 1;
}
int cuGetErrorString(int code, const char **s) {
	switch (code) {
	case 1: *s = "invalid argument"; return 0;
	case 2: *s = "out of memory"; return 0;
	case 100: *s = "no CUDA-capable device is detected"; return 0;
	case 700: *s = "an illegal memory access was encountered"; return 0;
	}
	*s = 0; return 1;
}
int cuDeviceGetCount(int *n) { *n = cfg_count; return 0; }
int cuDeviceGet(int *d, int ord) { if (ord >= cfg_count) return 101; *d = ord; return 0; }
int cuDeviceGetName(char *name, int len, int dev) { strncpy(name, "Fake GPU", len); return 0; }
int cuDeviceGetAttribute(int *v, int attr, int dev) { *v = attr * 1000 + dev; return 0; }
int cuDeviceTotalMem_v2(size_t *n, int dev) { *n = (size_t)80 << 30; return 0; }
int cuDevicePrimaryCtxRetain(void **c, int dev) { *c = (void *)0xc0de; return 0; }
int cuDevicePrimaryCtxRelease_v2(int dev) { return 0; }
int cuCtxSetCurrent(void *c) { return 0; }
int cuCtxGetCurrent(void **c) { *c = (void *)0xc0de; return 0; }
int cuCtxSynchronize(void) { return 700; } // pretend an earlier kernel faulted
int cuStreamCreate(void **s, unsigned f) { *s = (void *)(uintptr_t)(0x5000 + f); return 0; }
int cuStreamDestroy_v2(void *s) { return 0; }
int cuStreamSynchronize(void *s) { return 0; }
int cuStreamQuery(void *s) { return 600; }
int cuStreamWaitEvent(void *s, void *e, unsigned f) { return 0; }
int cuEventCreate(void **e, unsigned f) { *e = (void *)(uintptr_t)(0xe000 + f); return 0; }
int cuEventRecord(void *e, void *s) { return 0; }
int cuEventSynchronize(void *e) { return 0; }
int cuEventQuery(void *e) { return 0; }
int cuEventDestroy_v2(void *e) { return 0; }
int cuEventElapsedTime(float *ms, void *a, void *b) { *ms = 1.5f; return 0; }
int cuMemAlloc_v2(uint64_t *p, size_t n) {
	if (n > ((size_t)1 << 40)) return 2;
	void *m = malloc(n);
	if (!m) return 2;
	*p = (uint64_t)(uintptr_t)m; return 0;
}
int cuMemFree_v2(uint64_t p) { free((void *)(uintptr_t)p); return 0; }
int cuMemHostRegister_v2(void *p, size_t n, unsigned f) { return 0; }
int cuMemHostUnregister(void *p) { return 0; }
int cuMemGetInfo_v2(size_t *f, size_t *t) { *f = 1 << 30; *t = (size_t)80 << 30; return 0; }
int cuMemcpyHtoD_v2(uint64_t d, const void *s, size_t n) { memcpy((void *)(uintptr_t)d, s, n); return 0; }
int cuMemcpyDtoH_v2(void *d, uint64_t s, size_t n) { memcpy(d, (void *)(uintptr_t)s, n); return 0; }
int cuMemcpyHtoDAsync_v2(uint64_t d, const void *s, size_t n, void *st) { memcpy((void *)(uintptr_t)d, s, n); return 0; }
int cuMemcpyDtoHAsync_v2(void *d, uint64_t s, size_t n, void *st) { memcpy(d, (void *)(uintptr_t)s, n); return 0; }
int cuMemcpyDtoDAsync_v2(uint64_t d, uint64_t s, size_t n, void *st) { memmove((void *)(uintptr_t)d, (void *)(uintptr_t)s, n); return 0; }
int cuMemsetD8Async(uint64_t d, unsigned char v, size_t n, void *st) { memset((void *)(uintptr_t)d, v, n); return 0; }
int cuModuleLoadDataEx(void **m, const void *img, unsigned n, int *opts, void **vals) {
	if (strncmp((const char *)img, "bad", 3) == 0) {
		for (unsigned i = 0; i < n; i++)
			if (opts[i] == 5) strcpy((char *)vals[i], "ptxas fatal: syntax error");
		return 218;
	}
	*m = (void *)0x3000; return 0;
}
int cuModuleGetFunction(void **f, void *m, const char *name) {
	if (strcmp(name, "k") != 0) return 500;
	*f = (void *)0x4000; return 0;
}
int cuModuleUnload(void *m) { return 0; }
int cuFuncGetAttribute(int *v, int a, void *f) { *v = 1024; return 0; }
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void *stream, void **params, void **extra) {
	uint64_t *l = last_launch;
	l[0] = (uintptr_t)f; l[1] = gx; l[2] = gy; l[3] = gz; l[4] = bx; l[5] = by; l[6] = bz;
	l[7] = shared; l[8] = (uintptr_t)stream; l[9] = (uintptr_t)extra;
	// the test passes a uint64, a uint32 and a float32
	l[10] = *(uint64_t *)params[0]; l[11] = *(uint32_t *)params[1]; memcpy(&l[12], params[2], 4);
	return bx * by * bz > 1024 ? 1 : 0;
}
