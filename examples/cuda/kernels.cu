// kernels.cu — the kernels of gleam's CUDA examples.
//
// Every kernel is extern "C" (so its entry name is the plain C name the examples look up)
// and guards its index, so any grid that covers the data is correct and threads past the
// end do nothing. The host backend runs the same kernels in numpy
// (peer/cuda/kernels.py); tests/test_host_kernels.py checks that the two declare the same
// entries and parameter sizes. Regenerate the shipped PTX/fatbin with
// scripts/gen-example-kernels.sh after any change here.

// Does nothing: launching it measures the cost of a call, not of a kernel.
extern "C" __global__ void gleam_empty() {}

// c[i] = a[i] + b[i]
extern "C" __global__ void vector_add(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}

// y[i] = a * x[i] + y[i]
extern "C" __global__ void saxpy(float a, const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

// C = A·B, row-major; A is MxK, B is KxN, C is MxN. One thread per element of C:
// x runs over columns, y over rows. Plain on purpose: the examples verify numbers,
// they do not tune a GEMM.
extern "C" __global__ void sgemm(const float *A, const float *B, float *C, int M, int N, int K)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N)
        return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
}

// x[r, c] = max(0, x[r, c] + bias[c]), in place; 1-D over rows*cols.
extern "C" __global__ void bias_relu(float *x, const float *bias, int rows, int cols)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * cols)
        return;
    float v = x[i] + bias[i % cols];
    x[i] = v > 0.0f ? v : 0.0f;
}

// y[r, :] = softmax(x[r, :]); one thread per row. The row maximum is subtracted first so
// exp never overflows.
extern "C" __global__ void softmax_rows(const float *x, float *y, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows)
        return;
    const float *in = x + (long long)r * cols;
    float *out = y + (long long)r * cols;
    float m = in[0];
    for (int c = 1; c < cols; ++c)
        m = fmaxf(m, in[c]);
    float sum = 0.0f;
    for (int c = 0; c < cols; ++c) {
        out[c] = expf(in[c] - m);
        sum += out[c];
    }
    for (int c = 0; c < cols; ++c)
        out[c] /= sum;
}
