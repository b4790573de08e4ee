/* What the generated launchers do, from the golden cases' specs: geometry,
 * argument packing, statuses and messages, with a fake backend that keeps
 * the last launch. Every expected value below is worked out by hand from
 * the spec (tests/codegen/golden/<case>/<family>.yaml), not read from the
 * generated code. Compiled as C99 and as C++17 by test_launch_behaviour.py. */
#define KLAUNCH_IMPLEMENTATION
#include "klaunch/scale.h"
#include "klaunch/volume.h"
#include "klaunch/tile.h"
#include "klaunch/fill.h"
#include "klaunch/attrs.h"
#include "klaunch/gather.h"

#include <stdio.h>
#include <string.h>

static int failures;

#define EXPECT(cond)                                                                                    \
    do {                                                                                                \
        if (!(cond)) {                                                                                  \
            fprintf(stderr, "%s:%d: EXPECT(%s) failed; last error: %s\n", __FILE__, __LINE__, #cond, \
                    kl_last_error_message());                                                           \
            failures++;                                                                                 \
        }                                                                                               \
    } while (0)
#define EXPECT_STATUS(call, status)                                                                     \
    do {                                                                                                \
        kl_status st_ = (call);                                                                         \
        if (st_ != (status)) {                                                                          \
            fprintf(stderr, "%s:%d: %s returned %s, expected %s; last error: %s\n", __FILE__, __LINE__, \
                    #call, kl_status_name(st_), #status, kl_last_error_message());                      \
            failures++;                                                                                 \
        }                                                                                               \
    } while (0)
#define EXPECT_MESSAGE(text)                                                                            \
    do {                                                                                                \
        if (strcmp(kl_last_error_message(), (text)) != 0) {                                             \
            fprintf(stderr, "%s:%d: message\n  got:      %s\n  expected: %s\n", __FILE__, __LINE__,     \
                    kl_last_error_message(), (text));                                                   \
            failures++;                                                                                 \
        }                                                                                               \
    } while (0)

/* ---- fake backend: keeps the last launch and its packed argument bytes ---- */
static kl_launch last;
static int launches;
static unsigned char arg_bytes[256];
static uint32_t arg_count;
static uint64_t extents[8]; /* the last launch's kl_launch.extents, copied */
static uint32_t extent_count;

static kl_status fake_launch(const kl_backend *be, const kl_launch *l) {
    const kl_kernel_desc *d = l->kernel->desc;
    uint32_t i;
    (void)be;
    last = *l;
    launches++;
    memset(arg_bytes, 0xee, sizeof arg_bytes);
    arg_count = d->num_params;
    for (i = 0; i < d->num_params; i++) memcpy(arg_bytes + d->params[i].offset, l->args[i], d->params[i].size);
    extent_count = l->extents != NULL ? d->num_extents : 0u;
    for (i = 0; i < extent_count && i < 8; i++) extents[i] = l->extents[i];
    return KL_SUCCESS;
}
static const kl_backend_ops fake_ops = {"fake", NULL, NULL, NULL, NULL, fake_launch, NULL, NULL};
static kl_backend fake = {&fake_ops};
/* A loaded module as far as a launcher looks: its magic and load id. */
static kl_module fake_module;

static kl_kernel make_kernel(const kl_kernel_desc *desc, const int64_t *consts) {
    kl_kernel k;
    uint32_t i;
    memset(&k, 0, sizeof k);
    fake_module.magic = KL__MODULE_MAGIC;
    fake_module.load_id = 1;
    k.desc = desc;
    k.backend = &fake;
    k.module = &fake_module;
    k.module_load_id = 1;
    k.max_threads = 1024;
    k.max_dynamic_shared = 48 * 1024;
    k.magic = KL__KERNEL_MAGIC;
    for (i = 0; i < desc->num_consts; i++) k.consts[i] = consts[i];
    return k;
}

static uint64_t u64_at(uint32_t offset) {
    uint64_t v;
    memcpy(&v, arg_bytes + offset, 8);
    return v;
}
static uint32_t u32_at(uint32_t offset) {
    uint32_t v;
    memcpy(&v, arg_bytes + offset, 4);
    return v;
}
static int geometry(uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz, uint32_t shared) {
    return last.grid[0] == gx && last.grid[1] == gy && last.grid[2] == gz && last.block[0] == bx &&
           last.block[1] == by && last.block[2] == bz && last.shared_bytes == shared;
}

#define P(type, addr) ((type *)(uintptr_t)(addr))

/* scale.yaml: grid (ceil_div(cols, 256), rows), block 256; rows launch-only;
 * args x@0 y@8 cols@16 row_stride@24 (u64, padded) alpha@32 accumulate@36 group@40. */
static void test_scale(void) {
    kl_kernel k = make_kernel(&kl_scale_rows_desc, NULL);
    kl_stream stream = (kl_stream)(uintptr_t)0x5eed;
    float alpha;
    int before;

    EXPECT(kl_scale_rows_desc.num_params == 7);
    EXPECT(kl_scale_rows_desc.param_bytes == 44);
    EXPECT(strcmp(kl_scale_rows_desc.entry, "scale_rows_kernel") == 0);

    launches = 0;
    EXPECT_STATUS(kl_scale_rows(&k, P(const void, 0x1000), P(kl_bf16, 0x2000), 1000, 1024, 3, 0.5f, true, 8, stream),
                  KL_SUCCESS);
    EXPECT(launches == 1);
    EXPECT(geometry(4, 3, 1, 256, 1, 1, 0));
    EXPECT(last.stream == stream);
    EXPECT(arg_count == 7);
    EXPECT(u64_at(0) == 0x1000 && u64_at(8) == 0x2000);
    EXPECT(u32_at(16) == 1000);
    EXPECT(u32_at(20) == 0xeeeeeeeeu); /* padding before the u64: not written */
    EXPECT(u64_at(24) == 1024);
    memcpy(&alpha, arg_bytes + 32, 4);
    EXPECT(alpha == 0.5f);
    EXPECT(u32_at(36) == 1);
    EXPECT(u32_at(40) == 8);

    EXPECT_STATUS(kl_scale_rows(&k, P(const void, 0x1000), P(kl_bf16, 0x2000), 1000, 1024, 3, 0.5f, false, 8, stream),
                  KL_SUCCESS);
    EXPECT(u32_at(36) == 0);

    /* A zero extent (the launch-only rows, or cols) is an empty launch. */
    before = launches;
    EXPECT_STATUS(kl_scale_rows(&k, P(const void, 0x1000), P(kl_bf16, 0x2000), 1000, 1024, 0, 0.5f, true, 8, stream),
                  KL_SUCCESS);
    EXPECT_STATUS(kl_scale_rows(&k, P(const void, 0x1000), P(kl_bf16, 0x2000), 0, 1024, 3, 0.5f, true, 8, stream),
                  KL_SUCCESS);
    EXPECT(launches == before);

    /* group >= 1 and cols % group == 0: group 0 fails the first half and never divides. */
    EXPECT_STATUS(kl_scale_rows(&k, P(const void, 0x1000), P(kl_bf16, 0x2000), 1000, 1024, 3, 0.5f, true, 0, stream),
                  KL_ERROR_PRECONDITION);
    EXPECT_MESSAGE("KL_ERROR_PRECONDITION: kl_scale_rows: precondition `group >= 1 and cols % group == 0` does not "
                   "hold (group = 0, cols = 1000): cols must be a multiple of group [scale.yaml:31:16]");
    EXPECT_STATUS(kl_scale_rows(&k, P(const void, 0x1000), P(kl_bf16, 0x2000), 1000, 1024, 3, 0.5f, true, 3, stream),
                  KL_ERROR_PRECONDITION);
    EXPECT_STATUS(kl_scale_rows(&k, P(const void, 0x1000), P(kl_bf16, 0x2000), 1000, 10, 3, 0.5f, true, 8, stream),
                  KL_ERROR_PRECONDITION);
    EXPECT_MESSAGE("KL_ERROR_PRECONDITION: kl_scale_rows: precondition `row_stride >= cols` does not hold "
                   "(row_stride = 10, cols = 1000): rows must not overlap [scale.yaml:29:16]");

    /* Checks in order: kernel handle, NULL pointers, preconditions, grid. */
    EXPECT_STATUS(kl_scale_rows(NULL, NULL, NULL, 1000, 10, 70000, 0.5f, true, 0, stream), KL_ERROR_KERNEL_NOT_LOADED);
    EXPECT_STATUS(kl_scale_rows(&k, NULL, NULL, 1000, 10, 70000, 0.5f, true, 0, stream), KL_ERROR_NULL_POINTER);
    EXPECT_MESSAGE("KL_ERROR_NULL_POINTER: kl_scale_rows: parameter x is NULL [scale.yaml:11]");
    EXPECT_STATUS(kl_scale_rows(&k, P(const void, 0x1000), NULL, 1000, 10, 70000, 0.5f, true, 0, stream),
                  KL_ERROR_NULL_POINTER);
    EXPECT_STATUS(kl_scale_rows(&k, P(const void, 0x1000), P(kl_bf16, 0x2000), 1000, 10, 70000, 0.5f, true, 0, stream),
                  KL_ERROR_PRECONDITION);
    EXPECT_STATUS(kl_scale_rows(&k, P(const void, 0x1000), P(kl_bf16, 0x2000), 1000, 1024, 70000, 0.5f, true, 8, stream),
                  KL_ERROR_GRID_LIMIT);
    EXPECT_MESSAGE("KL_ERROR_GRID_LIMIT: kl_scale_rows: grid.y = rows = 70000 exceeds 65535 (rows = 70000) "
                   "[scale.yaml:25:10]");

    /* The kernel's own thread limit. */
    k.max_threads = 128;
    EXPECT_STATUS(kl_scale_rows(&k, P(const void, 0x1000), P(kl_bf16, 0x2000), 1000, 1024, 3, 0.5f, true, 8, stream),
                  KL_ERROR_BLOCK_LIMIT);
    EXPECT_MESSAGE("KL_ERROR_BLOCK_LIMIT: kl_scale_rows: block = 256 = 256 exceeds 128 () [scale.yaml:26:5]");
    k.max_threads = 1024;

    /* kl_X_check: the same checks, never a launch. */
    before = launches;
    EXPECT_STATUS(kl_scale_rows_check(&k, P(const void, 0x1000), P(kl_bf16, 0x2000), 1000, 1024, 3, 0.5f, true, 8),
                  KL_SUCCESS);
    EXPECT_STATUS(kl_scale_rows_check(&k, P(const void, 0x1000), P(kl_bf16, 0x2000), 1000, 1024, 3, 0.5f, true, 0),
                  KL_ERROR_PRECONDITION);
    EXPECT_STATUS(kl_scale_rows_check(&k, P(const void, 0x1000), P(kl_bf16, 0x2000), 1000, 1024, 0, 0.5f, true, 8),
                  KL_SUCCESS);
    EXPECT(launches == before);

    /* A handle made for another launcher. */
    {
        kl_kernel other = make_kernel(&kl_fill_marker_desc, NULL);
        EXPECT_STATUS(kl_scale_rows(&other, P(const void, 0x1000), P(kl_bf16, 0x2000), 1000, 1024, 3, 0.5f, true, 8,
                                    stream),
                      KL_ERROR_INVALID_ARGUMENT);
    }
}

/* volume.yaml: grid (ceil_div(nx, bx), ceil_div(ny, by), max(ceil_div(nz, bz), 1)),
 * block (bx, by, min(bz, 64)), shared (bx + 2*HALO) * (by + 2*HALO) * (bz + 2*HALO) * 4. */
static void test_volume(void) {
    const int64_t halo1[] = {1};
    const int64_t halo_negative[] = {-1};
    kl_kernel k = make_kernel(&kl_stencil3d_desc, halo1);
    const float *src = P(const float, 0x10);
    float *dst = P(float, 0x20);

    EXPECT(kl_stencil3d_desc.num_consts == 1 && strcmp(kl_stencil3d_desc.const_names[0], "HALO") == 0);
    /* src@0 dst@8 nx..bz@16..36 offset@40 total@48 (u64 after 44 bytes: padded) */
    EXPECT(kl_stencil3d_desc.param_bytes == 56);

    EXPECT_STATUS(kl_stencil3d(&k, src, dst, 100, 50, 10, 8, 8, 4, 0, 50000, NULL), KL_SUCCESS);
    EXPECT(geometry(13, 7, 3, 8, 8, 4, 10 * 10 * 6 * 4));
    EXPECT(u32_at(40) == 0 && u64_at(48) == 50000);

    /* bz 100: block z is min(100, 64) = 64; 8 * 8 * 64 threads. */
    EXPECT_STATUS(kl_stencil3d(&k, src, dst, 100, 50, 10, 8, 8, 100, 0, 50000, NULL), KL_ERROR_BLOCK_LIMIT);
    EXPECT_MESSAGE("KL_ERROR_BLOCK_LIMIT: kl_stencil3d: block = bx * by * min(bz, 64) = 4096 exceeds 1024 "
                   "(bx = 8, by = 8, bz = 100) [volume.yaml:30:5]");
    /* 1 <= bx <= 0x400 (a chained comparison) */
    EXPECT_STATUS(kl_stencil3d(&k, src, dst, 100, 50, 10, 2000, 1, 1, 0, 50000, NULL), KL_ERROR_PRECONDITION);
    EXPECT_STATUS(kl_stencil3d(&k, src, dst, 100, 50, 10, 0, 1, 1, 0, 50000, NULL), KL_ERROR_PRECONDITION);
    EXPECT_STATUS(kl_stencil3d(&k, src, dst, 100, 50, 10, 1024, 1, 1, 0, 50000, NULL), KL_SUCCESS);
    /* A negative i32 read by an expression. */
    EXPECT_STATUS(kl_stencil3d(&k, src, dst, 100, 50, 10, 8, 8, 4, -1, 50000, NULL), KL_ERROR_OVERFLOW);
    /* not (offset > nx) or offset == 0 */
    EXPECT_STATUS(kl_stencil3d(&k, src, dst, 100, 50, 10, 8, 8, 4, 101, 50000, NULL), KL_ERROR_PRECONDITION);
    EXPECT_STATUS(kl_stencil3d(&k, src, dst, 100, 50, 10, 8, 8, 4, 100, 50000, NULL), KL_SUCCESS);
    EXPECT(u32_at(40) == 100);
    /* total == nx * ny * nz: 2^31 * 2^31 * 2^31 overflows 64 bits. */
    EXPECT_STATUS(kl_stencil3d(&k, src, dst, 0x80000000u, 0x80000000u, 0x80000000u, 1, 1, 1, 0, 5, NULL),
                  KL_ERROR_OVERFLOW);
    EXPECT_MESSAGE("KL_ERROR_OVERFLOW: kl_stencil3d: precondition = total <= 8589934592 and total == nx * ny * nz "
                   "overflows 64 bits (total = 5, nx = 2147483648, ny = 2147483648, nz = 2147483648) "
                   "[volume.yaml:40:16]");
    EXPECT_STATUS(kl_stencil3d(&k, src, dst, 100, 50, 10, 8, 8, 4, 0, 49999, NULL), KL_ERROR_PRECONDITION);
    /* grid.x = 2^32 - 1 blocks: fits the 32-bit field, over the CUDA limit. */
    EXPECT_STATUS(kl_stencil3d(&k, src, dst, 0xffffffffu, 1, 1, 1, 1, 1, 0, 0xffffffffu, NULL), KL_ERROR_GRID_LIMIT);
    EXPECT_MESSAGE("KL_ERROR_GRID_LIMIT: kl_stencil3d: grid.x = ceil_div(nx, bx) = 4294967295 exceeds 2147483647 "
                   "(nx = 4294967295, bx = 1) [volume.yaml:27:10]");
    /* Shared memory over the function's limit. */
    k.max_dynamic_shared = 1000;
    EXPECT_STATUS(kl_stencil3d(&k, src, dst, 100, 50, 10, 8, 8, 4, 0, 50000, NULL), KL_ERROR_SHARED_MEMORY_LIMIT);
    EXPECT_MESSAGE("KL_ERROR_SHARED_MEMORY_LIMIT: kl_stencil3d: shared_bytes = (bx + 2 * HALO) * (by + 2 * HALO) * "
                   "(bz + 2 * HALO) * 4 = 2400 exceeds 1000 (bx = 8, HALO = 1, by = 8, bz = 4) [volume.yaml:34:19]");
    k.max_dynamic_shared = 2400;
    EXPECT_STATUS(kl_stencil3d(&k, src, dst, 100, 50, 10, 8, 8, 4, 0, 50000, NULL), KL_SUCCESS);
    /* A negative constant read by shared_bytes. */
    k = make_kernel(&kl_stencil3d_desc, halo_negative);
    EXPECT_STATUS(kl_stencil3d(&k, src, dst, 100, 50, 10, 8, 8, 4, 0, 50000, NULL), KL_ERROR_OVERFLOW);
}

/* tile.yaml: constants read in order HEAD_DIM (precondition), TILE (grid). */
static void test_tile(void) {
    const int64_t t64[] = {128, 64};
    const int64_t tile0[] = {128, 0};
    const int64_t tile1024[] = {128, 1024};
    kl_kernel k = make_kernel(&kl_tile_attn_desc, t64);
    const kl_f16 *q = P(const kl_f16, 0x100);
    kl_f16 *out = P(kl_f16, 0x200);

    EXPECT(kl_tile_attn_desc.num_consts == 2);
    EXPECT(strcmp(kl_tile_attn_desc.const_names[0], "HEAD_DIM") == 0);
    EXPECT(strcmp(kl_tile_attn_desc.const_names[1], "TILE") == 0);
    EXPECT(strcmp(kl_tile_attn_desc.entry, "tile_attn_v2") == 0);
    EXPECT(kl_tile_fill_desc.num_consts == 0 && kl_tile_fill_desc.const_names == NULL);

    EXPECT_STATUS(kl_tile_attn(&k, q, out, 1000, 128, 8, NULL), KL_SUCCESS);
    EXPECT(geometry(16, 8, 1, 128, 1, 1, 0));
    EXPECT_STATUS(kl_tile_attn(&k, q, out, 1000, 256, 8, NULL), KL_ERROR_VARIANT_MISMATCH);
    EXPECT_MESSAGE("KL_ERROR_VARIANT_MISMATCH: kl_tile_attn: precondition `head_dim == HEAD_DIM` does not hold "
                   "(head_dim = 256, HEAD_DIM = 128): load the variant compiled for this head_dim [tile.yaml:36:16]");
    EXPECT_STATUS(kl_tile_attn(&k, q, out, 1000, 128, 0, NULL), KL_ERROR_PRECONDITION);
    k = make_kernel(&kl_tile_attn_desc, tile0);
    EXPECT_STATUS(kl_tile_attn(&k, q, out, 1000, 128, 8, NULL), KL_ERROR_DIVISION_BY_ZERO);
    EXPECT_MESSAGE("KL_ERROR_DIVISION_BY_ZERO: kl_tile_attn: grid.x = ceil_div(seq_len, TILE) divides by zero "
                   "(seq_len = 1000, TILE = 0) [tile.yaml:31:10]");
    k = make_kernel(&kl_tile_attn_desc, tile1024);
    EXPECT_STATUS(kl_tile_attn(&k, q, out, 1000, 128, 8, NULL), KL_ERROR_BLOCK_LIMIT);
    EXPECT_MESSAGE("KL_ERROR_BLOCK_LIMIT: kl_tile_attn: block.x = TILE * 2 = 2048 exceeds 1024 (TILE = 1024) "
                   "[tile.yaml:34:10]");
}

/* fill.yaml: no kernel arguments at all. */
static void test_fill(void) {
    kl_kernel k = make_kernel(&kl_fill_marker_desc, NULL);
    int before;
    EXPECT(kl_fill_marker_desc.num_params == 0 && kl_fill_marker_desc.param_bytes == 0);
    EXPECT_STATUS(kl_fill_marker(&k, 5, NULL), KL_SUCCESS);
    EXPECT(geometry(5, 1, 1, 32, 1, 1, 0));
    EXPECT(last.args == NULL);
    before = launches;
    EXPECT_STATUS(kl_fill_marker(&k, 0, NULL), KL_SUCCESS);
    EXPECT(launches == before);
    EXPECT_STATUS(kl_fill_marker_check(&k, 3000000000u), KL_ERROR_GRID_LIMIT);
}

/* attrs.yaml: launch_attributes. clustered: grid (ceil_div(n, TILE), rows),
 * cluster (2, 1, 1), the mapping at attrs.yaml:22:7; dependent: PDL only;
 * grid_sync: cooperative with cluster (4, 1, 1); plain: none. */
static void test_attrs(void) {
    const int64_t tile64[] = {64};
    kl_kernel k = make_kernel(&kl_clustered_desc, tile64);
    int before;
    EXPECT(kl_clustered_desc.attributes != NULL);
    EXPECT(kl_plain_desc.attributes == NULL);
    EXPECT_STATUS(kl_clustered(&k, P(float, 0x1000), 256, 3, NULL), KL_SUCCESS);
    EXPECT(geometry(4, 3, 1, 128, 1, 1, 0));
    EXPECT(last.attributes == kl_clustered_desc.attributes);
    EXPECT(last.attributes != NULL && last.attributes->cluster[0] == 2 && last.attributes->cluster[1] == 1 &&
           last.attributes->cluster[2] == 1 && last.attributes->flags == 0);
    before = launches;
    /* 192 / 64 = 3 blocks: not a whole number of 2-block clusters. */
    EXPECT_STATUS(kl_clustered(&k, P(float, 0x1000), 192, 3, NULL), KL_ERROR_GRID_LIMIT);
    EXPECT_MESSAGE("KL_ERROR_GRID_LIMIT: kl_clustered: grid (3, 3, 1) is not a whole number of clusters of (2, 1, 1) "
                   "blocks [attrs.yaml:22:7]");
    EXPECT(launches == before);
    EXPECT_STATUS(kl_clustered_check(&k, P(float, 0x1000), 192, 3), KL_ERROR_GRID_LIMIT);
    /* An empty grid is still an empty launch. */
    EXPECT_STATUS(kl_clustered(&k, P(float, 0x1000), 0, 3, NULL), KL_SUCCESS);
    EXPECT(launches == before);

    k = make_kernel(&kl_dependent_desc, NULL);
    EXPECT_STATUS(kl_dependent(&k, P(const float, 0x2000), 7, NULL), KL_SUCCESS);
    EXPECT(geometry(7, 1, 1, 256, 1, 1, 0));
    EXPECT(last.attributes != NULL && last.attributes->flags == KL_LAUNCH_PROGRAMMATIC_SERIALIZATION &&
           last.attributes->cluster[0] == 0);

    k = make_kernel(&kl_grid_sync_desc, NULL);
    EXPECT_STATUS(kl_grid_sync(&k, P(float, 0x3000), NULL), KL_SUCCESS);
    EXPECT(last.attributes != NULL && last.attributes->flags == KL_LAUNCH_COOPERATIVE &&
           last.attributes->cluster[0] == 4 && last.attributes->cluster[1] == 1);

    k = make_kernel(&kl_plain_desc, NULL);
    EXPECT_STATUS(kl_plain(&k, P(float, 0x4000), NULL), KL_SUCCESS);
    EXPECT(last.attributes == NULL);
}

/* gather.yaml: extents table (unknown), idx n, out rows {n, out_stride,
 * ROW_WIDTH}, mask n (nullable), scratch blocks * 32; grid blocks, block 128;
 * args table@0 idx@8 out@16 mask@24 scratch@32 n@40 out_stride@48 (blocks
 * launch-only). Variant w4: ROW_WIDTH 4. */
static void test_gather(void) {
    const int64_t w4[] = {4};
    kl_kernel k = make_kernel(&kl_gather_rows_desc, w4);
    const float *table = P(const float, 0x1000);
    const int32_t *idx = P(const int32_t, 0x2000);
    float *out = P(float, 0x3000);
    uint8_t *mask = P(uint8_t, 0x4000);
    uint32_t *scratch = P(uint32_t, 0x5000);
    kl_gather_rows_args a;
    kl_gather_rows_elems e;
    int before;

    /* The table of declared extents: one per pointer that declares one. */
    EXPECT(kl_gather_rows_desc.num_extents == 5);
    EXPECT(strcmp(kl_gather_rows_desc.extents[0].param, "table") == 0);
    EXPECT(kl_gather_rows_desc.extents[0].check == UINT32_MAX && kl_gather_rows_desc.extents[0].unknown != NULL);
    EXPECT(strcmp(kl_gather_rows_desc.extents[2].param, "out") == 0 && kl_gather_rows_desc.extents[2].arg == 2);
    EXPECT(kl_gather_rows_desc.extents[2].elem_bytes == 4 && kl_gather_rows_desc.extents[3].elem_bytes == 1);
    EXPECT(kl_gather_rows_desc.extents[1].unknown == NULL);

    /* n = 5, out_stride = 6: out holds (5 - 1) * 6 + 4 = 28 elements. */
    launches = 0;
    EXPECT_STATUS(kl_gather_rows(&k, table, idx, out, mask, scratch, 5, 6, 2, NULL), KL_SUCCESS);
    EXPECT(launches == 1);
    EXPECT(geometry(2, 1, 1, 128, 1, 1, 0));
    EXPECT(extent_count == 5);
    EXPECT(extents[0] == KL_EXTENT_UNKNOWN);
    EXPECT(extents[1] == 5 && extents[2] == 28 && extents[3] == 5 && extents[4] == 64);

    /* mask is nullable: NULL passes and reaches the kernel as NULL; idx is not. */
    EXPECT_STATUS(kl_gather_rows(&k, table, idx, out, NULL, scratch, 5, 6, 2, NULL), KL_SUCCESS);
    EXPECT(u64_at(24) == 0);
    before = launches;
    EXPECT_STATUS(kl_gather_rows(&k, table, NULL, out, mask, scratch, 5, 6, 2, NULL), KL_ERROR_NULL_POINTER);
    EXPECT_MESSAGE("KL_ERROR_NULL_POINTER: kl_gather_rows: parameter idx is NULL [gather.yaml:13]");
    EXPECT_STATUS(kl_gather_rows_check(&k, table, idx, out, NULL, scratch, 5, 6, 2), KL_SUCCESS);

    /* An extent past 64 bits: (3 - 1) * 2^63 + 4. Refused, nothing launched,
     * by the launcher and by kl_X_check alike. */
    EXPECT_STATUS(kl_gather_rows(&k, table, idx, out, mask, scratch, 3, (uint64_t)1 << 63, 2, NULL), KL_ERROR_OVERFLOW);
    EXPECT_MESSAGE("KL_ERROR_OVERFLOW: kl_gather_rows: extent of out = (n - 1) * out_stride + ROW_WIDTH overflows 64 "
                   "bits (n = 3, out_stride = 9223372036854775808, ROW_WIDTH = 4) [gather.yaml:21:55]");
    EXPECT_STATUS(kl_gather_rows_check(&k, table, idx, out, mask, scratch, 3, (uint64_t)1 << 63, 2), KL_ERROR_OVERFLOW);
    EXPECT(launches == before);
    /* rows 0 is 0 elements, whatever the stride. */
    EXPECT_STATUS(kl_gather_rows(&k, table, idx, out, mask, scratch, 0, (uint64_t)1 << 63, 2, NULL), KL_SUCCESS);
    EXPECT(extents[2] == 0 && extents[1] == 0);

    /* By name: the same launch as positionally. */
    memset(&a, 0, sizeof a);
    a.table = table;
    a.idx = idx;
    a.out = out;
    a.scratch = scratch;
    a.n = 5;
    a.out_stride = 6;
    a.blocks = 3;
    EXPECT_STATUS(kl_gather_rows_call(&k, &a, NULL), KL_SUCCESS);
    EXPECT(geometry(3, 1, 1, 128, 1, 1, 0));
    EXPECT(u64_at(0) == 0x1000 && u64_at(8) == 0x2000 && u64_at(16) == 0x3000 && u64_at(24) == 0 &&
           u64_at(32) == 0x5000 && u32_at(40) == 5 && u64_at(48) == 6);
    EXPECT(extents[4] == 96);
    EXPECT_STATUS(kl_gather_rows_call(&k, NULL, NULL), KL_ERROR_NULL_POINTER);

    /* Before allocating: the elements each buffer needs, pointers unread. */
    a.idx = NULL;
    EXPECT_STATUS(kl_gather_rows_extents(&k, &a, &e), KL_SUCCESS);
    EXPECT(e.table == KL_EXTENT_UNKNOWN && e.idx == 5 && e.out == 28 && e.mask == 5 && e.scratch == 96);
    a.out_stride = (uint64_t)1 << 63;
    a.n = 3;
    EXPECT_STATUS(kl_gather_rows_extents(&k, &a, &e), KL_ERROR_OVERFLOW);
    EXPECT_STATUS(kl_gather_rows_extents(NULL, &a, &e), KL_ERROR_KERNEL_NOT_LOADED);
    EXPECT_STATUS(kl_gather_rows_extents(&k, &a, NULL), KL_ERROR_NULL_POINTER);
}

int main(void) {
    test_gather();
    test_attrs();
    test_scale();
    test_volume();
    test_tile();
    test_fill();
    if (failures) {
        fprintf(stderr, "%d expectation(s) failed\n", failures);
        return 1;
    }
    printf("all expectations hold\n");
    return 0;
}
