// Tiled matrix multiply and a padded shared-memory transpose (2D grids and blocks).
#define TILE 16
#define TT 32

// C[M][N] = A[M][K] * B[K][N]; M, N, K need not be multiples of the tile.
extern "C" __global__ void matmul_tiled(const float *A, const float *B, float *C, int M, int N,
                                        int K)
{
    __shared__ float As[TILE][TILE], Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = row < M && ka < K ? A[row * K + ka] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = kb < K && col < N ? B[kb * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * N + col] = acc;
}

// out[x][y] = in[y][x] through a 32x33 tile (the pad column avoids bank conflicts).
extern "C" __global__ void transpose_padded(const int *in, int *out, int rows, int cols)
{
    __shared__ int tile[TT][TT + 1];
    int x = blockIdx.x * TT + threadIdx.x, y = blockIdx.y * TT + threadIdx.y;
    for (int j = 0; j < TT; j += blockDim.y)
        if (x < cols && y + j < rows)
            tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * TT + threadIdx.x;
    y = blockIdx.x * TT + threadIdx.y;
    for (int j = 0; j < TT; j += blockDim.y)
        if (x < rows && y + j < cols)
            out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}
