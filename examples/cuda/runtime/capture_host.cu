// Stream capture of copies to and from the program's memory, across two streams, in the
// shape of cuda-samples' graphMemoryNodes: stream s allocates (cudaMallocAsync), copies a
// pageable input in, runs a kernel; stream s2 forks from it, copies the result out to the
// program's memory and is joined back, then destroyed before the capture ends. The graph
// runs three times with new input: each launch must read the input as it is then and write
// the output then (CUDA's rule for host memory in a captured copy). A managed allocation
// exists meanwhile (the mirror's refresher pulls while the graph's host copies wait for the
// server). Mode "hostnode": a captured kernel, a host function that takes 200 ms, and a
// kernel after it, with managed memory (the refresher's pull waited behind the host
// function holding the lock the second kernel's launch needs: a deadlock). Modes
// "origin" and "unjoined" destroy a stream the capture cannot lose and print the errors.
// Prints one JSON verdict.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <cuda_runtime.h>

// Slow enough (on the host device) that the graph's copy out waits for it.
__global__ void square(const int *in, int *out, int n, int spin)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    int v = in[i], acc = 0;
    for (int k = 0; k < spin; k++)
        acc += (v ^ k) & 1;
    out[i] = v * v + (acc & 0);
}

#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    printf("{\"ok\": false, \"call\": \"%s\", \"error\": \"%s\"}\n", #call, cudaGetErrorName(e_)); \
    return 1; } } while (0)

static const int n = 512;

static int refused(const char *mode)
{
    cudaStream_t s, s2;
    cudaEvent_t e;
    int *d;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CHECK(cudaEventCreate(&e));
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaMallocAsync((void **)&d, n * sizeof(int), s));
    CHECK(cudaEventRecord(e, s));
    CHECK(cudaStreamWaitEvent(s2, e, 0));
    CHECK(cudaMemsetAsync(d, 0, n * sizeof(int), s2));
    cudaError_t destroyed = cudaStreamDestroy(strcmp(mode, "origin") == 0 ? s : s2);
    cudaGraph_t g = NULL;
    cudaError_t ended = cudaStreamEndCapture(s, &g);
    printf("{\"destroy\": \"%s\", \"end\": \"%s\", \"graph\": %s}\n", cudaGetErrorName(destroyed),
           cudaGetErrorName(ended), g == NULL ? "false" : "true");
    return 0;
}

__global__ void bump(int *v) { *v += 1; }

static void CUDART_CB slow_host(void *)
{
    struct timespec t = {0, 200 * 1000 * 1000};
    nanosleep(&t, NULL); // the device's work is done; the program's own takes a while
}

static int host_node(void)
{
    int *flag, *d, h = 0;
    cudaStream_t s;
    CHECK(cudaMallocManaged((void **)&flag, sizeof(int)));
    *flag = 7;
    CHECK(cudaMalloc((void **)&d, sizeof(int)));
    CHECK(cudaMemset(d, 0, sizeof(int)));
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    bump<<<1, 1, 0, s>>>(d);
    CHECK(cudaLaunchHostFunc(s, slow_host, NULL));
    bump<<<1, 1, 0, s>>>(d);
    cudaGraph_t g;
    cudaGraphExec_t x;
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&x, g, NULL, NULL, 0));
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost));
    printf("{\"ok\": true, \"bumps\": %d, \"flag\": %d}\n", h, *flag);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "fork";
    if (strcmp(mode, "hostnode") == 0)
        return host_node();
    if (strcmp(mode, "fork") != 0)
        return refused(mode);
    int spin = argc > 2 ? atoi(argv[2]) : 2000;
    int *in = (int *)malloc(n * sizeof(int)), *out = (int *)malloc(n * sizeof(int));
    int *flag, *d_in, *d_out;
    cudaStream_t s, s2, run;
    cudaEvent_t forked, joined;
    CHECK(cudaMallocManaged((void **)&flag, sizeof(int)));
    *flag = 7;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CHECK(cudaEventCreate(&forked));
    CHECK(cudaEventCreate(&joined));
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaMallocAsync((void **)&d_in, n * sizeof(int), s));
    CHECK(cudaMallocAsync((void **)&d_out, n * sizeof(int), s));
    CHECK(cudaMemcpyAsync(d_in, in, n * sizeof(int), cudaMemcpyHostToDevice, s));
    square<<<(n + 127) / 128, 128, 0, s>>>(d_in, d_out, n, spin);
    CHECK(cudaEventRecord(forked, s));
    CHECK(cudaStreamWaitEvent(s2, forked, 0));
    CHECK(cudaMemcpyAsync(out, d_out, n * sizeof(int), cudaMemcpyDeviceToHost, s2));
    CHECK(cudaFreeAsync(d_out, s2));
    CHECK(cudaEventRecord(joined, s2));
    CHECK(cudaStreamWaitEvent(s, joined, 0));
    CHECK(cudaFreeAsync(d_in, s));
    CHECK(cudaStreamDestroy(s2));         // joined back: it may go before the capture ends
    CHECK(cudaEventDestroy(forked));
    CHECK(cudaEventDestroy(joined));
    cudaGraph_t g;
    cudaGraphExec_t x;
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&x, g, NULL, NULL, 0));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaStreamCreateWithFlags(&run, cudaStreamNonBlocking));
    int bad = 0, runs = 3;
    for (int r = 0; r < runs; r++) {
        for (int i = 0; i < n; i++)
            in[i] = i + 100 * r, out[i] = -1;  // written after capture, before each launch
        CHECK(cudaGraphLaunch(x, run));
        CHECK(cudaStreamSynchronize(run));
        for (int i = 0; i < n; i++)
            bad += out[i] != (i + 100 * r) * (i + 100 * r);
    }
    CHECK(cudaGraphExecDestroy(x));
    CHECK(cudaStreamDestroy(run));
    printf("{\"ok\": true, \"runs\": %d, \"wrong\": %d, \"flag\": %d}\n", runs, bad, *flag);
    CHECK(cudaFree(flag));
    return 0;
}
