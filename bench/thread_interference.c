/* What two threads on two cores do to each other: the experiments behind
 * docs/performance.md's "What two threads do to each other (threads4)".
 * Built and run by bench/thread_interference.py (which links OpenBLAS from
 * scipy-openblas32); every time is a thread's own CPU time or a wall time
 * of a call the thread ran unpreempted, so the load of other jobs moves
 * them little.
 *
 *   blas BLAS_THREADS CALLERS M N K CALLS
 *       CALLERS pthreads each call sgemm CALLS times on their own matrices,
 *       OpenBLAS set to BLAS_THREADS: per caller its CPU ms, GFLOP per CPU
 *       second and voluntary context switches (a caller blocked on a lock
 *       would switch; one spinning would burn CPU at a lower rate).
 *   together KIND [M N K]
 *       two threads pinned to CPUs 0 and 1 run KIND (fma: 8-float vector FMAs
 *       in registers; sgemm M x N x K; copy: 2 x M*K floats) back to back for
 *       4 s; calls that ran unpreempted (thread CPU >= 97% of wall) are
 *       compared when the other thread's unpreempted calls covered them
 *       ("together") and when it ran none ("alone"): do the two cores slow
 *       each other's work (shared core, shared caches, power)?
 *   handoff BYTES ROUNDS self|cross
 *       a writer fills a block, then a reader (CPU 1) adds 1 to every
 *       element and clamps at 0 (a convolution's last pass); the writer on
 *       CPU 1 ("self") or CPU 0 ("cross"); the reader's pass, thread CPU
 *       time, min / median of ROUNDS: what a pass costs over data the other
 *       core wrote last. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

void scipy_cblas_sgemm(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *,
                       int);
void scipy_openblas_set_num_threads(int);

static double now(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static float *filled(long count, int seed) {
    float *p = aligned_alloc(64, ((count * 4 + 63) / 64) * 64);
    for (long i = 0; i < count; i++) p[i] = (float)((i + seed) % 7) - 3;
    return p;
}

/* ---- blas ------------------------------------------------------------------------------------- */
static int M = 128, N = 729, K = 256, CALLS = 200;
static pthread_barrier_t barrier;
typedef struct { double cpu; long voluntary; } caller_result;

static void *blas_caller(void *arg) {
    caller_result *r = arg;
    float *a = filled((long)M * K, 1), *b = filled((long)K * N, 2), *c = filled((long)M * N, 3);
    scipy_cblas_sgemm(101, 111, 111, M, N, K, 1, a, K, b, N, 0, c, N);
    pthread_barrier_wait(&barrier);
    struct rusage before, after;
    getrusage(RUSAGE_THREAD, &before);
    double start = now(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < CALLS; i++) scipy_cblas_sgemm(101, 111, 111, M, N, K, 1, a, K, b, N, 0, c, N);
    r->cpu = now(CLOCK_THREAD_CPUTIME_ID) - start;
    getrusage(RUSAGE_THREAD, &after);
    r->voluntary = after.ru_nvcsw - before.ru_nvcsw;
    free(a); free(b); free(c);
    return NULL;
}

static int blas(int blas_threads, int callers) {
    scipy_openblas_set_num_threads(blas_threads);
    pthread_barrier_init(&barrier, NULL, callers);
    pthread_t threads[8];
    caller_result results[8];
    for (int i = 0; i < callers; i++) pthread_create(&threads[i], NULL, blas_caller, &results[i]);
    for (int i = 0; i < callers; i++) pthread_join(threads[i], NULL);
    for (int i = 0; i < callers; i++)
        printf("blas threads=%d callers=%d %dx%dx%d caller %d: cpu_ms=%.1f gflop_per_cpu_s=%.1f voluntary=%ld\n",
               blas_threads, callers, M, N, K, i, results[i].cpu * 1e3,
               2.0 * M * N * K * CALLS / results[i].cpu / 1e9, results[i].voluntary);
    return 0;
}

/* ---- together ----------------------------------------------------------------------------------- */
typedef struct { double t0, t1, cpu; } span;
static const char *KIND;
static span *spans[2];
static int counts[2];
static float sink;
#define MAX_SPANS 20000

static void work(float *a, float *b, float *c) {
    if (!strcmp(KIND, "sgemm")) {
        scipy_cblas_sgemm(101, 111, 111, M, N, K, 1, a, K, b, N, 0, c, N);
    } else if (!strcmp(KIND, "fma")) {
        /* eight chains of 8-float vectors (AVX2's ymm registers, also on AVX-512 CPUs), each
         * x * m + d contracted to an FMA; the chains start apart, or the compiler merges them */
        typedef float v8 __attribute__((vector_size(32)));
        v8 x[8], m, d;
        for (int j = 0; j < 8; j++) {
            m[j] = 0.999999f; d[j] = 1e-7f;
            for (int c = 0; c < 8; c++) x[c][j] = (float)(c + 1);
        }
        for (int i = 0; i < 40000; i++)
            for (int c = 0; c < 8; c++) x[c] = x[c] * m + d;
        for (int c = 1; c < 8; c++) x[0] += x[c];
        for (int j = 0; j < 8; j++) sink += x[0][j];
    } else {
        memcpy(b, a, sizeof(float) * M * K);
        memcpy(a, b, sizeof(float) * M * K);
    }
}

static void *together_thread(void *arg) {
    int who = (int)(long)arg;
    pin(who);
    long most = (long)M * K > (long)K * N ? (long)M * K : (long)K * N;
    if ((long)M * N > most) most = (long)M * N;
    float *a = filled(most, 1), *b = filled(most, 2), *c = filled(most, 3);
    work(a, b, c);
    spans[who] = calloc(MAX_SPANS, sizeof(span));
    double end = now(CLOCK_MONOTONIC) + 4.0;
    int n = 0;
    while (n < MAX_SPANS && now(CLOCK_MONOTONIC) < end) {
        double c0 = now(CLOCK_THREAD_CPUTIME_ID), t0 = now(CLOCK_MONOTONIC);
        work(a, b, c);
        double t1 = now(CLOCK_MONOTONIC), c1 = now(CLOCK_THREAD_CPUTIME_ID);
        spans[who][n++] = (span){t0, t1, c1 - c0};
    }
    counts[who] = n;
    return NULL;
}

static int unpreempted(span s) { return s.cpu >= 0.97 * (s.t1 - s.t0); }

static int together(void) {
    pthread_t threads[2];
    for (long i = 0; i < 2; i++) pthread_create(&threads[i], NULL, together_thread, (void *)i);
    for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
    double *alone = malloc(sizeof(double) * counts[0]), *both = malloc(sizeof(double) * counts[0]);
    int n_alone = 0, n_both = 0;
    for (int i = 0; i < counts[0]; i++) {
        span s = spans[0][i];
        if (!unpreempted(s)) continue;
        double covered = 0;
        int touched = 0;
        for (int j = 0; j < counts[1]; j++) {
            span o = spans[1][j];
            if (o.t1 <= s.t0 || o.t0 >= s.t1) continue;
            touched = 1;
            if (unpreempted(o)) covered += (o.t1 < s.t1 ? o.t1 : s.t1) - (o.t0 > s.t0 ? o.t0 : s.t0);
        }
        if (covered >= 0.95 * (s.t1 - s.t0)) both[n_both++] = s.t1 - s.t0;
        else if (!touched) alone[n_alone++] = s.t1 - s.t0;
    }
    qsort(alone, n_alone, sizeof(double), cmp_double);
    qsort(both, n_both, sizeof(double), cmp_double);
    printf("together %s %dx%dx%d: alone n=%d median_us=%.1f together n=%d median_us=%.1f\n", KIND, M, N, K, n_alone,
           n_alone ? alone[n_alone / 2] * 1e6 : 0.0, n_both, n_both ? both[n_both / 2] * 1e6 : 0.0);
    return 0;
}

/* ---- handoff ------------------------------------------------------------------------------------ */
static float *block;
static long elements;
static int rounds;
static atomic_int turn;  /* 0: the writer's, 1: the reader's */
static double *pass_times;

static void *writer(void *arg) {
    pin((int)(long)arg);
    for (int r = 0; r < rounds; r++) {
        while (atomic_load(&turn) != 0) sched_yield();
        for (long i = 0; i < elements; i++) block[i] = (float)(i & 7) + (float)r;
        atomic_store(&turn, 1);
    }
    return NULL;
}

static void *reader(void *arg) {
    (void)arg;
    pin(1);
    for (int r = 0; r < rounds; r++) {
        while (atomic_load(&turn) != 1) sched_yield();
        double start = now(CLOCK_THREAD_CPUTIME_ID);
        for (long i = 0; i < elements; i++) {
            float v = block[i] + 1.0f;
            block[i] = v > 0 ? v : 0;
        }
        pass_times[r] = now(CLOCK_THREAD_CPUTIME_ID) - start;
        atomic_store(&turn, 0);
    }
    return NULL;
}

static int handoff(long bytes, int count, int cross) {
    elements = bytes / 4;
    rounds = count;
    block = filled(elements, 0);
    pass_times = calloc(rounds, sizeof(double));
    pthread_t w, r;
    pthread_create(&w, NULL, writer, (void *)(long)(cross ? 0 : 1));
    pthread_create(&r, NULL, reader, NULL);
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    qsort(pass_times, rounds, sizeof(double), cmp_double);
    printf("handoff %s %ld bytes: min_us=%.1f median_us=%.1f\n", cross ? "cross" : "self", bytes, pass_times[0] * 1e6,
           pass_times[rounds / 2] * 1e6);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 8 && !strcmp(argv[1], "blas")) {
        M = atoi(argv[4]); N = atoi(argv[5]); K = atoi(argv[6]); CALLS = atoi(argv[7]);
        return blas(atoi(argv[2]), atoi(argv[3]));
    }
    if (argc >= 3 && !strcmp(argv[1], "together")) {
        KIND = argv[2];
        if (argc >= 6) { M = atoi(argv[3]); N = atoi(argv[4]); K = atoi(argv[5]); }
        scipy_openblas_set_num_threads(1);
        return together();
    }
    if (argc >= 5 && !strcmp(argv[1], "handoff")) return handoff(atol(argv[2]), atoi(argv[3]), !strcmp(argv[4], "cross"));
    fprintf(stderr, "usage: %s blas BLAS_THREADS CALLERS M N K CALLS | together fma|sgemm|copy [M N K] | "
                    "handoff BYTES ROUNDS self|cross\n", argv[0]);
    return 2;
}
