/* Unit test of the example's chain builder (no RDMA device needed): corun gather output
 * in, ibv_send_wr / ibv_sge chains out. */
#define POST_WRITES_NO_MAIN
#include "../examples/post_writes.c"

#include <stdlib.h>

static int failures = 0;
#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) {                                                              \
            failures++;                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                           \
    } while (0)

int main(void) {
    uint32_t src[] = {40, 41, 7, 90, 91, 3, 12, 13};
    uint32_t dst[] = {200, 201, 202, 203, 204, 205, 206, 207};
    corun_layer layers[2] = {{0, (uint64_t)1 << 40, 4096, 4096, 4096},
                             {(uint64_t)1 << 32, (uint64_t)1 << 41, 4096, 4096, 4096}};
    corun_layout layout = {layers, 2, 0, CORUN_LAYER_MAJOR};
    corun_work_request reqs[8];
    corun_sge sges[16];
    struct ibv_sge sg[16];
    struct ibv_send_wr wrs[8];
    corun_span scratch[8];
    corun_cursor cur = {0, 0, 0};
    corun_written w;
    size_t n;

    CHECK(corun_gather_u32(src, 8, dst, 8, NULL, &layout, 3, scratch, 8, &cur, reqs, 8, sges, 16,
                           &w) == CORUN_OK);
    CHECK(w.done && w.items == 4 && w.sges == 10); /* per layer: 3 + 2 segments */
    n = build_write_chain(reqs, w.items, sges, 0x11, 0x22, sg, wrs);
    CHECK(n == 4);
    CHECK(wrs[0].next == &wrs[1] && wrs[3].next == NULL);
    CHECK(wrs[0].opcode == IBV_WR_RDMA_WRITE && wrs[0].num_sge == 3);
    CHECK(wrs[0].wr.rdma.remote_addr == ((uint64_t)1 << 40) + 200 * 4096);
    CHECK(wrs[0].wr.rdma.rkey == 0x22 && wrs[0].sg_list[0].lkey == 0x11);
    CHECK(wrs[0].sg_list[0].addr == 40 * 4096 && wrs[0].sg_list[0].length == 2 * 4096);
    CHECK(wrs[1].num_sge == 2 && wrs[1].wr.rdma.remote_addr == ((uint64_t)1 << 40) + 205 * 4096);
    CHECK(wrs[2].sg_list[0].addr == ((uint64_t)1 << 32) + 40 * 4096);
    CHECK(wrs[3].send_flags == IBV_SEND_SIGNALED && wrs[0].send_flags == 0);
    /* A request longer than ibv_sge.length can say is refused. */
    reqs[0].len = (uint64_t)1 << 32;
    CHECK(build_write_chain(reqs, 1, sges, 0, 0, sg, wrs) == 0);
    printf("post_writes chain builder: %d failed\n", failures);
    return failures != 0;
}
