// Kernels whose parameter lists exercise the PTX layout parser: pointers,
// every scalar width, mixed alignment, and a by-value struct (.align .b8 []).
struct Big {
    double d;
    char c[13];
};

extern "C" __global__ void scale(float *out, const float *in, float k, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = in[i] * k;
}

extern "C" __global__ void mixed(char a, short b, long long c, char d, Big s, double *out)
{
    out[0] = a + b + c + d + s.d + s.c[12];
}

extern "C" __global__ void empty() {}
