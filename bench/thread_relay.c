/* The relay of bench/thread_relay.py: a model's parallel-for whose chunks run one at a time, the even
 * ones on the calling thread and (relay_start(1, cpu)) the odd ones on a helper thread pinned to `cpu`,
 * each chunk's thread CPU time summed per thread. Nothing runs concurrently, so the load of other jobs
 * cannot make the two threads wait for each other inside a chunk; a helper on the other CPU than the
 * caller's adds, over one on the same CPU, what the chunks cost when their data was last written on the
 * other core. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

typedef void (*body_fn)(void *, int64_t, int64_t);
static pthread_t helper;
static atomic_int state; /* 0: nothing to do, 1: a chunk for the helper, 2: the helper is done, 3: exit */
static body_fn job_body;
static void *job_context;
static int64_t job_begin, job_end;
static int cross;
/* nanoseconds of chunk work per thread (0: the caller, 1: the helper); chunks run per thread;
 * nanoseconds by the kind of body the script names (relay_kind, set before each parallel-for) */
int64_t relay_ns[2], relay_chunks[2], relay_kind_ns[8];
int64_t relay_kind;

static int64_t thread_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* run one chunk on thread `side` (0: the caller, 1: the helper), adding its CPU time to that side's and its kind's totals */
static void run_timed(int side, body_fn body, void *context, int64_t begin, int64_t end) {
    int64_t t0 = thread_ns();
    body(context, begin, end);
    int64_t spent = thread_ns() - t0;
    relay_ns[side] += spent;
    relay_kind_ns[relay_kind & 7] += spent;
    relay_chunks[side]++;
}

static void *helper_main(void *arg) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET((int)(intptr_t)arg, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    for (;;) {
        int s;
        while ((s = atomic_load(&state)) != 1 && s != 3) sched_yield();
        if (s == 3) return NULL;
        run_timed(1, job_body, job_context, job_begin, job_end);
        atomic_store(&state, 2);
    }
}

/* cross_mode: odd chunks on a helper pinned to CPU `cpu`; else every chunk on the caller */
void relay_start(int cross_mode, int cpu) {
    cross = cross_mode;
    atomic_store(&state, 0);
    if (cross) pthread_create(&helper, NULL, helper_main, (void *)(intptr_t)cpu);
}

void relay_stop(void) {
    if (cross) {
        atomic_store(&state, 3);
        pthread_join(helper, NULL);
    }
}

void relay_parallel_for(body_fn body, void *context, int64_t count, int64_t per_thread) {
    int64_t chunks = 2 * per_thread, chunk = (count + chunks - 1) / chunks;
    if (chunk < 1) chunk = 1;
    int64_t index = 0;
    for (int64_t begin = 0; begin < count; begin += chunk, index++) {
        int64_t end = begin + chunk < count ? begin + chunk : count;
        if (cross && count >= 2 && index % 2 == 1) {
            job_body = body, job_context = context, job_begin = begin, job_end = end;
            atomic_store(&state, 1);
            while (atomic_load(&state) != 2) sched_yield();
            atomic_store(&state, 0);
        } else {
            run_timed(0, body, context, begin, end);
        }
    }
}
