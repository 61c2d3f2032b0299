// Waives: exits with the samples' EXIT_WAIVED (2) after a device query, as a
// sample does when the device lacks what it demonstrates.
#include <cstdio>

int main() {
    int count = 0;
    cudaGetDeviceCount(&count);
    printf("found %d device(s); this demonstration needs a feature it lacks: waiving\n", count);
    return 2;
}
