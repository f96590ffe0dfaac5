/* run_model: run a model compiled by `pyocc compile -o model.so` from C.
 *
 *   cc -O2 -o run_model examples/c/run_model.c -ldl
 *   ./run_model model.so input.bin output.bin [--repeat N] [--warmup N] [--threads N] [--dim NAME=VALUE ...]
 *
 * input.bin holds the graph inputs' raw little-endian bytes, concatenated in
 * graph-input order; output.bin receives the outputs likewise. The weights
 * come from model.weights beside the library, memory-mapped once. With --repeat N the model runs
 * N times and the last line printed is the median milliseconds per run;
 * --warmup N runs it N times more first, untimed (a process's first runs
 * pay for what is done once: faulting in the pool and the weights'
 * pages, the worker threads finding their cores).
 * With --threads N it runs on N threads (NAME_set_threads before NAME_init):
 * the library must have been compiled for threads (`pyocc compile --threads
 * M`, any M > 1); without the option it runs on the threads it was compiled for.
 *
 * The model must run without Python: every compute op a native kernel
 * (its table's "numpy_sites" is 0), so NAME_init gets no kernel callback.
 * The C ABI (version 1) is documented in pyocc/lowering/convert_dnn_to_llvm.py
 * and docs/guide.md; sizes come from the JSON table NAME_meta() returns.
 * A model compiled with symbolic dimensions (`pyocc compile --dim
 * sequence=512`, ABI version 2: pyocc/lowering/symbolic_native.py) needs
 * each one's value, `--dim sequence=17`, within the range its table lists;
 * the inputs' and outputs' sizes at those values come from
 * NAME_tensor_bytes, and NAME_run takes the values (sorted by name).
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_TENSORS 256
#define MAX_SYMBOLS 16

typedef void (*init_fn)(void *const *);
typedef int32_t (*run_fn)(void *const *, void *const *, const void *, int64_t *);
typedef int32_t (*symbolic_run_fn)(void *const *, void *const *, const void *, int64_t *, const int64_t *);
typedef void (*tensor_bytes_fn)(const int64_t *, int64_t *);
typedef void (*destroy_fn)(void);
typedef int32_t (*threads_fn)(int32_t);
typedef const char *(*text_fn)(void);

static void die(const char *what, const char *detail) {
    fprintf(stderr, "run_model: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

/* --- just enough JSON: the table's "inputs"/"outputs" entries ----------- */

static const char *skip_string(const char *p) { /* p at the opening quote */
    for (p++; *p && *p != '"'; p++)
        if (*p == '\\' && p[1]) p++;
    return *p ? p + 1 : p;
}

static size_t itemsize(const char *dtype) {
    static const struct { const char *name; size_t size; } sizes[] = {
        {"\"float32\"", 4}, {"\"float64\"", 8}, {"\"float16\"", 2}, {"\"int8\"", 1}, {"\"uint8\"", 1},
        {"\"int16\"", 2}, {"\"uint16\"", 2}, {"\"int32\"", 4}, {"\"uint32\"", 4}, {"\"int64\"", 8},
        {"\"uint64\"", 8}, {"\"bool\"", 1}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (strncmp(dtype, sizes[i].name, strlen(sizes[i].name)) == 0) return sizes[i].size;
    die("unknown dtype in the model's table", dtype);
    return 0;
}

/* The byte sizes of the entries of top-level array `key` ("inputs" or
 * "outputs"): each entry is {"name": ..., "shape": [...], "dtype": ...}. */
static int tensor_bytes(const char *json, const char *key, size_t *bytes) {
    char pattern[32];
    snprintf(pattern, sizeof pattern, "\"%s\":[", key);
    const char *p = strstr(json, pattern);
    if (!p) die("the model's table has no entry", key);
    p += strlen(pattern);
    int count = 0;
    while (*p == '{') {
        if (count == MAX_TENSORS) die("too many tensors for this runner", key);
        size_t elements = 1, size = 0;
        for (p++; *p && *p != '}';) {
            if (*p == '"') {
                const char *field = p;
                p = skip_string(p);
                if (*p != ':') continue;
                p++;
                if (strncmp(field, "\"shape\"", 7) == 0) {
                    for (p++; *p && *p != ']';) {
                        char *end;
                        elements *= (size_t)strtoull(p, &end, 10);
                        p = *end == ',' ? end + 1 : end;
                    }
                    p++;
                } else if (strncmp(field, "\"dtype\"", 7) == 0) {
                    size = itemsize(p);
                    p = skip_string(p);
                } else if (*p == '"') {
                    p = skip_string(p);
                }
            } else {
                p++;
            }
        }
        bytes[count++] = elements * size;
        p++;
        if (*p == ',') p++;
    }
    return count;
}

/* The number of entries of top-level array `key` of the table. */
static int tensor_count(const char *json, const char *key) {
    char pattern[32];
    snprintf(pattern, sizeof pattern, "\"%s\":[", key);
    const char *p = strstr(json, pattern);
    if (!p) die("the model's table has no entry", key);
    int count = 0, depth = 0;
    for (p += strlen(pattern); *p && !(depth == 0 && *p == ']');) {
        if (*p == '"') {
            p = skip_string(p);
            continue;
        }
        if (*p == '{' || *p == '[') count += depth++ == 0 && *p == '{';
        if (*p == '}' || *p == ']') depth--;
        p++;
    }
    if (count > MAX_TENSORS) die("too many tensors for this runner", key);
    return count;
}

/* A symbolic model's symbols, in the table's order (sorted by name, the
 * order NAME_run takes their values): {"name":"sequence","min":1,"max":512}. */
static int table_symbols(const char *json, char names[][64], long *low, long *high) {
    const char *p = strstr(json, "\"symbols\":[");
    if (!p) die("the model's table has no entry", "symbols");
    int count = 0;
    for (p += 11; *p == '{' || *p == ','; p++) {
        if (*p == ',') continue;
        if (count == MAX_SYMBOLS) die("too many symbols for this runner", NULL);
        const char *name = strstr(p, "\"name\":\""), *min = strstr(p, "\"min\":"), *max = strstr(p, "\"max\":");
        if (!name || !min || !max) die("a symbol of the model's table is malformed", NULL);
        name += 8;
        const char *end = strchr(name, '"');
        if (!end || end - name >= 64) die("a symbol of the model's table is malformed", NULL);
        snprintf(names[count], 64, "%.*s", (int)(end - name), name);
        low[count] = strtol(min + 6, NULL, 10);
        high[count] = strtol(max + 6, NULL, 10);
        count++;
        p = strchr(p, '}');
        if (!p) die("a symbol of the model's table is malformed", NULL);
    }
    return count;
}

static long json_integer(const char *json, const char *key) {
    char pattern[48];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *p = strstr(json, pattern);
    return p ? strtol(p + strlen(pattern), NULL, 10) : -1;
}

/* --- files ----------------------------------------------------------- */

static void *read_file(const char *path, size_t expected, const char *what) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open", path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (size < 0 || (size_t)size != expected) {
        fprintf(stderr, "run_model: %s has %ld bytes; the model's %s need %zu\n", path, size, what, expected);
        exit(1);
    }
    /* 64-byte aligned, as the weight pool's offsets assume */
    void *data = aligned_alloc(64, expected ? (expected + 63) / 64 * 64 : 64);
    if (!data) die("out of memory reading", path);
    if (expected && fread(data, 1, expected, f) != expected) die("cannot read", path);
    fclose(f);
    return data;
}

/* The weights, memory-mapped read-only (page-aligned, so the weight pool's
 * 64-byte offsets hold): loaded once, shared with the page cache, never
 * copied to the heap. */
static const void *map_weights(const char *path, size_t expected) {
    static const char none[64] __attribute__((aligned(64))) = {0};
    int fd = open(path, O_RDONLY);
    if (fd < 0) die("cannot open", path);
    struct stat st;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size != expected) {
        fprintf(stderr, "run_model: %s has %lld bytes; the model's weights need %zu\n", path,
                (long long)st.st_size, expected);
        exit(1);
    }
    const void *data = expected ? mmap(NULL, expected, PROT_READ, MAP_PRIVATE, fd, 0) : none;
    if (data == MAP_FAILED) die("cannot map", path);
    close(fd);
    return data;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* the value of option argv[i] ("--repeat", "--warmup", "--threads"): a positive count */
static long count_option(int argc, char **argv, int i) {
    char *end = NULL;
    long value = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
    if (i + 1 >= argc || *end != '\0' || value < 1 || value > 1000000000L) {
        fprintf(stderr, "run_model: %s needs a positive whole number\n", argv[i]);
        exit(2);
    }
    return value;
}

int main(int argc, char **argv) {
    long repeat = 1, warmup = 0, threads = 0; /* threads 0: as compiled */
    int timed = 0, dims = 0;
    const char *dim_options[MAX_SYMBOLS];
    for (int i = 4; i < argc; i += 2) {
        if (strcmp(argv[i], "--repeat") == 0) {
            repeat = count_option(argc, argv, i);
            timed = 1;
        } else if (strcmp(argv[i], "--warmup") == 0) {
            warmup = count_option(argc, argv, i);
        } else if (strcmp(argv[i], "--threads") == 0) {
            threads = count_option(argc, argv, i);
        } else if (strcmp(argv[i], "--dim") == 0 && i + 1 < argc && dims < MAX_SYMBOLS) {
            dim_options[dims++] = argv[i + 1];
        } else {
            argc = 0; /* unknown option: the usage line */
        }
    }
    if (argc < 4) {
        fprintf(stderr,
                "usage: %s model.so input.bin output.bin [--repeat N] [--warmup N] [--threads N] "
                "[--dim NAME=VALUE ...]\n",
                argv[0]);
        return 2;
    }

    char library_path[4096];
    snprintf(library_path, sizeof library_path, "%s%s", strchr(argv[1], '/') ? "" : "./", argv[1]);
    void *library = dlopen(library_path, RTLD_NOW | RTLD_LOCAL);
    if (!library) die("cannot load the model", dlerror());
    text_fn functions = (text_fn)dlsym(library, "pyocc_functions");
    if (!functions) die("not a library written by pyocc (no pyocc_functions)", argv[1]);
    /* pyocc_functions() is a JSON list of names: take the first */
    const char *names = functions();
    const char *start = strchr(names, '"'), *end = start ? strchr(start + 1, '"') : NULL;
    if (!start || !end || end - start > 200) die("no model in the library", argv[1]);
    char name[256], symbol[300];
    snprintf(name, sizeof name, "%.*s", (int)(end - start - 1), start + 1);

#define LOOKUP(type, var, suffix)                                   \
    snprintf(symbol, sizeof symbol, "%s_%s", name, suffix);         \
    type var = (type)dlsym(library, symbol);                        \
    if (!var) die("the library lacks", symbol);
    LOOKUP(text_fn, meta_fn, "meta")
    LOOKUP(init_fn, init, "init")
    LOOKUP(run_fn, run, "run")
    LOOKUP(destroy_fn, destroy, "destroy")

    /* OpenBLAS (linked by models whose kernels call the BLAS) starts with a
     * thread per core; pyocc's models split their BLAS calls between their
     * own threads (--threads), each calling it on one: as in pyocc's runtime */
    void (*blas_threads)(int) = (void (*)(int))dlsym(library, "scipy_openblas_set_num_threads");
    if (blas_threads) blas_threads(1);

    const char *meta = meta_fn();
    long abi = json_integer(meta, "abi");
    if (abi != 1 && abi != 2) die("the model uses another ABI version than 1 or 2", NULL);
    long numpy_sites = json_integer(meta, "numpy_sites");
    if (numpy_sites != 0) {
        fprintf(stderr, "run_model: %s: %ld ops call numpy kernels (compiled with --kernels numpy, or ops "
                        "without a native kernel); a C program runs models without numpy sites only\n",
                argv[1], numpy_sites < 0 ? 1 : numpy_sites);
        return 1;
    }
    size_t input_bytes[MAX_TENSORS], output_bytes[MAX_TENSORS];
    int inputs, outputs;
    int64_t values[MAX_SYMBOLS];
    if (abi == 1) {
        if (dims) {
            fprintf(stderr, "run_model: %s has no symbolic dimension (compiled with fixed shapes); drop --dim\n",
                    argv[1]);
            return 1;
        }
        inputs = tensor_bytes(meta, "inputs", input_bytes);
        outputs = tensor_bytes(meta, "outputs", output_bytes);
    } else {
        /* every symbol's value from a --dim, within its range */
        char names[MAX_SYMBOLS][64];
        long low[MAX_SYMBOLS], high[MAX_SYMBOLS];
        int symbols = table_symbols(meta, names, low, high);
        for (int d = 0; d < dims; d++) {
            const char *equals = strchr(dim_options[d], '=');
            int known = 0;
            for (int k = 0; equals && k < symbols; k++)
                known |= strlen(names[k]) == (size_t)(equals - dim_options[d]) &&
                         strncmp(names[k], dim_options[d], (size_t)(equals - dim_options[d])) == 0;
            if (!known) {
                fprintf(stderr, "run_model: --dim '%s' names no symbolic dimension of %s (give NAME=VALUE; it has",
                        dim_options[d], argv[1]);
                for (int k = 0; k < symbols; k++) fprintf(stderr, " %s", names[k]);
                fprintf(stderr, ")\n");
                return 2;
            }
        }
        for (int k = 0; k < symbols; k++) {
            const char *given = NULL;
            for (int d = 0; d < dims; d++)
                if (strncmp(dim_options[d], names[k], strlen(names[k])) == 0 && dim_options[d][strlen(names[k])] == '=')
                    given = dim_options[d] + strlen(names[k]) + 1;
            char *end = NULL;
            long value = given ? strtol(given, &end, 10) : 0;
            if (!given || *end != '\0' || end == given || value < low[k] || value > high[k]) {
                fprintf(stderr, "run_model: %s has a symbolic dimension %s: give --dim %s=N with N in %ld..%ld\n",
                        argv[1], names[k], names[k], low[k], high[k]);
                return 2;
            }
            values[k] = value;
        }
        LOOKUP(tensor_bytes_fn, sizes, "tensor_bytes")
        inputs = tensor_count(meta, "inputs");
        outputs = tensor_count(meta, "outputs");
        int64_t bytes[2 * MAX_TENSORS];
        sizes(values, bytes);
        for (int i = 0; i < inputs; i++) input_bytes[i] = (size_t)bytes[i];
        for (int i = 0; i < outputs; i++) output_bytes[i] = (size_t)bytes[inputs + i];
    }
    size_t total_in = 0, total_out = 0;
    for (int i = 0; i < inputs; i++) total_in += input_bytes[i];
    for (int i = 0; i < outputs; i++) total_out += output_bytes[i];

    /* the weights: model.weights beside model.so */
    const char *weights_key = strstr(meta, "\"weights\":{\"bytes\":");
    size_t weight_bytes = weights_key ? (size_t)strtoull(weights_key + 19, NULL, 10) : 0;
    char weights_path[4096];
    size_t stem = strlen(argv[1]);
    if (stem > 3 && strcmp(argv[1] + stem - 3, ".so") == 0) stem -= 3;
    snprintf(weights_path, sizeof weights_path, "%.*s.weights", (int)stem, argv[1]);
    const void *weights = map_weights(weights_path, weight_bytes);

    char *in = read_file(argv[2], total_in, "inputs");
    char *out = aligned_alloc(64, total_out ? (total_out + 63) / 64 * 64 : 64);
    if (!out) die("out of memory", NULL);
    void *in_pointers[MAX_TENSORS], *out_pointers[MAX_TENSORS];
    size_t offset = 0;
    for (int i = 0; i < inputs; i++) in_pointers[i] = in + offset, offset += input_bytes[i];
    offset = 0;
    for (int i = 0; i < outputs; i++) out_pointers[i] = out + offset, offset += output_bytes[i];

    if (threads) {
        snprintf(symbol, sizeof symbol, "%s_set_threads", name);
        threads_fn set_threads = (threads_fn)dlsym(library, symbol);
        if (set_threads ? set_threads((int32_t)(threads > 256 ? 257 : threads)) != 0 : threads > 1) {
            fprintf(stderr, "run_model: %s: %s\n", argv[1],
                    set_threads ? "--threads must be at most 256"
                                : "compiled for one thread; compile it with pyocc compile --threads N to run it "
                                  "on more");
            return 1;
        }
    }
    void *no_callback[1] = {NULL};
    init(no_callback);
    double *times = malloc(sizeof(double) * (size_t)repeat);
    if (!times) die("out of memory", NULL);
    for (long r = -warmup; r < repeat; r++) { /* r < 0: a warm-up run, not timed */
        int64_t state[4] = {0, 0, 0, 0};
        double begin = now_ms();
        int32_t status = abi == 1 ? run(in_pointers, out_pointers, weights, state)
                                  : ((symbolic_run_fn)run)(in_pointers, out_pointers, weights, state, values);
        if (r >= 0) times[r] = now_ms() - begin;
        if (status == 1) die("out of memory (the allocator returned NULL)", NULL);
        if (status == 2) die("a symbolic dimension's value is out of the range it was compiled for", NULL);
        if (status != 0) die("the model failed", NULL);
    }
    destroy();

    FILE *f = fopen(argv[3], "wb");
    if (!f || (total_out && fwrite(out, 1, total_out, f) != total_out) || fclose(f) != 0)
        die("cannot write", argv[3]);
    printf("%s: %d inputs (%zu bytes), %d outputs (%zu bytes)\n", name, inputs, total_in, outputs, total_out);
    if (timed) {
        qsort(times, (size_t)repeat, sizeof(double), by_value);
        double median = repeat % 2 ? times[repeat / 2] : (times[repeat / 2 - 1] + times[repeat / 2]) / 2;
        printf("median %.3f ms per run over %ld runs\n", median, repeat);
    }
    free(times);
    free(out);
    free(in);
    if (weight_bytes) munmap((void *)weights, weight_bytes);
    dlclose(library);
    return 0;
}
