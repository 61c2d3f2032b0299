// CUDA graphs through the runtime API: a step captured with cudaStreamBeginCapture (a copy
// in, a kernel, cudaLaunchHostFunc, a copy out) and replayed with new input; the same step
// built with cudaGraphAdd*Node; a kernel node's parameters changed in the instantiated graph
// and cudaGraphExecUpdate; cudaStreamAddCallback; graph memory through captured
// cudaMallocAsync. Prints one JSON verdict.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void axpy(float a, const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    printf("{\"ok\": false, \"call\": \"%s\", \"error\": \"%s\"}\n", #call, cudaGetErrorName(e_)); \
    return 1; } } while (0)

static const int n = 4096;
static int host_calls, callbacks;
static float seen;

static void CUDART_CB on_host(void *data)
{
    host_calls++;
    seen = *(float *)data;
}

static void CUDART_CB on_callback(cudaStream_t, cudaError_t status, void *)
{
    if (status == cudaSuccess)
        callbacks++;
}

int main()
{
    static float in[n], out[n];
    float *x, *y;
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&x, n * sizeof(float)));
    CHECK(cudaMalloc(&y, n * sizeof(float)));

    // Captured: x <- in; y = 0; y = 3x + y; host; out <- y
    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaMemcpyAsync(x, in, sizeof in, cudaMemcpyHostToDevice, s));
    CHECK(cudaMemsetAsync(y, 0, sizeof out, s));
    axpy<<<(n + 127) / 128, 128, 0, s>>>(3.0f, x, y, n);
    CHECK(cudaLaunchHostFunc(s, on_host, out));
    CHECK(cudaMemcpyAsync(out, y, sizeof out, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t ex;
    CHECK(cudaGraphInstantiate(&ex, g, 0));
    int bad = 0;
    for (int round = 1; round <= 3; round++) {
        for (int i = 0; i < n; i++)
            in[i] = (float)(round * 10 + i % 7);
        CHECK(cudaGraphLaunch(ex, s));
        CHECK(cudaStreamSynchronize(s));
        for (int i = 0; i < n; i++)
            bad += out[i] != 3.0f * in[i];
    }
    int captured = bad == 0 && host_calls == 3 && seen == 3.0f * 20;

    // Built node by node: y = 2x + y after a 1D copy in, then a copy out.
    cudaGraph_t m;
    cudaGraphNode_t cin, k, cout;
    CHECK(cudaGraphCreate(&m, 0));
    CHECK(cudaGraphAddMemcpyNode1D(&cin, m, nullptr, 0, x, in, sizeof in,
                                   cudaMemcpyHostToDevice));
    float a = 2.0f;
    int count = n;
    void *args[] = {&a, &x, &y, &count};
    cudaKernelNodeParams kp = {};
    kp.func = (void *)axpy;
    kp.gridDim = dim3((n + 127) / 128);
    kp.blockDim = dim3(128);
    kp.kernelParams = args;
    CHECK(cudaGraphAddKernelNode(&k, m, &cin, 1, &kp));
    CHECK(cudaGraphAddMemcpyNode1D(&cout, m, &k, 1, out, y, sizeof out, cudaMemcpyDeviceToHost));
    cudaGraphExec_t mx;
    CHECK(cudaGraphInstantiate(&mx, m, 0));
    CHECK(cudaMemset(y, 0, sizeof out));
    CHECK(cudaGraphLaunch(mx, s));
    CHECK(cudaStreamSynchronize(s));
    bad = 0;
    for (int i = 0; i < n; i++)
        bad += out[i] != 2.0f * in[i];
    int built = bad == 0;

    // The kernel's factor changed in the exec, then the whole graph updated.
    float a5 = 5.0f;
    void *args5[] = {&a5, &x, &y, &count};
    kp.kernelParams = args5;
    CHECK(cudaGraphExecKernelNodeSetParams(mx, k, &kp));
    CHECK(cudaMemset(y, 0, sizeof out));
    CHECK(cudaGraphLaunch(mx, s));
    CHECK(cudaStreamSynchronize(s));
    int set_params = out[1] == 5.0f * in[1];
    CHECK(cudaGraphKernelNodeSetParams(k, &kp));
    cudaGraphExecUpdateResultInfo info;
    CHECK(cudaGraphExecUpdate(mx, m, &info));
    CHECK(cudaGraphLaunch(mx, s));
    CHECK(cudaStreamSynchronize(s));
    int updated = info.result == cudaGraphExecUpdateSuccess && out[1] == 10.0f * in[1];

    // A callback after work on the stream.
    CHECK(cudaStreamAddCallback(s, on_callback, nullptr, 0));
    CHECK(cudaStreamSynchronize(s));

    // Graph memory from a captured cudaMallocAsync.
    cudaGraph_t gm;
    float *t = nullptr;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaMallocAsync(&t, sizeof out, s));
    CHECK(cudaMemcpyAsync(t, x, sizeof out, cudaMemcpyDeviceToDevice, s));
    CHECK(cudaMemcpyAsync(out, t, sizeof out, cudaMemcpyDeviceToHost, s));
    CHECK(cudaFreeAsync(t, s));
    CHECK(cudaStreamEndCapture(s, &gm));
    cudaGraphExec_t gx;
    CHECK(cudaGraphInstantiate(&gx, gm, 0));
    CHECK(cudaGraphLaunch(gx, s));
    CHECK(cudaGraphLaunch(gx, s));
    CHECK(cudaStreamSynchronize(s));
    int memory = out[2] == in[2];

    CHECK(cudaGraphExecDestroy(ex));
    CHECK(cudaGraphExecDestroy(mx));
    CHECK(cudaGraphExecDestroy(gx));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaGraphDestroy(m));
    CHECK(cudaGraphDestroy(gm));
    printf("{\"ok\": %s, \"captured\": %d, \"built\": %d, \"set_params\": %d, \"updated\": %d, "
           "\"callbacks\": %d, \"graph_memory\": %d}\n",
           captured && built && set_params && updated && callbacks == 1 && memory ? "true"
                                                                                   : "false",
           captured, built, set_params, updated, callbacks, memory);
    return 0;
}
