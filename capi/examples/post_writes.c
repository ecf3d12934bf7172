/* Turns corun gather lists into chains of RDMA WRITE work requests (struct ibv_send_wr
 * with struct ibv_sge lists) and posts them: the KV-cache transfer of one request, for
 * 64 model layers x (K, V), from a fragmented prefill pool into a fresh decode range.
 *
 * Build: gcc -std=c99 -Iinclude examples/post_writes.c libcorun.a -libverbs \
 *            -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
 *
 * Connection set-up (device, protection domain, memory registration, queue pair, the
 * peer's addresses and rkey) is the agent's own; this example shows the part corun
 * does. Without an RDMA device it prints the plan and stops before posting. */
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "corun.h"

/* Fills `wrs[0..n]` and their segment lists from corun's gather output: one RDMA WRITE
 * per corun_work_request, chained through `next`, the last one signaled. `sg` must hold
 * as many entries as `sges`. Returns the number of work requests, or 0 if a length does
 * not fit the 32-bit `ibv_sge.length` (cap the layout's max_bytes to avoid that). */
size_t build_write_chain(const corun_work_request *reqs, size_t n, const corun_sge *sges,
                         uint32_t lkey, uint32_t rkey, struct ibv_sge *sg,
                         struct ibv_send_wr *wrs) {
    size_t i, j;
    for (i = 0; i < n; i++) {
        const corun_work_request *r = &reqs[i];
        if (r->len > UINT32_MAX) return 0;
        for (j = r->first_sge; j < r->first_sge + r->sge_count; j++) {
            sg[j].addr = sges[j].addr;
            sg[j].length = (uint32_t)sges[j].len;
            sg[j].lkey = lkey;
        }
        memset(&wrs[i], 0, sizeof wrs[i]);
        wrs[i].wr_id = i;
        wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
        wrs[i].sg_list = &sg[r->first_sge];
        wrs[i].num_sge = (int)r->sge_count;
        wrs[i].opcode = IBV_WR_RDMA_WRITE;
        wrs[i].send_flags = i + 1 == n ? IBV_SEND_SIGNALED : 0;
        wrs[i].wr.rdma.remote_addr = r->dst_addr;
        wrs[i].wr.rdma.rkey = rkey;
    }
    return n;
}

/* Posts a chain on a connected queue pair. */
int post_chain(struct ibv_qp *qp, struct ibv_send_wr *chain) {
    struct ibv_send_wr *bad = NULL;
    return ibv_post_send(qp, chain, &bad);
}

#ifndef POST_WRITES_NO_MAIN
enum { PAGES = 512, BUFFERS = 128, MAX_SGE = 30, MAX_REQS = PAGES * BUFFERS };

static corun_work_request reqs[MAX_REQS];
static corun_sge sges[PAGES * BUFFERS];
static struct ibv_sge sg[PAGES * BUFFERS];
static struct ibv_send_wr wrs[MAX_REQS];

int main(void) {
    uint32_t src[PAGES], dst[PAGES];
    corun_layer layers[BUFFERS];
    corun_span scratch[PAGES];
    corun_layout layout;
    corun_cursor cursor = {0, 0, 0};
    corun_written w;
    corun_status st;
    struct ibv_device **devices;
    size_t i, descriptors = 0;
    int n_devices = 0;

    /* A fragmented prefill allocation (runs of 1 to 8 pages) into fresh decode pages. */
    for (i = 0; i < PAGES; i++) {
        src[i] = (uint32_t)(i % 8 == 0 ? 40000 - 37 * i : src[i - 1] + 1);
        dst[i] = (uint32_t)(1000 + i);
    }
    for (i = 0; i < BUFFERS; i++) {
        layers[i].src_base = 0x7f0000000000ull + ((uint64_t)i << 30);
        layers[i].dst_base = 0x550000000000ull + ((uint64_t)i << 30);
        layers[i].item_len = layers[i].src_stride = layers[i].dst_stride = 16384;
    }
    layout.layers = layers;
    layout.n_layers = BUFFERS;
    layout.max_bytes = (uint64_t)1 << 30; /* fits ibv_sge.length */
    layout.order = CORUN_LAYER_MAJOR;

    st = corun_gather_u32(src, PAGES, dst, PAGES, NULL, &layout, MAX_SGE, scratch, PAGES,
                          &cursor, reqs, MAX_REQS, sges, PAGES * BUFFERS, &w);
    if (st != CORUN_OK || !w.done) {
        fprintf(stderr, "corun: %s\n", corun_strerror(st));
        return 1;
    }
    if (corun_count_runs_u32(src, PAGES, dst, PAGES, NULL, &descriptors) == CORUN_OK)
        descriptors *= BUFFERS;
    if (build_write_chain(reqs, w.items, sges, 0, 0, sg, wrs) != w.items) return 1;
    printf("%d pages x %d layer buffers: %zu RDMA WRITEs with gather lists "
           "(instead of %zu without, %d page copies)\n",
           PAGES, BUFFERS, w.items, descriptors, PAGES * BUFFERS);

    devices = ibv_get_device_list(&n_devices);
    if (devices == NULL || n_devices == 0) {
        printf("no RDMA device: not posting\n");
        if (devices) ibv_free_device_list(devices);
        return 0;
    }
    printf("%d RDMA device(s); connect a queue pair, then post_chain(qp, wrs)\n", n_devices);
    ibv_free_device_list(devices);
    return 0;
}
#endif
