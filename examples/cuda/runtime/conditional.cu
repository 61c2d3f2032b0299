// Conditional graph nodes decided by kernels: an IF with an ELSE body, a
// WHILE whose handle starts at its default at every launch, a SWITCH with a
// value past its last body, a WHILE captured into the graph a capture is
// building (its body captured too), an IF nested in a WHILE body; then the
// refusals: a host function or a copy of the program's memory in a body
// (gleam cannot decide those on the server), bad handle flags, a handle of
// another graph, and last (it ends the context) a kernel setting a handle
// outside any graph. Prints one JSON line.
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

static int failed = 0, checks = 0;
static char wrong[2048];
#define TRY(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { failed++; \
    fprintf(stderr, "%s: %s\n", #call, cudaGetErrorName(e_)); } } while (0)

static void check(bool ok, const char *what)
{
    checks++;
    if (!ok) {
        strncat(wrong, what, sizeof wrong - strlen(wrong) - 4);
        strncat(wrong, " ", sizeof wrong - strlen(wrong) - 1);
    }
}

// The handle's value: the word at p.
__global__ void decide(const int *p, cudaGraphConditionalHandle h)
{
    cudaGraphSetConditional(h, (unsigned)*p);
}

// Adds k to out[slot].
__global__ void mark(int *out, int slot, int k)
{
    out[slot] += k;
}

// One loop turn: counts down *n and stops the loop at 0; counts the turns.
__global__ void turn(int *n, int *turns, cudaGraphConditionalHandle h)
{
    *turns += 1;
    if (--*n <= 0)
        cudaGraphSetConditional(h, 0);
}

// Sets the handle to whether *n is still positive (a WHILE from a capture).
__global__ void keep_going(int *n, cudaGraphConditionalHandle h)
{
    if (*n > 0)
        *n -= 1;
    cudaGraphSetConditional(h, *n > 0);
}

static void host_fn(void *) {}

static cudaGraphNodeParams kernel_params(void *fn, void **args)
{
    cudaGraphNodeParams p = {};
    p.type = cudaGraphNodeTypeKernel;
    p.kernel.func = fn;
    p.kernel.gridDim = dim3(1);
    p.kernel.blockDim = dim3(1);
    p.kernel.kernelParams = args;
    return p;
}

static cudaGraphNodeParams cond_params(cudaGraphConditionalHandle h, cudaGraphConditionalNodeType t,
                                       unsigned size)
{
    cudaGraphNodeParams p = {};
    p.type = cudaGraphNodeTypeConditional;
    p.conditional.handle = h;
    p.conditional.type = t;
    p.conditional.size = size;
    return p;
}

static void add_mark(cudaGraph_t g, int *out, int slot, int k)
{
    void *args[] = {&out, &slot, &k};
    cudaGraphNodeParams p = kernel_params((void *)mark, args);
    cudaGraphNode_t n;
    TRY(cudaGraphAddNode(&n, g, NULL, NULL, 0, &p));
}

static void fetch(int *host, const int *dev, int n)
{
    TRY(cudaDeviceSynchronize());
    TRY(cudaMemcpy(host, dev, n * sizeof(int), cudaMemcpyDeviceToHost));
}

// A new graph in *g: a kernel sets a new handle to *word, then a conditional
// node of type t with size bodies follows it; its parameters (the bodies).
static cudaGraphNodeParams decided(cudaGraph_t *g, int *word, cudaGraphConditionalNodeType t,
                                   unsigned size)
{
    cudaGraphConditionalHandle h;
    cudaGraphNode_t k, c;
    TRY(cudaGraphCreate(g, 0));
    TRY(cudaGraphConditionalHandleCreate(&h, *g));
    void *args[] = {&word, &h};
    cudaGraphNodeParams kp = kernel_params((void *)decide, args);
    TRY(cudaGraphAddNode(&k, *g, NULL, NULL, 0, &kp));
    cudaGraphNodeParams cp = cond_params(h, t, size);
    TRY(cudaGraphAddNode(&c, *g, &k, NULL, 1, &cp));
    return cp;
}

// Launches e once for each value the kernel reads from *word.
static void launch_each(cudaGraphExec_t e, int *word, const int *values, int n)
{
    for (int i = 0; i < n; i++) {
        TRY(cudaMemcpy(word, &values[i], sizeof values[i], cudaMemcpyHostToDevice));
        TRY(cudaGraphLaunch(e, 0));
    }
}

// IF (value != 0) marks slot 0, ELSE marks slot 1.
static void if_else(int *word, int *out)
{
    cudaGraph_t g;
    cudaGraphExec_t e;
    cudaGraphNodeParams cp = decided(&g, word, cudaGraphCondTypeIf, 2);
    add_mark(cp.conditional.phGraph_out[0], out, 0, 1);
    add_mark(cp.conditional.phGraph_out[1], out, 1, 1);
    TRY(cudaGraphInstantiate(&e, g, 0));
    const int values[] = {7, 0, 1, 0, 0};
    launch_each(e, word, values, 5);
    int got[2];
    fetch(got, out, 2);
    check(got[0] == 2 && got[1] == 3, "if_else");
    TRY(cudaGraphExecDestroy(e));
    TRY(cudaGraphDestroy(g));
}

// WHILE with the default 1 at each launch: the body runs until *n reaches 0,
// so once at least even when *n starts at 0 (a do-while).
static void do_while(int *n, int *turns)
{
    cudaGraph_t g;
    cudaGraphExec_t e;
    cudaGraphConditionalHandle h;
    cudaGraphNode_t c, k;
    TRY(cudaGraphCreate(&g, 0));
    TRY(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
    cudaGraphNodeParams cp = cond_params(h, cudaGraphCondTypeWhile, 1);
    TRY(cudaGraphAddNode(&c, g, NULL, NULL, 0, &cp));
    void *args[] = {&n, &turns, &h};
    cudaGraphNodeParams kp = kernel_params((void *)turn, args);
    TRY(cudaGraphAddNode(&k, cp.conditional.phGraph_out[0], NULL, NULL, 0, &kp));
    TRY(cudaGraphInstantiate(&e, g, 0));
    int start = 5, zero = 0, got[2];
    TRY(cudaMemcpy(n, &start, sizeof start, cudaMemcpyHostToDevice));
    TRY(cudaMemcpy(turns, &zero, sizeof zero, cudaMemcpyHostToDevice));
    TRY(cudaGraphLaunch(e, 0));
    fetch(&got[0], turns, 1);
    check(got[0] == 5, "while_turns");
    TRY(cudaGraphLaunch(e, 0)); // the default again: one more turn with *n at 0
    fetch(&got[1], turns, 1);
    check(got[1] == 6, "while_default_each_launch");
    TRY(cudaGraphExecDestroy(e));
    TRY(cudaGraphDestroy(g));
}

// SWITCH of 3 bodies: value k marks slot k; 3 and more run none.
static void switch_node(int *word, int *out)
{
    cudaGraph_t g;
    cudaGraphExec_t e;
    cudaGraphNodeParams cp = decided(&g, word, cudaGraphCondTypeSwitch, 3);
    for (int b = 0; b < 3; b++)
        add_mark(cp.conditional.phGraph_out[b], out, 2 + b, 10 + b);
    TRY(cudaGraphInstantiate(&e, g, 0));
    const int values[] = {0, 2, 2, 3, 9, 1};
    launch_each(e, word, values, 6);
    int got[3];
    fetch(got, out + 2, 3);
    check(got[0] == 10 && got[1] == 11 && got[2] == 24, "switch");
    TRY(cudaGraphExecDestroy(e));
    TRY(cudaGraphDestroy(g));
}

// A WHILE added to the graph a capture builds, its body captured into it,
// with an IF nested in the body (marking slot 5 on every turn but the last).
static void captured_while(int *n, int *out)
{
    cudaStream_t s, b;
    cudaGraph_t g, body;
    cudaGraphExec_t e;
    cudaGraphConditionalHandle h, inner;
    cudaStreamCaptureStatus status;
    const cudaGraphNode_t *deps;
    size_t ndeps;
    cudaGraphNode_t c, c2;
    TRY(cudaStreamCreate(&s));
    TRY(cudaStreamCreate(&b));
    TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    TRY(cudaStreamGetCaptureInfo(s, &status, NULL, &g, &deps, NULL, &ndeps));
    TRY(cudaGraphConditionalHandleCreate(&h, g));
    keep_going<<<1, 1, 0, s>>>(n, h);
    TRY(cudaStreamGetCaptureInfo(s, &status, NULL, &g, &deps, NULL, &ndeps));
    cudaGraphNodeParams cp = cond_params(h, cudaGraphCondTypeWhile, 1);
    TRY(cudaGraphAddNode(&c, g, deps, NULL, ndeps, &cp));
    body = cp.conditional.phGraph_out[0];
    TRY(cudaStreamUpdateCaptureDependencies(s, &c, NULL, 1, cudaStreamSetCaptureDependencies));
    mark<<<1, 1, 0, s>>>(out, 6, 100); // after the loop
    TRY(cudaStreamEndCapture(s, &g));
    TRY(cudaGraphConditionalHandleCreate(&inner, body));
    TRY(cudaStreamBeginCaptureToGraph(b, body, NULL, NULL, 0, cudaStreamCaptureModeGlobal));
    keep_going<<<1, 1, 0, b>>>(n, h);
    decide<<<1, 1, 0, b>>>(n, inner);
    TRY(cudaStreamEndCapture(b, NULL));
    // the IF joins the body after what was captured: its leaves
    size_t nn = 0;
    TRY(cudaGraphGetNodes(body, NULL, &nn));
    cudaGraphNode_t nodes[8];
    TRY(cudaGraphGetNodes(body, nodes, &nn));
    cudaGraphNodeParams ip = cond_params(inner, cudaGraphCondTypeIf, 1);
    TRY(cudaGraphAddNode(&c2, body, &nodes[nn - 1], NULL, 1, &ip));
    add_mark(ip.conditional.phGraph_out[0], out, 5, 1);
    TRY(cudaGraphInstantiate(&e, g, 0));
    int start = 4, zero = 0;
    TRY(cudaMemcpy(n, &start, sizeof start, cudaMemcpyHostToDevice));
    TRY(cudaMemcpy(out + 5, &zero, sizeof zero, cudaMemcpyHostToDevice));
    TRY(cudaGraphLaunch(e, s));
    int got[2];
    fetch(got, out + 5, 2);
    // before the loop n goes 4 -> 3; the turns take it to 2, 1, 0, and the
    // nested IF marks the two turns that leave it positive
    check(got[1] == 100, "captured_while_after");
    check(got[0] == 2, "captured_while_nested_if");
    TRY(cudaGraphExecDestroy(e));
    TRY(cudaGraphDestroy(g));
    TRY(cudaStreamDestroy(s));
    TRY(cudaStreamDestroy(b));
}

// What gleam refuses (the program gets an error, never a wrong run).
static void refusals(int *word)
{
    cudaGraph_t g, other;
    cudaGraphExec_t e;
    cudaGraphConditionalHandle h, foreign;
    cudaGraphNode_t c, n;
    TRY(cudaGraphCreate(&g, 0));
    TRY(cudaGraphCreate(&other, 0));
    check(cudaGraphConditionalHandleCreate(&h, g, 0, 2) == cudaErrorInvalidValue, "bad_flags");
    cudaGetLastError();
    TRY(cudaGraphConditionalHandleCreate(&h, g));
    TRY(cudaGraphConditionalHandleCreate(&foreign, other));
    cudaGraphNodeParams fp = cond_params(foreign, cudaGraphCondTypeIf, 1);
    check(cudaGraphAddNode(&c, g, NULL, NULL, 0, &fp) == cudaErrorInvalidValue,
          "foreign_handle");
    cudaGetLastError();
    cudaGraphNodeParams wp = cond_params(h, cudaGraphCondTypeWhile, 2);
    check(cudaGraphAddNode(&c, g, NULL, NULL, 0, &wp) == cudaErrorInvalidValue, "while_size");
    cudaGetLastError();
    cudaGraphNodeParams cp = cond_params(h, cudaGraphCondTypeIf, 1);
    TRY(cudaGraphAddNode(&c, g, NULL, NULL, 0, &cp));
    cudaHostNodeParams hp = {host_fn, NULL};
    cudaError_t host = cudaGraphAddHostNode(&n, cp.conditional.phGraph_out[0], NULL, 0, &hp);
    check(host == cudaErrorNotSupported || host == cudaErrorInvalidValue, "host_in_body");
    cudaGetLastError();
    static int pageable = 0;
    TRY(cudaGraphAddMemcpyNode1D(&n, cp.conditional.phGraph_out[0], NULL, 0, word, &pageable,
                                 sizeof pageable, cudaMemcpyHostToDevice));
    check(cudaGraphInstantiate(&e, g, 0) == cudaErrorNotSupported, "host_copy_in_body");
    cudaGetLastError();
    // A graph stays while a capture fills one of its bodies.
    cudaStream_t st;
    TRY(cudaStreamCreate(&st));
    TRY(cudaStreamBeginCaptureToGraph(st, cp.conditional.phGraph_out[0], NULL, NULL, 0,
                                      cudaStreamCaptureModeRelaxed));
    check(cudaGraphDestroy(g) == cudaErrorIllegalState, "destroy_while_a_body_captures");
    cudaGetLastError();
    TRY(cudaStreamEndCapture(st, NULL));
    TRY(cudaStreamDestroy(st));
    TRY(cudaGraphDestroy(g));
    TRY(cudaGraphDestroy(other));
}

int main()
{
    int *word, *out, *n, *turns;
    TRY(cudaMalloc(&word, sizeof(int)));
    TRY(cudaMalloc(&out, 8 * sizeof(int)));
    TRY(cudaMalloc(&n, sizeof(int)));
    TRY(cudaMalloc(&turns, sizeof(int)));
    TRY(cudaMemset(out, 0, 8 * sizeof(int)));
    if_else(word, out);
    do_while(n, turns);
    switch_node(word, out);
    captured_while(n, out);
    refusals(word);
    // Outside a graph the handle belongs to no launch: the kernel fails.
    decide<<<1, 1>>>(word, (cudaGraphConditionalHandle)12345);
    cudaError_t outside = cudaDeviceSynchronize();
    check(outside == cudaErrorLaunchFailure, "set_outside_a_graph");
    printf("{\"ok\": %s, \"checks\": %d, \"failed\": %d, \"wrong\": \"%s\", \"outside\": \"%s\"}\n",
           failed == 0 && wrong[0] == 0 ? "true" : "false", checks, failed, wrong,
           cudaGetErrorName(outside));
    return 0;
}
