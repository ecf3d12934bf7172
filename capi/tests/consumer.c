/* A program as a user of the installed C library writes it: built against an installed
 * prefix only (pkg-config or CMake's find_package), run with no LD_LIBRARY_PATH. Exits 0
 * when the library it loaded answers as the header it was built with says it should. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <corun.h>

int main(void) {
    const uint32_t src[6] = {10, 11, 12, 40, 41, 7};
    const uint32_t dst[6] = {3, 4, 5, 6, 7, 8};
    corun_options options = CORUN_OPTIONS_DEFAULT;
    corun_span spans[4];
    corun_progress progress;
    size_t count = 0;
    if (strcmp(corun_version(), CORUN_VERSION_STRING) != 0) {
        fprintf(stderr, "consumer: library %s, header %s\n", corun_version(), CORUN_VERSION_STRING);
        return 1;
    }
    if (corun_count_runs_u32(src, 6, dst, 6, &options, &count) != CORUN_OK || count != 3) return 1;
    if (corun_group_u32(src, 6, dst, 6, NULL, spans, 4, &progress) != CORUN_OK) return 1;
    if (progress.spans != 3 || spans[1].start != 3 || spans[1].len != 2) return 1;
    printf("consumer: corun %s, %zu runs\n", corun_version(), count);
    return 0;
}
