/* corun from C with nothing but libc: a request's KV pages moved between two in-memory
 * pools by memcpy, one call per corun descriptor instead of one per page and layer, and
 * every page checked afterwards. An RDMA agent posts the same descriptors as WRITEs
 * (examples/post_writes.c); here memcpy stands in for the transport.
 *
 *   cc quickstart.c $(pkg-config --cflags --libs corun) -o quickstart && ./quickstart
 *
 * Exits 0 when every page arrived where it should, 1 otherwise. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <corun.h>

enum { PAGES = 32, LAYERS = 2, PAGE_BYTES = 64, N = 10 };

static unsigned char src_pool[LAYERS][PAGES][PAGE_BYTES];
static unsigned char dst_pool[LAYERS][PAGES][PAGE_BYTES];

int main(void) {
    /* Page src[i] of the prefill pool goes to page dst[i] of the decode pool. */
    const uint32_t src[N] = {10, 11, 12, 13, 20, 21, 22, 5, 6, 30};
    const uint32_t dst[N] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 31};
    corun_layer layers[LAYERS];
    corun_span scratch[N];      /* room for every run: at most one per page */
    corun_descriptor out[4];    /* small on purpose: the call resumes through the cursor */
    corun_cursor cursor = {0, 0, 0};
    corun_written w;
    size_t runs = 0, copies = 0;

    for (int l = 0; l < LAYERS; l++) {
        for (int p = 0; p < PAGES; p++) memset(src_pool[l][p], l * PAGES + p, PAGE_BYTES);
        layers[l].src_base = (uint64_t)(uintptr_t)src_pool[l];
        layers[l].dst_base = (uint64_t)(uintptr_t)dst_pool[l];
        layers[l].item_len = layers[l].src_stride = layers[l].dst_stride = PAGE_BYTES;
    }
    corun_layout layout = {layers, LAYERS, 0, CORUN_LAYER_MAJOR};

    if (corun_count_runs_u32(src, N, dst, N, NULL, &runs) != CORUN_OK) return 1;
    do {
        corun_status st = corun_descriptors_u32(src, N, dst, N, NULL, &layout, scratch, N,
                                                &cursor, out, 4, &w);
        if (st != CORUN_OK) {
            fprintf(stderr, "quickstart: %s\n", corun_strerror(st));
            return 1;
        }
        for (size_t i = 0; i < w.items; i++, copies++)
            memcpy((void *)(uintptr_t)out[i].dst_addr, (const void *)(uintptr_t)out[i].src_addr,
                   (size_t)out[i].len);
    } while (!w.done);

    for (int l = 0; l < LAYERS; l++)
        for (int i = 0; i < N; i++)
            if (memcmp(dst_pool[l][dst[i]], src_pool[l][src[i]], PAGE_BYTES) != 0) {
                fprintf(stderr, "quickstart: layer %d, page %u: wrong bytes\n", l, dst[i]);
                return 1;
            }
    printf("quickstart: corun %s, %d pages x %d layers in %zu runs: %zu copies instead of %d\n",
           corun_version(), N, LAYERS, runs, copies, N * LAYERS);
    return copies == runs * LAYERS ? 0 : 1;
}
