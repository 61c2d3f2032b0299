extern "C" __global__ void saxpy(int n, float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i] + y[i]; }
#define T 16
extern "C" __global__ void sgemm(int M, int N, int K, const float *A, const float *B, float *C) {
  __shared__ float As[T][T], Bs[T][T];
  int tx = threadIdx.x, ty = threadIdx.y, row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
  float acc = 0;
  for (int t = 0; t < (K + T - 1) / T; t++) {
    As[ty][tx] = (row < M && t*T+tx < K) ? A[row*K + t*T+tx] : 0.f;
    Bs[ty][tx] = (col < N && t*T+ty < K) ? B[(t*T+ty)*N + col] : 0.f;
    __syncthreads();
    for (int k = 0; k < T; k++) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) C[row*N+col] = acc; }
__device__ __noinline__ float f(float x, int k) { float s = 0; for (int i = 0; i < k; i++) s += sinf(x*i); return s; }
extern "C" __global__ void red(const float *x, float *out, int n) {
  extern __shared__ float sm[];
  float v = 0; for (int i = blockIdx.x*blockDim.x+threadIdx.x; i < n; i += gridDim.x*blockDim.x) v += x[i];
  for (int o = 16; o; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
  if ((threadIdx.x & 31) == 0) sm[threadIdx.x/32] = v; __syncthreads();
  if (threadIdx.x == 0) { float s = 0; for (int i = 0; i < blockDim.x/32; i++) s += sm[i]; atomicAdd(out, s + f(s, 3)); }
  if (__all_sync(0xffffffff, v > 0)) out[1] = __ballot_sync(0xffffffff, v>1);
}
__constant__ int cst[4];
__device__ int gv[3] = {1,2,3};
extern "C" __global__ void misc(int *o, double *d, long long q) {
  int loc[8]; for (int i=0;i<8;i++) loc[i]=o[i]*cst[i&3]; o[threadIdx.x] = loc[o[0]&7] / (threadIdx.x+1) + __popc(q) + __clz(o[2]) + __brev(o[3]) + gv[1];
  d[threadIdx.x] = sqrt(d[0]) + exp(d[1]) + (double)q / 3 + __fdividef(1.f, (float)o[4]);
  atomicMax(o+5, 4); atomicCAS((unsigned long long*)d, 1ull, 2ull);
}
