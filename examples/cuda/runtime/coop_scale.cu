// The other half of coop_rows.cu (separate compilation): a device function and a
// device variable that coop_rows.cu declares extern.
__device__ int offset = 5;

__device__ int scale(int x)
{
    return 2 * x + 1;
}
