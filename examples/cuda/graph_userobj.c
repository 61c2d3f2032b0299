/*
 * graph_userobj.c — user objects (cuUserObjectCreate/Retain/Release, cuGraphRetainUserObject/
 * ReleaseUserObject), as cuda.core uses them to keep a graph's kernel arguments alive: the
 * documented argument checks; a reference moved to a graph keeps the object through the
 * graph's destruction while an exec made from it lives, and the exec's destruction runs the
 * destructor, once, on a thread other than the program's; the caller's own references; a
 * clone holds its own; a graph cannot release more than it owns. Destructors run
 * asynchronously, so the program waits for each with a deadline. One JSON verdict.
 *
 * Usage: graph_userobj [KERNELS.ptx|KERNELS.fatbin]
 */
#include <pthread.h>
#include <time.h>

#include "graph_common.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static pthread_t g_main;

typedef struct {
    int destroyed;     /* times its destructor ran */
    int on_main;       /* ... on the program's main thread */
} tracked;

static void destroy(void *p)
{
    tracked *t = p;
    pthread_mutex_lock(&g_mu);
    t->destroyed++;
    t->on_main |= pthread_equal(pthread_self(), g_main);
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}

/* Whether the destructor ran within 20 s. */
static int destroyed_soon(tracked *t)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 20;
    pthread_mutex_lock(&g_mu);
    int rc = 0;
    while (t->destroyed == 0 && rc == 0)
        rc = pthread_cond_timedwait(&g_cv, &g_mu, &until);
    int got = t->destroyed;
    pthread_mutex_unlock(&g_mu);
    return got > 0;
}

static int destroyed_now(tracked *t)
{
    pthread_mutex_lock(&g_mu);
    int got = t->destroyed;
    pthread_mutex_unlock(&g_mu);
    return got;
}

int main(int argc, char **argv)
{
    g_main = pthread_self();
    graph_env e = graph_setup(argc, argv);
    const int n = 256;
    CUdeviceptr x = device_floats(n, 1.0f), y = device_floats(n, 0.0f);
    CUuserObject obj;

    tracked bad = {0, 0};
    expect_result("create_flags_0", cuUserObjectCreate(&obj, &bad, destroy, 1, 0),
                  CUDA_ERROR_INVALID_VALUE);
    expect_result("create_count_0", cuUserObjectCreate(&obj, &bad, destroy, 0,
                                                       CU_USER_OBJECT_NO_DESTRUCTOR_SYNC),
                  CUDA_ERROR_INVALID_VALUE);

    /* A reference moved to a graph; the exec made from it keeps the object. */
    tracked args = {0, 0};
    CHECK(cuUserObjectCreate(&obj, &args, destroy, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    saxpy_args ka = {2.0f, x, y, n, {0}};
    CUDA_KERNEL_NODE_PARAMS pa = saxpy_params(&e, &ka);
    CUgraph g;
    CUgraphNode k;
    CUgraphExec exec;
    CHECK(cuGraphCreate(&g, 0));
    CHECK(cuGraphAddKernelNode(&k, g, NULL, 0, &pa));
    CHECK(cuGraphRetainUserObject(g, obj, 1, CU_GRAPH_USER_OBJECT_MOVE));
    CHECK(cuGraphInstantiate(&exec, g, 0));
    CHECK(cuGraphDestroy(g));
    CHECK(cuGraphLaunch(exec, e.stream));
    CHECK(cuStreamSynchronize(e.stream));
    expect("exec_keeps_object", destroyed_now(&args) == 0);
    expect("exec_ran", device_all(y, n, 2.0f));
    CHECK(cuGraphExecDestroy(exec));
    expect("exec_destroy_runs_destructor", destroyed_soon(&args));
    expect("destructor_once_off_main_thread", args.destroyed == 1 && !args.on_main);

    /* The caller's own references. */
    tracked own = {0, 0};
    CHECK(cuUserObjectCreate(&obj, &own, destroy, 2, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    CHECK(cuUserObjectRelease(obj, 1));
    CHECK(cuUserObjectRetain(obj, 1));
    CHECK(cuUserObjectRelease(obj, 1));
    expect("caller_reference_left", destroyed_now(&own) == 0);
    expect_result("retain_count_0", cuUserObjectRetain(obj, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK(cuUserObjectRelease(obj, 1));
    expect("last_caller_release", destroyed_soon(&own));

    /* A clone holds its own references; a graph releases only what it owns. */
    tracked cloned = {0, 0};
    CUgraph g2, clone;
    CHECK(cuUserObjectCreate(&obj, &cloned, destroy, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    CHECK(cuGraphCreate(&g2, 0));
    CHECK(cuGraphRetainUserObject(g2, obj, 2, 0));
    CHECK(cuUserObjectRelease(obj, 1)); /* the graph's two are left */
    expect_result("graph_release_too_many", cuGraphReleaseUserObject(g2, obj, 3),
                  CUDA_ERROR_INVALID_VALUE);
    CHECK(cuGraphReleaseUserObject(g2, obj, 1));
    CHECK(cuGraphClone(&clone, g2));
    CHECK(cuGraphDestroy(g2));
    expect("clone_keeps_object", destroyed_now(&cloned) == 0);
    CHECK(cuGraphDestroy(clone));
    expect("clone_destroy_runs_destructor", destroyed_soon(&cloned));
    expect("no_early_destructors", bad.destroyed == 0 && args.destroyed == 1
                                       && own.destroyed == 1 && cloned.destroyed == 1);
    return verdict();
}
