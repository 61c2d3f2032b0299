// Real recursion: a call stack of .func frames, as deep as the data says.
__device__ __noinline__ int fib(int n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

extern "C" __global__ void recursive_fib(const int *in, int *out)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = fib(in[i] & 11); // at most fib(11): 287 calls
}
