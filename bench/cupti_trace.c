/*
 * cupti_trace.c -- a kernel tracer for any CUDA program, kiln included,
 * through CUPTI's activity API: LD_PRELOAD=libkiln_cupti_trace.so, and every
 * kernel that runs (launched from a stream or replayed inside a CUDA graph)
 * is written to $KILN_TRACE_OUT (default kiln_trace.csv) as one line (with
 * $KILN_TRACE_MEMCPY set, also every copy: name memcpy_HtoD etc., grid_x its bytes):
 *
 *   start_ns,end_ns,device,stream,graph_id,correlation,grid_x,grid_y,grid_z,block_x,name
 *
 * Unlike the executor's profiling mode (an event before each op, eager
 * launches, so small ops carry the host's launch gaps), this sees the decode
 * steps as they run in production: graphs replayed, programmatic dependent
 * launch on. bench/trace_summary.py turns the file into per-kernel times per
 * step and the idle time between kernels.
 *
 * Build (scripts/gpu-run.sh does):
 *   cc -O2 -shared -fPIC -I/usr/local/cuda/include bench/cupti_trace.c \
 *      -o libkiln_cupti_trace.so -L/usr/local/cuda/lib64 -lcupti
 * Developer tool only: not part of the library, not built by CMake.
 */
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_BYTES (8u << 20)

static FILE *g_out;
static unsigned long long g_kernels, g_dropped;

static void CUPTIAPI buf_request(uint8_t **buf, size_t *size, size_t *max_records) {
    *buf = aligned_alloc(8, BUF_BYTES);
    *size = *buf ? BUF_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI buf_complete(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid) {
    (void)ctx, (void)stream, (void)size;
    CUpti_Activity *rec = NULL;
    while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) { /* copies as rows named memcpy_<kind>, grid_x = bytes */
            const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
            static const char *kinds[] = {"?", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
            if (g_out)
                fprintf(g_out, "%llu,%llu,%u,%u,%u,%u,%llu,1,1,0,memcpy_%s\n", (unsigned long long)m->start,
                        (unsigned long long)m->end, m->deviceId, m->streamId, m->graphId, m->correlationId,
                        (unsigned long long)m->bytes, m->copyKind < 11 ? kinds[m->copyKind] : "?");
            continue;
        }
        if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
        g_kernels++;
        if (g_out)
            fprintf(g_out, "%llu,%llu,%u,%u,%u,%u,%d,%d,%d,%d,%s\n", (unsigned long long)k->start,
                    (unsigned long long)k->end, k->deviceId, k->streamId, k->graphId, k->correlationId, k->gridX,
                    k->gridY, k->gridZ, k->blockX, k->name ? k->name : "?");
    }
    size_t d = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &d) == CUPTI_SUCCESS) g_dropped += d;
    free(buf);
}

__attribute__((constructor)) static void trace_init(void) {
    const char *path = getenv("KILN_TRACE_OUT");
    g_out = fopen(path && *path ? path : "kiln_trace.csv", "w");
    if (!g_out) {
        fprintf(stderr, "cupti_trace: cannot open %s\n", path ? path : "kiln_trace.csv");
        return;
    }
    fprintf(g_out, "start_ns,end_ns,device,stream,graph_id,correlation,grid_x,grid_y,grid_z,block_x,name\n");
    if (cuptiActivityRegisterCallbacks(buf_request, buf_complete) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
        (getenv("KILN_TRACE_MEMCPY") && cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS)) {
        fprintf(stderr, "cupti_trace: CUPTI activity API unavailable\n");
    }
}

__attribute__((destructor)) static void trace_fini(void) {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (g_out) fclose(g_out);
    fprintf(stderr, "cupti_trace: %llu kernels recorded, %llu dropped\n", g_kernels, g_dropped);
}
