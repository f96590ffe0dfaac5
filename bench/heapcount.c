/* LD_PRELOAD shim for bench/zoo.py: counts the live heap bytes of the malloc
   family (after /work/shared/tools/heapcount.c) and lets the process read
   and restart the count through two exported functions, so onnxruntime's
   activation memory during one run can be measured in-process:

     heapcount_mark()  -> restarts the peak at the bytes live now
     heapcount_read(long long out[2]) -> out[0] = bytes live now, out[1] = peak since the mark

   With HEAPCOUNT_OUT=FILE set, it also writes "peak_live_bytes N calls M"
   for the whole process to FILE at exit (tests/runtime/test_heapcount.py,
   bench/heapcount.py: the heap peak of examples/c/run_model).

   Build: cc -shared -fPIC -O2 -o heapcount.so heapcount.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *(*r_malloc)(size_t), *(*r_calloc)(size_t, size_t), *(*r_realloc)(void *, size_t);
static void (*r_free)(void *);
static int (*r_posix_memalign)(void **, size_t, size_t);
static void *(*r_aligned_alloc)(size_t, size_t), *(*r_memalign)(size_t, size_t);
static long long live, peak, calls;
static char boot[1 << 16]; static size_t boot_used;

static void init(void) {
  if (r_malloc) return;
  r_malloc = dlsym(RTLD_NEXT, "malloc"); r_calloc = dlsym(RTLD_NEXT, "calloc");
  r_realloc = dlsym(RTLD_NEXT, "realloc"); r_free = dlsym(RTLD_NEXT, "free");
  r_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
  r_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc"); r_memalign = dlsym(RTLD_NEXT, "memalign");
}
static int in_boot(void *p) { return (char *)p >= boot && (char *)p < boot + sizeof boot; }
static void add(void *p) {
  if (!p) return;
  long long now = __atomic_add_fetch(&live, (long long)malloc_usable_size(p), __ATOMIC_RELAXED);
  __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
  long long old = __atomic_load_n(&peak, __ATOMIC_RELAXED);
  while (now > old && !__atomic_compare_exchange_n(&peak, &old, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
}
static void sub(void *p) { if (p && !in_boot(p)) __atomic_sub_fetch(&live, (long long)malloc_usable_size(p), __ATOMIC_RELAXED); }
void *malloc(size_t n) { if (!r_malloc) { if (boot_used + n > sizeof boot) return NULL; void *p = boot + boot_used; boot_used += (n + 15) & ~15UL; return p; } void *p = r_malloc(n); add(p); return p; }
void *calloc(size_t a, size_t b) { if (!r_calloc) { void *p = malloc(a * b); if (p) memset(p, 0, a * b); return p; } void *p = r_calloc(a, b); add(p); return p; }
void *realloc(void *q, size_t n) { init(); if (q && in_boot(q)) { void *p = malloc(n); if (p) memcpy(p, q, n); return p; } sub(q); void *p = r_realloc(q, n); add(p); return p; }
void free(void *p) { if (!p || in_boot(p)) return; init(); sub(p); r_free(p); }
int posix_memalign(void **pp, size_t a, size_t n) { init(); int rc = r_posix_memalign(pp, a, n); if (!rc) add(*pp); return rc; }
void *aligned_alloc(size_t a, size_t n) { init(); void *p = r_aligned_alloc(a, n); add(p); return p; }
void *memalign(size_t a, size_t n) { init(); void *p = r_memalign(a, n); add(p); return p; }
void heapcount_mark(void) { __atomic_store_n(&peak, __atomic_load_n(&live, __ATOMIC_RELAXED), __ATOMIC_RELAXED); }
void heapcount_read(long long *out) { out[0] = __atomic_load_n(&live, __ATOMIC_RELAXED); out[1] = __atomic_load_n(&peak, __ATOMIC_RELAXED); }
__attribute__((constructor)) static void start(void) { init(); }
__attribute__((destructor)) static void report(void) {
  const char *f = getenv("HEAPCOUNT_OUT"); FILE *o = f ? fopen(f, "w") : NULL;
  if (o) { fprintf(o, "peak_live_bytes %lld calls %lld\n", peak, calls); fclose(o); }
}
