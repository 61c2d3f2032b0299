// Never ends: after one device call it waits for a signal that never comes, so the
// run's time limit stops it (with any child it started).
#include <cstdio>
#include <unistd.h>

int main() {
    int *p = nullptr;
    cudaMalloc(&p, 64);
    printf("waiting forever\n");
    fflush(stdout);
    for (;;) pause();
}
