/* C tests of the corun C ABI: results against a tiny C reference, resumption, and every
 * error status. Built with -std=c99 -Wall -Wextra -Werror -pedantic
 * -fsanitize=address,undefined and linked against libcorun.a (see capi/run_tests.sh). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corun.h"

static int failures = 0;
static int checks = 0;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        checks++;                                                                   \
        if (!(cond)) {                                                              \
            failures++;                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                           \
    } while (0)

#define N 4096

/* xorshift64*: the same inputs every run. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

/* ---- the reference: one position at a time ------------------------------------- */

/* b follows a by step in exact arithmetic (no wrap), per type. */
#define FOLLOWS(T, MAX)                                                          \
    static int follows_##T(T a, T b, uint64_t step) {                            \
        return (uint64_t)(MAX - a) >= step && (T)(a + (T)step) == b;             \
    }
FOLLOWS(uint32_t, UINT32_MAX)
FOLLOWS(uint64_t, UINT64_MAX)

static int follows_int32_t(int32_t a, int32_t b, uint64_t step) {
    return (int64_t)a + (int64_t)step == (int64_t)b && step <= (uint64_t)INT32_MAX * 2 + 1;
}
static int follows_int64_t(int64_t a, int64_t b, uint64_t step) {
    /* a + step == b without overflow: b - a (as a 65-bit difference) equals step. */
    if (b < a) return 0;
    return (uint64_t)b - (uint64_t)a == step;
}

#define REFERENCE(T)                                                                  \
    static size_t ref_group_##T(const T *src, const T *dst, size_t len, size_t max_len, \
                                uint64_t ss, uint64_t ds, corun_span *out) {          \
        size_t n = 0, start = 0, i;                                                   \
        for (i = 1; i <= len; i++) {                                                  \
            int joins = i < len && follows_##T(src[i - 1], src[i], ss) &&              \
                        follows_##T(dst[i - 1], dst[i], ds) &&                         \
                        (max_len == 0 || i - start < max_len);                         \
            if (!joins) {                                                             \
                out[n].start = start;                                                 \
                out[n].len = i - start;                                               \
                n++;                                                                  \
                start = i;                                                            \
            }                                                                         \
        }                                                                             \
        return len ? n : 0;                                                           \
    }
REFERENCE(uint32_t)
REFERENCE(uint64_t)
REFERENCE(int32_t)
REFERENCE(int64_t)

/* Arrays made of runs (uniform random numbers almost never make any), starting near
 * `base` and, for some seeds, near the type's maximum so that wraps occur. */
#define BUILD(T)                                                                  \
    static void build_##T(T *src, T *dst, size_t len, T s0, T d0) {               \
        T s = s0, d = d0;                                                         \
        size_t i;                                                                 \
        for (i = 0; i < len; i++) {                                               \
            uint64_t r = rnd() % 16;                                              \
            if (i > 0) {                                                          \
                /* Wrapping arithmetic in uint64_t: no signed overflow. */     \
                s = (T)((uint64_t)s + 1);                                         \
                d = (T)((uint64_t)d + 1);                                         \
                if (r == 0) s = (T)((uint64_t)s + rnd() % 7);                     \
                if (r == 1) d = (T)((uint64_t)d - rnd() % 7);                     \
            }                                                                     \
            src[i] = s;                                                           \
            dst[i] = d;                                                           \
        }                                                                         \
    }
BUILD(uint32_t)
BUILD(uint64_t)
BUILD(int32_t)
BUILD(int64_t)

static corun_span got[N + 1], want[N + 1];
static uint32_t s32[N], d32[N];
static uint64_t s64[N], d64[N];
static int32_t si32[N], di32[N];
static int64_t si64[N], di64[N];

/* group_<T> one shot and resumed through small buffers, against the reference. */
#define TEST_GROUP(T, SUFFIX, S, D, S0, D0)                                                \
    static void test_group_##SUFFIX(void) {                                                \
        int round;                                                                         \
        for (round = 0; round < 40; round++) {                                             \
            size_t len = (size_t)(rnd() % N), max_len = round % 3 ? 0 : 1 + rnd() % 70;     \
            corun_options opt = CORUN_OPTIONS_DEFAULT;                                     \
            size_t nwant, count = 0, pos = 0, n = 0;                                       \
            corun_progress p;                                                              \
            opt.max_len = max_len;                                                         \
            build_##T(S, D, len, (T)((uint64_t)(S0) - rnd() % 300), (T)(D0));              \
            nwant = ref_group_##T(S, D, len, max_len, 1, 1, want);                         \
            CHECK(corun_count_runs_##SUFFIX(S, len, D, len, &opt, &count) == CORUN_OK);    \
            CHECK(count == nwant);                                                         \
            CHECK(corun_group_##SUFFIX(S, len, D, len, &opt, got, N + 1, &p) == CORUN_OK); \
            CHECK(p.consumed == len && p.spans == nwant);                                  \
            CHECK(memcmp(got, want, nwant * sizeof(corun_span)) == 0);                     \
            while (pos < len) { /* resume with room for 1 to 5 spans */                    \
                size_t cap = 1 + rnd() % 5, k;                                             \
                CHECK(corun_group_##SUFFIX(S + pos, len - pos, D + pos, len - pos, &opt,   \
                                          got, cap, &p) == CORUN_OK);                      \
                CHECK(p.spans >= 1 && p.spans <= cap && p.consumed > 0);                   \
                for (k = 0; k < p.spans && n < nwant; k++, n++)                            \
                    CHECK(got[k].start + pos == want[n].start && got[k].len == want[n].len); \
                if (p.consumed == 0) break;                                                \
                pos += p.consumed;                                                         \
            }                                                                              \
            CHECK(n == nwant);                                                             \
        }                                                                                  \
    }
TEST_GROUP(uint32_t, u32, s32, d32, UINT32_MAX, 7)
TEST_GROUP(uint64_t, u64, s64, d64, UINT64_MAX, 1u << 20)
TEST_GROUP(int32_t, i32, si32, di32, INT32_MAX, -100)
TEST_GROUP(int64_t, i64, si64, di64, INT64_MAX, 5)

/* Strided steps: token indices in pages of 16. */
static void test_steps(void) {
    uint32_t src[] = {0, 16, 32, 96, 112}, dst[] = {160, 176, 192, 208, 224};
    corun_options opt = {0, 16, 16, CORUN_ASCENDING};
    corun_span out[5];
    corun_progress p;
    CHECK(corun_group_u32(src, 5, dst, 5, &opt, out, 5, &p) == CORUN_OK);
    CHECK(p.spans == 2 && out[0].len == 3 && out[1].start == 3 && out[1].len == 2);
}

/* Descriptors for K and V of 3 layers against a C loop, both orders, resumed. */
static void test_descriptors(void) {
    enum { LAYERS = 6, LEN = 1000 };
    corun_layer layers[LAYERS];
    static corun_descriptor all[LAYERS * LEN], want_d[LAYERS * LEN], small[3];
    corun_layout layout;
    corun_cursor cur;
    corun_written w;
    size_t nspans, l, k, n = 0, total = 0;
    int order;
    for (l = 0; l < LAYERS; l++) {
        layers[l].src_base = (uint64_t)l << 32;
        layers[l].dst_base = ((uint64_t)1 << 44) + ((uint64_t)l << 32);
        layers[l].item_len = layers[l].src_stride = layers[l].dst_stride = 4096;
    }
    build_uint32_t(s32, d32, LEN, 100, 9000);
    nspans = ref_group_uint32_t(s32, d32, LEN, 0, 1, 1, want);
    for (order = 0; order < 2; order++) {
        layout.layers = layers;
        layout.n_layers = LAYERS;
        layout.max_bytes = 0;
        layout.order = (uint32_t)order;
        n = 0;
        for (k = 0; k < (order ? nspans : LAYERS); k++) {
            size_t j;
            for (j = 0; j < (order ? LAYERS : nspans); j++) {
                size_t li = order ? j : k, si = order ? k : j;
                want_d[n].src_addr = layers[li].src_base + (uint64_t)s32[want[si].start] * 4096;
                want_d[n].dst_addr = layers[li].dst_base + (uint64_t)d32[want[si].start] * 4096;
                want_d[n].len = (uint64_t)want[si].len * 4096;
                n++;
            }
        }
        memset(&cur, 0, sizeof cur);
        CHECK(corun_descriptors_u32(s32, LEN, d32, LEN, NULL, &layout, got, N, &cur, all,
                                    LAYERS * LEN, &w) == CORUN_OK);
        CHECK(w.done == 1 && w.items == n);
        CHECK(memcmp(all, want_d, n * sizeof(corun_descriptor)) == 0);
        /* Resumed three at a time. */
        memset(&cur, 0, sizeof cur);
        total = 0;
        do {
            CHECK(corun_descriptors_u32(s32, LEN, d32, LEN, NULL, &layout, got, N, &cur, small,
                                        3, &w) == CORUN_OK);
            CHECK(w.items <= 3 && total + w.items <= n);
            if (total + w.items <= n)
                CHECK(memcmp(small, want_d + total, w.items * sizeof(corun_descriptor)) == 0);
            total += w.items;
        } while (!w.done && w.items > 0);
        CHECK(total == n);
    }
}

/* Gather lists: a fragmented source into one destination range. */
static void test_gather(void) {
    uint32_t src[] = {40, 41, 7, 90, 91, 3, 12, 13};
    uint32_t dst[] = {200, 201, 202, 203, 204, 205, 206, 207};
    corun_layer layer = {0, (uint64_t)1 << 40, 4096, 4096, 4096};
    corun_layout layout = {&layer, 1, 0, CORUN_LAYER_MAJOR};
    corun_work_request reqs[4];
    corun_sge sges[8];
    corun_span scratch[8];
    corun_cursor cur = {0, 0, 0};
    corun_written w;
    CHECK(corun_gather_u32(src, 8, dst, 8, NULL, &layout, 30, scratch, 8, &cur, reqs, 4, sges, 8,
                           &w) == CORUN_OK);
    CHECK(w.done && w.items == 1 && w.sges == 5);
    CHECK(reqs[0].dst_addr == ((uint64_t)1 << 40) + 200 * 4096 && reqs[0].len == 8 * 4096);
    CHECK(reqs[0].first_sge == 0 && reqs[0].sge_count == 5);
    CHECK(sges[0].addr == 40 * 4096 && sges[0].len == 2 * 4096);
    /* max_sge 2: three requests; a segment buffer of 1 holds none of them whole. */
    memset(&cur, 0, sizeof cur);
    CHECK(corun_gather_u32(src, 8, dst, 8, NULL, &layout, 2, scratch, 8, &cur, reqs, 4, sges, 8,
                           &w) == CORUN_OK);
    CHECK(w.done && w.items == 3 && w.sges == 5);
    memset(&cur, 0, sizeof cur);
    CHECK(corun_gather_u32(src, 8, dst, 8, NULL, &layout, 2, scratch, 8, &cur, reqs, 4, sges, 1,
                           &w) == CORUN_OK);
    CHECK(!w.done && w.items == 0 && w.sges == 0);
}

/* Every error status, each from the call that can produce it. */
static void test_errors(void) {
    uint32_t buf[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint64_t big[2] = {UINT64_MAX / 2, UINT64_MAX / 2 + 1};
    int32_t neg[3] = {5, -3, -2};
    corun_span spans[8];
    corun_progress p;
    corun_descriptor d[8];
    corun_cursor cur = {0, 0, 0};
    corun_written w;
    corun_layer layer = {0, 0, 4096, 4096, 4096};
    corun_layer zero = {0, 0, 0, 0, 0};
    corun_layout layout = {&layer, 1, 0, CORUN_LAYER_MAJOR};
    corun_work_request reqs[2];
    corun_sge sges[2];
    size_t count = 99;
    unsigned char raw[64];
    uint32_t *misaligned = (uint32_t *)(void *)(raw + 1);
    int code;

    /* NULL with a length; NULL with length 0 is an empty input. */
    CHECK(corun_count_runs_u32(NULL, 3, buf, 3, NULL, &count) == CORUN_ERR_NULL);
    CHECK(corun_count_runs_u32(NULL, 0, NULL, 0, NULL, &count) == CORUN_OK && count == 0);
    CHECK(corun_count_runs_u32(buf, 3, buf, 3, NULL, NULL) == CORUN_ERR_NULL);
    CHECK(corun_group_u32(buf, 8, buf, 8, NULL, NULL, 4, &p) == CORUN_ERR_NULL);
    CHECK(corun_group_u32(buf, 8, buf, 8, NULL, spans, 8, NULL) == CORUN_ERR_NULL);
    CHECK(corun_descriptors_u32(buf, 8, buf, 8, NULL, NULL, spans, 8, &cur, d, 8, &w) ==
          CORUN_ERR_NULL);
    CHECK(corun_descriptors_u32(buf, 8, buf, 8, NULL, &layout, spans, 8, NULL, d, 8, &w) ==
          CORUN_ERR_NULL);
    CHECK(corun_descriptors_u32(buf, 8, buf, 8, NULL, &layout, spans, 8, &cur, d, 8, NULL) ==
          CORUN_ERR_NULL);
    /* An empty output buffer with input: no progress, not an error. */
    CHECK(corun_group_u32(buf, 8, buf, 8, NULL, NULL, 0, &p) == CORUN_OK && p.spans == 0 &&
          p.consumed == 0);

    /* Misaligned input and output. */
    CHECK(corun_count_runs_u32(misaligned, 4, misaligned, 4, NULL, &count) ==
          CORUN_ERR_MISALIGNED);
    CHECK(corun_group_u32(buf, 8, buf, 8, NULL, (corun_span *)(void *)(raw + 3), 2, &p) ==
          CORUN_ERR_MISALIGNED);

    /* Overlapping buffers: output over input, out-pointer inside the output. */
    CHECK(corun_group_u32(buf, 8, buf, 8, NULL, (corun_span *)(void *)buf, 2, &p) ==
          CORUN_ERR_OVERLAP);
    CHECK(corun_group_u32(buf, 8, buf, 8, NULL, spans, 8, (corun_progress *)(void *)&spans[2]) ==
          CORUN_ERR_OVERLAP);
    CHECK(corun_descriptors_u32(buf, 8, buf, 8, NULL, &layout, spans, 8, &cur,
                                (corun_descriptor *)(void *)spans, 2, &w) == CORUN_ERR_OVERLAP);
    CHECK(corun_gather_u32(buf, 8, buf, 8, NULL, &layout, 2, spans, 8, &cur,
                           (corun_work_request *)(void *)sges, 1, sges, 2, &w) ==
          CORUN_ERR_OVERLAP);

    /* Lengths. */
    CHECK(corun_count_runs_u32(buf, 8, buf, 7, NULL, &count) == CORUN_ERR_LENGTH_MISMATCH);
    CHECK(corun_count_runs_u32(buf, 8, NULL, 0, NULL, &count) == CORUN_ERR_LENGTH_MISMATCH);
    CHECK(corun_count_runs_u32(buf, SIZE_MAX / 2, buf, SIZE_MAX / 2, NULL, &count) ==
          CORUN_ERR_TOO_LONG);

    /* Descriptor errors. */
    CHECK(corun_descriptors_u32(buf, 8, buf, 8, NULL, &layout, spans, 0, &cur, d, 8, &w) ==
          CORUN_ERR_SCRATCH_TOO_SMALL);
    layout.layers = &zero;
    CHECK(corun_descriptors_u32(buf, 8, buf, 8, NULL, &layout, spans, 8, &cur, d, 8, &w) ==
          CORUN_ERR_ZERO_ITEM_LEN && w.error_layer == 0 && w.items == 0);
    layout.layers = &layer;
    layout.max_bytes = 100;
    CHECK(corun_descriptors_u32(buf, 8, buf, 8, NULL, &layout, spans, 8, &cur, d, 8, &w) ==
          CORUN_ERR_CAP_BELOW_ITEM && w.error_layer == 0);
    layout.max_bytes = 0;
    layout.order = 7;
    CHECK(corun_descriptors_u32(buf, 8, buf, 8, NULL, &layout, spans, 8, &cur, d, 8, &w) ==
          CORUN_ERR_INVALID_ARGUMENT);
    layout.order = CORUN_RUN_MAJOR;
    CHECK(corun_gather_u32(buf, 8, buf, 8, NULL, &layout, 0, spans, 8, &cur, reqs, 2, sges, 2,
                           &w) == CORUN_ERR_ZERO_MAX_SGE);
    /* A negative index at position 1 (after one valid descriptor for position 0). */
    CHECK(corun_descriptors_i32(neg, 3, neg, 3, NULL, &layout, spans, 8, &cur, d, 8, &w) ==
          CORUN_ERR_NEGATIVE_INDEX);
    CHECK(w.error_layer == 0 && w.error_position == 1 && w.items == 1);
    CHECK(d[0].src_addr == 5 * 4096 && d[0].len == 4096);
    /* An address past 2^64: the second run's page starts beyond it. */
    big[0] = 3;
    CHECK(corun_descriptors_u64(big, 2, big, 2, NULL, &layout, spans, 8, &cur, d, 8, &w) ==
          CORUN_ERR_OVERFLOW);
    CHECK(w.error_position == 1 && w.items == 1);
    CHECK(corun_gather_u64(big, 2, big, 2, NULL, &layout, 2, spans, 8, &cur, reqs, 2, sges, 2,
                           &w) == CORUN_ERR_OVERFLOW);
    CHECK(w.error_position == 1 && w.items == 1 && reqs[0].sge_count == 1);

    /* Every status has a description; unknown codes too. */
    for (code = CORUN_OK; code <= CORUN_ERR_DUPLICATE_DESTINATION; code++)
        CHECK(corun_strerror(code) != NULL && strlen(corun_strerror(code)) > 0);
    CHECK(strcmp(corun_strerror(-1), "unknown corun status code") == 0);
    CHECK(strcmp(corun_strerror(CORUN_ERR_OVERLAP), "two buffers overlap") == 0);
}

/* Out-parameters are defined after every call: a dirty `written`, `progress` or `count`
 * (the previous call's, or uninitialised memory) is zero after each early error. */
static int is_zero(const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    size_t i;
    for (i = 0; i < n; i++)
        if (b[i]) return 0;
    return 1;
}
#define DIRTY(x) memset(&(x), 0xAB, sizeof(x))
/* Every field zero (padding bytes carry no value: compare fields, not bytes). */
static int written_zero(const corun_written *w) {
    return w->items == 0 && w->sges == 0 && w->done == 0 && w->error_layer == 0 &&
           w->error_position == 0;
}

static void test_out_params_after_errors(void) {
    uint32_t buf[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint64_t b64[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int32_t bi32[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t bi64[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    corun_span spans[8];
    corun_progress p;
    corun_descriptor d[8];
    corun_cursor cur = {0, 0, 0};
    corun_written w;
    corun_layer layer = {0, 0, 4096, 4096, 4096};
    corun_layout layout = {&layer, 1, 0, CORUN_LAYER_MAJOR};
    corun_layout bad_order = {&layer, 1, 0, 7};
    corun_layout null_layers = {NULL, 1, 0, CORUN_LAYER_MAJOR};
    corun_work_request reqs[4];
    corun_sge sges[4];
    size_t count;
    int k;
    /* Each early error of the descriptor and gather calls, by number. */
    for (k = 0; k < 9; k++) {
        const uint32_t *src = buf, *dst = buf;
        size_t slen = 8, dlen = 8, scap = 8;
        const corun_layout *lay = &layout;
        corun_descriptor *out = d;
        corun_work_request *rq = reqs;
        corun_cursor *cp = &cur;
        corun_status want;
        switch (k) {
        case 0: src = NULL; want = CORUN_ERR_NULL; break;
        case 1: dlen = 7; want = CORUN_ERR_LENGTH_MISMATCH; break;
        case 2: out = (corun_descriptor *)(void *)spans;
                rq = (corun_work_request *)(void *)spans; want = CORUN_ERR_OVERLAP; break;
        case 3: lay = &bad_order; want = CORUN_ERR_INVALID_ARGUMENT; break;
        case 4: slen = dlen = SIZE_MAX / 2; want = CORUN_ERR_TOO_LONG; break;
        case 5: lay = NULL; want = CORUN_ERR_NULL; break;
        case 6: lay = &null_layers; want = CORUN_ERR_NULL; break;
        case 7: scap = 0; want = CORUN_ERR_SCRATCH_TOO_SMALL; break;
        default: cp = NULL; want = CORUN_ERR_NULL; break;
        }
        DIRTY(w);
        CHECK(corun_descriptors_u32(src, slen, dst, dlen, NULL, lay, spans, scap, cp, out, 8, &w) ==
              want);
        CHECK(written_zero(&w));
        DIRTY(w);
        CHECK(corun_gather_u32(src, slen, dst, dlen, NULL, lay, 2, spans, scap, cp, rq, 4, sges, 4,
                               &w) == want);
        CHECK(written_zero(&w));
    }
    /* The other index types share the code; one early error each proves the wiring. */
    DIRTY(w);
    CHECK(corun_descriptors_u64(b64, 8, b64, 7, NULL, &layout, spans, 8, &cur, d, 8, &w) ==
          CORUN_ERR_LENGTH_MISMATCH && written_zero(&w));
    DIRTY(w);
    CHECK(corun_descriptors_i32(bi32, 8, bi32, 7, NULL, &layout, spans, 8, &cur, d, 8, &w) ==
          CORUN_ERR_LENGTH_MISMATCH && written_zero(&w));
    DIRTY(w);
    CHECK(corun_descriptors_i64(bi64, 8, bi64, 7, NULL, &layout, spans, 8, &cur, d, 8, &w) ==
          CORUN_ERR_LENGTH_MISMATCH && written_zero(&w));
    DIRTY(w);
    CHECK(corun_gather_u64(b64, 8, NULL, 8, NULL, &layout, 2, spans, 8, &cur, reqs, 4, sges, 4,
                           &w) == CORUN_ERR_NULL && written_zero(&w));
    DIRTY(w);
    CHECK(corun_gather_i32(bi32, 8, bi32, 8, NULL, &bad_order, 2, spans, 8, &cur, reqs, 4, sges,
                           4, &w) == CORUN_ERR_INVALID_ARGUMENT && written_zero(&w));
    DIRTY(w);
    CHECK(corun_gather_i64(bi64, 8, bi64, 8, NULL, &layout, 0, spans, 8, &cur, reqs, 4, sges, 4,
                           &w) == CORUN_ERR_ZERO_MAX_SGE && written_zero(&w));
    /* A success after a dirty start is fully defined too. */
    DIRTY(w);
    memset(&cur, 0, sizeof cur);
    CHECK(corun_descriptors_u32(buf, 8, buf, 8, NULL, &layout, spans, 8, &cur, d, 8, &w) ==
              CORUN_OK &&
          w.items == 1 && w.done == 1 && w.sges == 0 && w.error_layer == 0 &&
          w.error_position == 0);
    /* count and progress. */
    DIRTY(count);
    CHECK(corun_count_runs_u32(buf, 8, buf, 7, NULL, &count) == CORUN_ERR_LENGTH_MISMATCH &&
          count == 0);
    DIRTY(count);
    CHECK(corun_count_runs_i64(NULL, 2, bi64, 2, NULL, &count) == CORUN_ERR_NULL && count == 0);
    DIRTY(p);
    CHECK(corun_group_u32(buf, 8, buf, 7, NULL, spans, 8, &p) == CORUN_ERR_LENGTH_MISMATCH &&
          is_zero(&p, sizeof p));
    DIRTY(p);
    CHECK(corun_group_u64(b64, 8, b64, 8, NULL, (corun_span *)(void *)b64, 2, &p) ==
              CORUN_ERR_OVERLAP &&
          is_zero(&p, sizeof p));
    DIRTY(p);
    CHECK(corun_group_i32(bi32, SIZE_MAX / 2, bi32, SIZE_MAX / 2, NULL, spans, 8, &p) ==
              CORUN_ERR_TOO_LONG &&
          is_zero(&p, sizeof p));
}

/* Either direction: descending runs merge, and their descriptors start at the lowest page. */
static void test_either(void) {
    const uint32_t src[5] = {99, 98, 97, 10, 11};
    const uint32_t dst[5] = {9, 8, 7, 20, 21};
    corun_options opt = CORUN_OPTIONS_DEFAULT;
    corun_span spans[8], scratch[8];
    corun_progress p;
    corun_layer layer = {0, 1u << 20, 64, 64, 64};
    corun_layout layout = {&layer, 1, 0, CORUN_LAYER_MAJOR};
    corun_cursor cur = {0, 0, 0};
    corun_descriptor d[8];
    corun_written w;
    size_t count = 0;
    CHECK(corun_count_runs_u32(src, 5, dst, 5, &opt, &count) == CORUN_OK && count == 4);
    opt.direction = CORUN_EITHER;
    CHECK(corun_count_runs_u32(src, 5, dst, 5, &opt, &count) == CORUN_OK && count == 2);
    CHECK(corun_group_u32(src, 5, dst, 5, &opt, spans, 8, &p) == CORUN_OK && p.spans == 2 &&
          spans[0].len == 3 && spans[1].start == 3);
    CHECK(corun_descriptors_u32(src, 5, dst, 5, &opt, &layout, scratch, 8, &cur, d, 8, &w) ==
              CORUN_OK &&
          w.items == 2);
    CHECK(d[0].src_addr == 97 * 64 && d[0].dst_addr == (1u << 20) + 7 * 64 && d[0].len == 3 * 64);
    opt.direction = 2;
    CHECK(corun_count_runs_u32(src, 5, dst, 5, &opt, &count) == CORUN_ERR_INVALID_ARGUMENT);
}

/* Order-free grouping: sorted by destination, the fewest runs; a repeated destination
 * names both positions; out-parameters are defined after every call. */
static void test_sort_by_destination(void) {
    const uint32_t src[4] = {12, 40, 10, 11};
    const uint32_t dst[4] = {2, 3, 0, 1};
    const uint32_t dup[4] = {7, 5, 6, 5};
    uint32_t s[4], d[4];
    size_t where[2] = {99, 99}, count = 0;
    CHECK(corun_sort_by_destination_u32(src, 4, dst, 4, s, d, 4, where) == CORUN_OK);
    CHECK(s[0] == 10 && s[1] == 11 && s[2] == 12 && s[3] == 40 && d[0] == 0 && d[3] == 3);
    CHECK(where[0] == 0 && where[1] == 0);
    CHECK(corun_count_runs_u32(s, 4, d, 4, NULL, &count) == CORUN_OK && count == 2);
    CHECK(corun_sort_by_destination_u32(src, 4, dup, 4, s, d, 4, where) ==
          CORUN_ERR_DUPLICATE_DESTINATION && where[0] == 1 && where[1] == 3);
    CHECK(corun_sort_by_destination_u32(src, 4, dup, 4, s, d, 4, NULL) ==
          CORUN_ERR_DUPLICATE_DESTINATION);
    CHECK(corun_sort_by_destination_u32(src, 4, dst, 4, s, d, 3, where) ==
          CORUN_ERR_LENGTH_MISMATCH && where[0] == 0);
    CHECK(corun_sort_by_destination_u32(src, 4, dst, 4, (uint32_t *)(void *)src, d, 4, where) ==
          CORUN_ERR_OVERLAP);
}

/* Placement: each first-side run into one extent (consecutive free ids), in the run's
 * direction; the rest keeps the list's order; errors leave *placement zeroed (but for
 * the positions of a page listed twice). */
static void test_place(void) {
    const int64_t first[6] = {9, 8, 7, 20, 21, 5};
    const int64_t free_list[9] = {40, 61, 60, 59, 30, 31, 32, 33, 99};
    const int64_t want_chosen[6] = {61, 60, 59, 32, 33, 40};
    const int64_t want_rest[3] = {30, 31, 99};
    int64_t chosen[6], rest[3];
    size_t scratch[48];
    corun_placement p;
    CHECK(corun_place_scratch_len(6, 9) == 48);
    CHECK(corun_place_scratch_len(SIZE_MAX, 0) == SIZE_MAX);
    CHECK(corun_place_i64(first, 6, free_list, 9, CORUN_EITHER, chosen, rest, scratch, 48, &p) ==
          CORUN_OK);
    CHECK(memcmp(chosen, want_chosen, sizeof chosen) == 0);
    CHECK(memcmp(rest, want_rest, sizeof rest) == 0);
    CHECK(p.bound == 3 && p.placed == 3 && p.own == 5 && p.split == 0 && p.fallback == 0);
    /* The other index types share the body: one call each. */
    const uint32_t f32[3] = {3, 4, 5}, r32[4] = {9, 10, 11, 12};
    uint32_t c32[3], rest32[1];
    CHECK(corun_place_u32(f32, 3, r32, 4, CORUN_ASCENDING, c32, rest32, scratch, 22, &p) ==
          CORUN_OK && p.fallback == 1 && c32[0] == 9 && rest32[0] == 12);
    /* Errors: *placement is zeroed first, nothing else is written. */
    p.placed = 99;
    CHECK(corun_place_i64(first, 6, free_list, 5, CORUN_EITHER, chosen, rest, scratch, 48, &p) ==
          CORUN_ERR_NOT_ENOUGH_FREE && p.placed == 0);
    p.placed = 99;
    CHECK(corun_place_i64(first, 6, free_list, 9, CORUN_EITHER, chosen, rest, scratch, 47, &p) ==
          CORUN_ERR_SCRATCH_TOO_SMALL && p.placed == 0);
    CHECK(corun_place_i64(first, 6, free_list, 9, 7, chosen, rest, scratch, 48, &p) ==
          CORUN_ERR_INVALID_ARGUMENT);
    CHECK(corun_place_i64(first, 6, free_list, 9, CORUN_EITHER, chosen, chosen + 2, scratch, 48,
                          &p) == CORUN_ERR_OVERLAP);
    CHECK(corun_place_i64(first, 6, free_list, 9, CORUN_EITHER, NULL, rest, scratch, 48, &p) ==
          CORUN_ERR_NULL);
    /* A page twice in free (7, at 0 and 3): placed, it would go out twice. */
    const uint32_t f5[5] = {1, 2, 10, 11, 20}, dup[6] = {7, 8, 50, 7, 8, 30};
    uint32_t c5[5], rest5[1];
    CHECK(corun_place_u32(f5, 5, dup, 6, CORUN_EITHER, c5, rest5, scratch, 48, &p) ==
          CORUN_ERR_DUPLICATE_PAGE && p.duplicate_in_free == 1 && p.duplicate_first == 0 &&
          p.duplicate_second == 3 && p.placed == 0);
    CHECK(corun_place_u32(dup, 5, f5, 5, CORUN_EITHER, c5, rest5, scratch, 48, &p) ==
          CORUN_ERR_DUPLICATE_PAGE && p.duplicate_in_free == 0 && p.duplicate_first == 0 &&
          p.duplicate_second == 3);
    CHECK(strcmp(corun_strerror(CORUN_ERR_NOT_ENOUGH_FREE),
                 "the free list holds fewer pages than the request") == 0);
}

/* The header's version macros and the library's version agree. */
static void test_version(void) {
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", CORUN_VERSION_MAJOR, CORUN_VERSION_MINOR,
             CORUN_VERSION_PATCH);
    CHECK(strcmp(CORUN_VERSION_STRING, want) == 0);
    CHECK(strcmp(corun_version(), CORUN_VERSION_STRING) == 0);
}

int main(void) {
    test_version();
    test_either();
    test_sort_by_destination();
    test_place();
    test_group_u32();
    test_group_u64();
    test_group_i32();
    test_group_i64();
    test_steps();
    test_descriptors();
    test_gather();
    test_errors();
    test_out_params_after_errors();
    printf("%d checks, %d failed\n", checks, failures);
    return failures != 0;
}
