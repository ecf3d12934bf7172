/* A KV-cache transfer agent over UCX: corun's descriptors and gather lists posted as
 * one-sided puts (UCP RMA, the API an RDMA WRITE agent uses), every byte verified.
 *
 * Two processes joined by a socket: the decode side maps a KV pool (`buffers` layer
 * buffers of `pool` pages), registers it (ucp_mem_map) and hands its worker address,
 * pool address and packed remote key to the prefill side. The prefill side fills its
 * own pool with a pattern naming buffer, page and word, then moves a request's pages in
 * three ways: a put per page, a put per corun descriptor (corun_descriptors_u32), a put
 * per gather segment (corun_gather_u32: UCX 1.13's ucp_put_nbx takes only contiguous
 * data, no iov, so a gather request is posted as its segments), each followed by a
 * flush and a check by the decode side: every byte of every page sent, and nothing else
 * changed. Over each transport given (UCX_TLS), side by side in one run.
 *
 *   ucx_agent [--pages N] [--buffers B] [--page-bytes P] [--tls tcp,sm] [--rounds R]
 *
 * (`--decode-exits-after K` makes the decode side exit after K checks, 0: right after
 * handing over its address: how the tests show that a dead peer is an error.)
 *
 * The hot path (descriptors, puts, flush) allocates nothing of its own: every buffer is
 * sized at start. Every corun error is reported with corun_strerror, every UCX error
 * with ucs_status_string, and stops the transfer; a peer that is gone is an error
 * (UCX's peer-failure mode, and a deadline on every wait), not a hang. Exit status: 0
 * when every way of every workload was verified.
 *
 * Build: gcc -std=c99 -Iinclude examples/ucx_agent.c libcorun.a -lucp -lucs \
 *            -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include "corun.h"

enum { CHUNK = 4096, MAX_SGE = 16, MAX_BUFFERS = 256, WAYS = 3, WORKLOADS = 3, MAX_ROUNDS = 15 };
static const char *way_names[WAYS] = {"put per page", "put per descriptor", "put per gather segment"};
static const char *workload_names[WORKLOADS] = {"fresh-decode", "fragmented-decode", "breaks-5pct"};
static const double WAIT_SECONDS = 10.0; /* the longest any wait may take: then it is an error */

typedef struct {
    size_t pages, buffers, page_bytes, pool, rounds;
    long decode_checks; /* test hook: the decode side exits after this many checks (-1: never) */
} shape;

static int by_value(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* --- small helpers ---------------------------------------------------------------- */

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

/* The word `w` of page `page` of buffer `b` in the prefill pool. */
static uint64_t word(size_t b, uint64_t page, size_t w) {
    return (1ull << 63) | ((uint64_t)b << 48) | (page << 16) | (w & 0xffff);
}

static int send_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t k = write(fd, c, n);
        if (k <= 0) return -1;
        c += k, n -= (size_t)k;
    }
    return 0;
}

static int recv_all(int fd, void *p, size_t n) {
    char *c = p;
    while (n > 0) {
        ssize_t k = read(fd, c, n);
        if (k <= 0) return -1;
        c += k, n -= (size_t)k;
    }
    return 0;
}

/* Runs of length about 1/p (geometric) placed in a random order over `pool` pages with
 * a gap after each, so that every index is distinct and every run boundary a break. */
static void scatter(uint32_t *out, size_t n, size_t pool, double p, uint32_t *lens, uint32_t *order) {
    size_t runs = 0, at = 0, i, k;
    uint64_t next = 0;
    while (at < n) {
        uint32_t len = 1;
        while ((double)(rng() >> 11) / 9007199254740992.0 >= p && at + len < n) len++;
        lens[runs++] = len;
        at += len;
    }
    for (i = 0; i < runs; i++) order[i] = (uint32_t)i;
    for (i = runs; i > 1; i--) { /* shuffle */
        size_t j = (size_t)(rng() % i);
        uint32_t t = order[i - 1];
        order[i - 1] = order[j], order[j] = t;
    }
    /* Run order[i] starts after the runs placed before it; out is filled run by run. */
    at = 0;
    for (i = 0; i < runs; i++) {
        size_t r = order[i], start = 0;
        for (k = 0; k < r; k++) start += lens[k];
        for (k = 0; k < lens[r]; k++) out[start + k] = (uint32_t)(next + k);
        next += lens[r] + 1;
    }
    (void)pool;
}

/* The page lists of workload `w` (every index below `pool`, `dst` distinct); `w ==
 * WORKLOADS` is the floor's: pages 0..N to pages 0..N, one run. */
static void make_workload(int w, uint32_t *src, uint32_t *dst, const shape *s, uint32_t *tmp) {
    size_t i;
    if (w == WORKLOADS) {
        for (i = 0; i < s->pages; i++) src[i] = dst[i] = (uint32_t)i;
        return;
    }
    rng_state = 0x9E3779B97F4A7C15ull + (uint64_t)w;
    /* fresh-decode: runs of mean 50 into one range; fragmented-decode: runs of mean 50
     * on both sides (about 4% of positions break); breaks-5pct: mean 40 on both (5%). */
    scatter(src, s->pages, s->pool, w == 2 ? 0.025 : 0.02, tmp, tmp + s->pages);
    if (w == 0) {
        for (i = 0; i < s->pages; i++) dst[i] = (uint32_t)(s->pool - s->pages + i);
    } else {
        scatter(dst, s->pages, s->pool, w == 2 ? 0.025 : 0.02, tmp, tmp + s->pages);
    }
}

/* --- UCX ---------------------------------------------------------------------------- */

typedef struct {
    ucp_context_h context;
    ucp_worker_h worker;
    ucp_mem_h memh;
} ucx;

static int ucx_fail(const char *what, ucs_status_t st) {
    fprintf(stderr, "ucx: %s: %s\n", what, ucs_status_string(st));
    return -1;
}

static int ucx_open(ucx *u, void *pool, size_t bytes) {
    ucp_params_t params;
    ucp_worker_params_t wp;
    ucp_mem_map_params_t mp;
    ucp_config_t *config;
    ucs_status_t st;
    memset(u, 0, sizeof *u);
    if ((st = ucp_config_read(NULL, NULL, &config)) != UCS_OK) return ucx_fail("config", st);
    memset(&params, 0, sizeof params);
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_RMA;
    st = ucp_init(&params, config, &u->context);
    ucp_config_release(config);
    if (st != UCS_OK) return ucx_fail("init", st);
    memset(&wp, 0, sizeof wp);
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    if ((st = ucp_worker_create(u->context, &wp, &u->worker)) != UCS_OK) return ucx_fail("worker", st);
    memset(&mp, 0, sizeof mp);
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = pool;
    mp.length = bytes;
    if ((st = ucp_mem_map(u->context, &mp, &u->memh)) != UCS_OK) return ucx_fail("mem_map", st);
    return 0;
}

static void ucx_close(ucx *u) {
    if (u->memh) ucp_mem_unmap(u->context, u->memh);
    if (u->worker) ucp_worker_destroy(u->worker);
    if (u->context) ucp_cleanup(u->context);
}

/* Waits for `req` (a request pointer, NULL when done at once, or an error), progressing
 * the worker, up to WAIT_SECONDS. */
static ucs_status_t ucx_wait(ucp_worker_h worker, ucs_status_ptr_t req) {
    double deadline = now() + WAIT_SECONDS;
    ucs_status_t st;
    if (req == NULL) return UCS_OK;
    if (UCS_PTR_IS_ERR(req)) return UCS_PTR_STATUS(req);
    while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        ucp_worker_progress(worker);
        if (now() > deadline) {
            ucp_request_cancel(worker, req);
            ucp_request_free(req);
            return UCS_ERR_TIMED_OUT;
        }
    }
    ucp_request_free(req);
    return st;
}

/* --- the decode side --------------------------------------------------------------- */

/* Every page dst[i] of every buffer holds prefill page src[i]; every other byte is 0.
 * Clears the checked pages. Returns 0, or -1 after saying what is wrong. */
static int check(uint64_t *pool, const uint32_t *src, const uint32_t *dst, const shape *s, unsigned char *sent) {
    size_t words = s->page_bytes / 8, b, i, w;
    memset(sent, 0, s->pool);
    for (i = 0; i < s->pages; i++) sent[dst[i]] = 1;
    for (b = 0; b < s->buffers; b++) {
        uint64_t *buf = pool + b * s->pool * words;
        for (i = 0; i < s->pages; i++)
            for (w = 0; w < words; w++)
                if (buf[(size_t)dst[i] * words + w] != word(b, src[i], w)) {
                    fprintf(stderr, "decode: buffer %zu page %u word %zu does not hold prefill page %u\n",
                            b, dst[i], w, src[i]);
                    return -1;
                }
        for (i = 0; i < s->pool; i++)
            if (!sent[i])
                for (w = 0; w < words; w++)
                    if (buf[i * words + w] != 0) {
                        fprintf(stderr, "decode: buffer %zu page %zu was written but not sent\n", b, i);
                        return -1;
                    }
        for (i = 0; i < s->pages; i++) memset(buf + (size_t)dst[i] * words, 0, s->page_bytes);
    }
    return 0;
}

static int decode(int fd, const shape *s, uint32_t *src, uint32_t *dst, uint32_t *tmp) {
    size_t bytes = s->buffers * s->pool * s->page_bytes;
    uint64_t *pool = calloc(bytes / 8, 8);
    unsigned char *sent = malloc(s->pool);
    ucp_address_t *addr = NULL;
    size_t addr_len = 0, rkey_len = 0;
    void *rkey = NULL;
    uint64_t base = (uint64_t)(uintptr_t)pool, hdr[3];
    int cmd[2], ok = -1;
    long checks = s->decode_checks;
    ucx u;
    if (!pool || !sent || ucx_open(&u, pool, bytes) != 0) goto out;
    if (ucp_worker_get_address(u.worker, &addr, &addr_len) != UCS_OK ||
        ucp_rkey_pack(u.context, u.memh, &rkey, &rkey_len) != UCS_OK)
        goto out;
    hdr[0] = addr_len, hdr[1] = rkey_len, hdr[2] = base;
    if (send_all(fd, hdr, sizeof hdr) || send_all(fd, addr, addr_len) || send_all(fd, rkey, rkey_len)) goto out;
    if (checks == 0) _exit(0); /* test hook: a peer that dies before any transfer */
    for (;;) {
        /* Progress the worker while waiting: over TCP, UCX carries puts as messages that
         * the target's worker completes. */
        struct pollfd p = {fd, POLLIN, 0};
        ucp_worker_progress(u.worker);
        if (poll(&p, 1, 0) <= 0) continue;
        if (recv_all(fd, cmd, sizeof cmd[0])) break; /* the prefill side is gone */
        if (cmd[0] < 0) {
            ok = 0;
            break;
        }
        make_workload(cmd[0], src, dst, s, tmp);
        cmd[1] = check(pool, src, dst, s, sent);
        if (send_all(fd, &cmd[1], sizeof cmd[1])) break;
        if (--checks == 0) _exit(0); /* test hook: a peer that dies */
    }
out:
    if (rkey) ucp_rkey_buffer_release(rkey);
    if (addr) ucp_worker_release_address(u.worker, addr);
    if (pool) ucx_close(&u);
    free(pool);
    free(sent);
    return ok;
}

/* --- the prefill side -------------------------------------------------------------- */

typedef struct {
    ucx u;
    ucp_ep_h ep;
    ucp_rkey_h rkey;
    uint64_t *pool, remote;
    size_t puts;
    ucs_status_t error; /* the first failure, which stops the transfer */
} agent;

static void put(agent *a, uint64_t src_addr, uint64_t dst_addr, uint64_t len) {
    ucp_request_param_t param;
    ucs_status_ptr_t req;
    if (a->error != UCS_OK) return;
    memset(&param, 0, sizeof param);
    req = ucp_put_nbx(a->ep, (void *)(uintptr_t)src_addr, len, dst_addr, a->rkey, &param);
    a->puts++;
    if (UCS_PTR_IS_ERR(req)) a->error = UCS_PTR_STATUS(req);
    else if (req != NULL) ucp_request_free(req); /* completes in the background; flushed below */
}

static int flush(agent *a) {
    ucp_request_param_t param;
    ucs_status_t st;
    memset(&param, 0, sizeof param);
    st = a->error != UCS_OK ? a->error : ucx_wait(a->u.worker, ucp_ep_flush_nbx(a->ep, &param));
    return st == UCS_OK ? 0 : ucx_fail("put/flush", st);
}

static int move(agent *a, int way, const uint32_t *src, const uint32_t *dst, const shape *s,
                const corun_layout *layout, corun_span *scratch, corun_descriptor *descs,
                corun_work_request *reqs, corun_sge *sges) {
    corun_cursor cursor = {0, 0, 0};
    corun_written w;
    corun_status st = CORUN_OK;
    size_t b, i, j;
    if (way == 0) {
        for (b = 0; b < s->buffers; b++)
            for (i = 0; i < s->pages; i++)
                put(a, layout->layers[b].src_base + src[i] * s->page_bytes,
                    layout->layers[b].dst_base + dst[i] * s->page_bytes, s->page_bytes);
        return flush(a);
    }
    do {
        if (way == 1) {
            st = corun_descriptors_u32(src, s->pages, dst, s->pages, NULL, layout, scratch, s->pages,
                                       &cursor, descs, CHUNK, &w);
            for (i = 0; i < w.items; i++) put(a, descs[i].src_addr, descs[i].dst_addr, descs[i].len);
        } else {
            st = corun_gather_u32(src, s->pages, dst, s->pages, NULL, layout, MAX_SGE, scratch,
                                  s->pages, &cursor, reqs, CHUNK, sges, CHUNK, &w);
            for (i = 0; i < w.items; i++) {
                uint64_t at = reqs[i].dst_addr;
                for (j = reqs[i].first_sge; j < reqs[i].first_sge + reqs[i].sge_count; j++) {
                    put(a, sges[j].addr, at, sges[j].len);
                    at += sges[j].len;
                }
            }
        }
        if (st != CORUN_OK) {
            fprintf(stderr, "corun: %s (layer %zu, position %zu)\n", corun_strerror(st), w.error_layer,
                    w.error_position);
            return -1;
        }
    } while (!w.done && a->error == UCS_OK);
    return flush(a);
}

static int prefill(int fd, const shape *s, const char *tls, uint32_t *src, uint32_t *dst, uint32_t *tmp) {
    size_t bytes = s->buffers * s->pool * s->page_bytes, words = s->page_bytes / 8, b, i, w;
    uint64_t hdr[3];
    void *addr = NULL, *rkey_buf = NULL;
    ucp_ep_params_t ep;
    corun_layer layers[MAX_BUFFERS];
    corun_layout layout;
    corun_span *scratch = malloc(s->pages * sizeof *scratch);
    corun_descriptor *descs = malloc(CHUNK * sizeof *descs);
    corun_work_request *reqs = malloc(CHUNK * sizeof *reqs);
    corun_sge *sges = malloc(CHUNK * sizeof *sges);
    agent a;
    int wl, way, ok = -1, cmd[2], warm = 1;
    size_t r;
    double t, times[MAX_ROUNDS], per_page = 0;
    memset(&a, 0, sizeof a);
    a.pool = malloc(bytes);
    if (!a.pool || !scratch || !descs || !reqs || !sges) goto out;
    for (b = 0; b < s->buffers; b++)
        for (i = 0; i < s->pool; i++)
            for (w = 0; w < words; w++) a.pool[(b * s->pool + i) * words + w] = word(b, i, w);
    if (ucx_open(&a.u, a.pool, bytes) != 0) goto out;
    if (recv_all(fd, hdr, sizeof hdr) || !(addr = malloc(hdr[0])) || !(rkey_buf = malloc(hdr[1])) ||
        recv_all(fd, addr, hdr[0]) || recv_all(fd, rkey_buf, hdr[1])) {
        fprintf(stderr, "prefill: the decode side did not send its address and key\n");
        goto out;
    }
    a.remote = hdr[2];
    memset(&ep, 0, sizeof ep);
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep.address = addr;
    /* Peer failures are reported (not fatal) over TCP. UCX 1.13's shared-memory
     * transports have no peer-failure handler: there a dead peer shows through the
     * deadline on every wait and the control socket. */
    ep.err_mode = strcmp(tls, "tcp") == 0 ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    if (ucp_ep_create(a.u.worker, &ep, &a.ep) != UCS_OK ||
        ucp_ep_rkey_unpack(a.ep, rkey_buf, &a.rkey) != UCS_OK) {
        fprintf(stderr, "prefill: cannot reach the decode side\n");
        goto out;
    }
    for (b = 0; b < s->buffers; b++) {
        layers[b].src_base = (uint64_t)(uintptr_t)a.pool + b * s->pool * s->page_bytes;
        layers[b].dst_base = a.remote + b * s->pool * s->page_bytes;
        layers[b].item_len = layers[b].src_stride = layers[b].dst_stride = s->page_bytes;
    }
    layout.layers = layers;
    layout.n_layers = s->buffers;
    layout.max_bytes = 0;
    layout.order = CORUN_LAYER_MAJOR;
    /* The floor first: the same bytes in one put per buffer (pages 0..N, contiguous on
     * both sides), what the transport's bandwidth allows. */
    for (wl = WORKLOADS; wl >= 0; wl = wl == WORKLOADS ? 0 : wl + 1 < WORKLOADS ? wl + 1 : -1) {
        make_workload(wl, src, dst, s, tmp);
        for (way = wl == WORKLOADS ? 1 : 0; way < (wl == WORKLOADS ? 2 : WAYS); way++) {
            /* Rounds, each moved and checked; the median time is kept. The first move
             * of all (the floor's) also warms the connection up, untimed. */
            for (r = 0; r < s->rounds + (size_t)warm; r++) {
                a.puts = 0;
                t = now();
                if (move(&a, way, src, dst, s, &layout, scratch, descs, reqs, sges) != 0) goto out;
                t = now() - t;
                cmd[0] = wl;
                if (send_all(fd, cmd, sizeof cmd[0]) || recv_all(fd, &cmd[1], sizeof cmd[1])) {
                    fprintf(stderr, "prefill: %s, %s: the decode side is gone (its socket closed)\n",
                            wl == WORKLOADS ? "floor" : workload_names[wl], way_names[way]);
                    goto out;
                }
                if (cmd[1] != 0) {
                    fprintf(stderr, "prefill: %s, %s: the decode side's check failed\n",
                            wl == WORKLOADS ? "floor" : workload_names[wl], way_names[way]);
                    goto out;
                }
                if (warm) warm = 0, r--;
                else times[r] = t;
            }
            qsort(times, s->rounds, sizeof times[0], by_value);
            t = times[s->rounds / 2];
            if (wl == WORKLOADS) {
                printf("| %s | floor: the same bytes, one put per buffer | %zu | %zu | | %zu | %.1f | |\n", tls,
                       s->pages, s->buffers, a.puts, t * 1e3);
                continue;
            }
            if (way == 0) per_page = t;
            printf("| %s | %s | %zu | %zu | %s | %zu | %.1f | %.1fx |\n", tls, workload_names[wl], s->pages,
                   s->buffers, way_names[way], a.puts, t * 1e3, per_page / t);
            fflush(stdout);
        }
    }
    ok = 0;
out:
    cmd[0] = -1;
    send_all(fd, cmd, sizeof cmd[0]);
    if (a.rkey) ucp_rkey_destroy(a.rkey);
    if (a.ep) {
        /* After a failure the peer may be gone: close without flushing. */
        ucp_request_param_t param;
        memset(&param, 0, sizeof param);
        if (ok != 0) {
            param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
            param.flags = UCP_EP_CLOSE_FLAG_FORCE;
        }
        ucx_wait(a.u.worker, ucp_ep_close_nbx(a.ep, &param));
    }
    if (a.pool) ucx_close(&a.u);
    free(a.pool), free(addr), free(rkey_buf), free(scratch), free(descs), free(reqs), free(sges);
    return ok;
}

/* One transport: a decode child and this process as prefill, joined by a socketpair. */
static int run(const shape *s, const char *tls) {
    int fds[2], status = 0, ok;
    uint32_t *src = malloc(s->pages * 4), *dst = malloc(s->pages * 4), *tmp = malloc(s->pages * 8);
    pid_t child;
    if (!src || !dst || !tmp || socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return -1;
    setenv("UCX_TLS", tls, 1);
    if (strcmp(tls, "tcp") == 0) setenv("UCX_NET_DEVICES", "lo", 1);
    fflush(stdout);
    child = fork();
    if (child == 0) {
        close(fds[0]);
        ok = decode(fds[1], s, src, dst, tmp);
        free(src), free(dst), free(tmp);
        _exit(ok == 0 ? 0 : 1);
    }
    close(fds[1]);
    ok = child > 0 ? prefill(fds[0], s, tls, src, dst, tmp) : -1;
    close(fds[0]);
    if (child > 0 && waitpid(child, &status, 0) == child && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
        ok = -1;
    free(src), free(dst), free(tmp);
    return ok;
}

int main(int argc, char **argv) {
    shape s = {4096, 8, 256, 0, 3, -1};
    char tls_list[64] = "tcp,sm", *tls;
    int i, failed = 0;
    signal(SIGPIPE, SIG_IGN); /* a dead peer is an error from write(), not a signal */
    for (i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--pages")) s.pages = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--buffers")) s.buffers = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--page-bytes")) s.page_bytes = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--tls")) snprintf(tls_list, sizeof tls_list, "%s", argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds")) s.rounds = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--decode-exits-after")) s.decode_checks = strtol(argv[i + 1], NULL, 10);
        else break;
    }
    if (i < argc || s.pages == 0 || s.buffers == 0 || s.buffers > MAX_BUFFERS || s.page_bytes % 8 != 0 ||
        s.page_bytes == 0 || s.rounds == 0 || s.rounds > MAX_ROUNDS) {
        fprintf(stderr,
                "usage: %s [--pages N] [--buffers B<=%d] [--page-bytes P (x8)] [--tls tcp,sm] [--rounds R<=%d]\n",
                argv[0], MAX_BUFFERS, MAX_ROUNDS);
        return 2;
    }
    s.pool = 4 * s.pages;
    printf("KV pool: %zu layer buffers of %zu pages of %zu B each side; a request of %zu pages\n\n", s.buffers,
           s.pool, s.page_bytes, s.pages);
    printf("| transport | workload | pages | buffers | way | puts | ms | vs per page |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    for (tls = strtok(tls_list, ","); tls; tls = strtok(NULL, ",")) {
        if (run(&s, tls) != 0) {
            fprintf(stderr, "ucx_agent: transport %s failed\n", tls);
            failed = 1;
        }
    }
    printf(failed ? "\nucx_agent: FAILED\n" : "\nucx_agent: every way of every workload verified\n");
    return failed;
}
