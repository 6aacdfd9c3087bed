/*
 * stubs.c -- the runtime façade in builds without the CUDA headers
 * (-DKILN_GPU=OFF or no toolkit): every entry fails with
 * KILN_ERR_UNAVAILABLE, destroy functions accept NULL.
 * Ownership: nothing is allocated. Thread-safety: stateless.
 */
#include "kiln_rt.h"

#define NOGPU() KILN_FAIL(KILN_ERR_UNAVAILABLE, "this build of kiln has no CUDA backend (built without CUDA headers)")

bool kiln_rt_built_with_cuda(void) { return false; }
kiln_status kiln_rt_init(void) { return NOGPU(); }
kiln_status kiln_rt_load_nvrtc(void) { return NOGPU(); }
kiln_status kiln_rt_load_cublaslt(void) { return NOGPU(); }
kiln_status kiln_rt_load_nccl(void) { return NOGPU(); }
kiln_status kiln_rt_driver_version(int *v) { (void)v; return NOGPU(); }
kiln_status kiln_rt_device_count(int *n) { *n = 0; return NOGPU(); }
kiln_status kiln_rt_device_open(int o, kiln_rt_device **out) { (void)o; (void)out; return NOGPU(); }
void kiln_rt_device_close(kiln_rt_device *d) { (void)d; }
const kiln_rt_device_info *kiln_rt_device_get_info(const kiln_rt_device *d) { (void)d; return NULL; }
kiln_status kiln_rt_device_make_current(kiln_rt_device *d) { (void)d; return NOGPU(); }
kiln_status kiln_rt_device_sync(kiln_rt_device *d) { (void)d; return NOGPU(); }
kiln_status kiln_rt_mem_info(kiln_rt_device *d, size_t *f, size_t *t) { (void)d; (void)f; (void)t; return NOGPU(); }
uint64_t kiln_rt_alloc_count(void) { return 0; }
kiln_status kiln_rt_malloc(kiln_rt_device *d, size_t b, kiln_devptr *o) { (void)d; (void)b; (void)o; return NOGPU(); }
void kiln_rt_free(kiln_rt_device *d, kiln_devptr p) { (void)d; (void)p; }
kiln_status kiln_rt_host_alloc(kiln_rt_device *d, size_t b, void **o) { (void)d; (void)b; (void)o; return NOGPU(); }
void kiln_rt_host_free(kiln_rt_device *d, void *p) { (void)d; (void)p; }
kiln_status kiln_rt_memcpy_htod(kiln_devptr d, const void *s, size_t b, kiln_rt_stream *st) { (void)d; (void)s; (void)b; (void)st; return NOGPU(); }
kiln_status kiln_rt_memcpy_dtoh(void *d, kiln_devptr s, size_t b, kiln_rt_stream *st) { (void)d; (void)s; (void)b; (void)st; return NOGPU(); }
kiln_status kiln_rt_memcpy_dtod(kiln_devptr d, kiln_devptr s, size_t b, kiln_rt_stream *st) { (void)d; (void)s; (void)b; (void)st; return NOGPU(); }
kiln_status kiln_rt_memset8(kiln_devptr d, uint8_t v, size_t b, kiln_rt_stream *s) { (void)d; (void)v; (void)b; (void)s; return NOGPU(); }
kiln_status kiln_rt_memset32(kiln_devptr d, uint32_t v, size_t n, kiln_rt_stream *s) { (void)d; (void)v; (void)n; (void)s; return NOGPU(); }
kiln_status kiln_rt_pool_create(kiln_rt_device *d, const char *n, size_t b, kiln_rt_mempool **o) { (void)d; (void)n; (void)b; (void)o; return NOGPU(); }
void kiln_rt_pool_destroy(kiln_rt_mempool *p) { (void)p; }
kiln_status kiln_rt_pool_alloc(kiln_rt_mempool *p, size_t b, size_t a, kiln_devptr *o) { (void)p; (void)b; (void)a; (void)o; return NOGPU(); }
size_t kiln_rt_pool_mark(const kiln_rt_mempool *p) { (void)p; return 0; }
void kiln_rt_pool_reset(kiln_rt_mempool *p, size_t m) { (void)p; (void)m; }
size_t kiln_rt_pool_capacity(const kiln_rt_mempool *p) { (void)p; return 0; }
size_t kiln_rt_pool_high_water(const kiln_rt_mempool *p) { (void)p; return 0; }
kiln_devptr kiln_rt_pool_base(const kiln_rt_mempool *p) { (void)p; return 0; }
kiln_status kiln_rt_stream_create(kiln_rt_device *d, kiln_rt_stream **o) { (void)d; (void)o; return NOGPU(); }
void kiln_rt_stream_destroy(kiln_rt_stream *s) { (void)s; }
kiln_status kiln_rt_stream_sync(kiln_rt_stream *s) { (void)s; return NOGPU(); }
kiln_status kiln_rt_stream_wait_event(kiln_rt_stream *s, kiln_rt_event *e) { (void)s; (void)e; return NOGPU(); }
kiln_rt_device *kiln_rt_stream_device(kiln_rt_stream *s) { (void)s; return NULL; }
kiln_status kiln_rt_event_create(kiln_rt_device *d, bool t, kiln_rt_event **o) { (void)d; (void)t; (void)o; return NOGPU(); }
void kiln_rt_event_destroy(kiln_rt_event *e) { (void)e; }
kiln_status kiln_rt_event_record(kiln_rt_event *e, kiln_rt_stream *s) { (void)e; (void)s; return NOGPU(); }
kiln_status kiln_rt_event_sync(kiln_rt_event *e) { (void)e; return NOGPU(); }
kiln_status kiln_rt_event_elapsed_ms(kiln_rt_event *a, kiln_rt_event *b, float *ms) { (void)a; (void)b; (void)ms; return NOGPU(); }
kiln_status kiln_rt_graph_begin(kiln_rt_stream *s) { (void)s; return NOGPU(); }
kiln_status kiln_rt_graph_end(kiln_rt_stream *s, kiln_rt_graph **o) { (void)s; (void)o; return NOGPU(); }
kiln_status kiln_rt_graph_launch(kiln_rt_graph *g, kiln_rt_stream *s) { (void)g; (void)s; return NOGPU(); }
void kiln_rt_graph_destroy(kiln_rt_graph *g) { (void)g; }
kiln_status kiln_rt_module_load(kiln_rt_device *d, const void *c, size_t l, kiln_rt_module **o) { (void)d; (void)c; (void)l; (void)o; return NOGPU(); }
void kiln_rt_module_unload(kiln_rt_module *m) { (void)m; }
kiln_status kiln_rt_module_get(kiln_rt_module *m, const char *e, kiln_rt_func **o) { (void)m; (void)e; (void)o; return NOGPU(); }
const char *kiln_rt_func_name(const kiln_rt_func *f) { (void)f; return ""; }
kiln_status kiln_rt_func_get_attrs(kiln_rt_func *f, kiln_rt_func_attrs *a) { (void)f; (void)a; return NOGPU(); }
void kiln_rt_func_set_pdl(kiln_rt_func *f, bool on) { (void)f; (void)on; }
kiln_status kiln_rt_func_max_clusters(kiln_rt_func *f, kiln_rt_dim3 g, kiln_rt_dim3 b, unsigned s, int *out) { (void)f; (void)g; (void)b; (void)s; *out = 0; return NOGPU(); }
kiln_status kiln_rt_tmap_2d(kiln_rt_tmap *out, kiln_devptr base, kiln_dtype dt, int64_t rows, int64_t cols, int64_t ld,
                            int box_rows, int box_cols) {
    (void)out; (void)base; (void)dt; (void)rows; (void)cols; (void)ld; (void)box_rows; (void)box_cols;
    return NOGPU();
}
kiln_status kiln_rt_launch(kiln_rt_func *f, kiln_rt_dim3 g, kiln_rt_dim3 b, unsigned s, kiln_rt_stream *st, void **a) { (void)f; (void)g; (void)b; (void)s; (void)st; (void)a; return NOGPU(); }
kiln_status kiln_rt_check_device(kiln_rt_device *d) { (void)d; return NOGPU(); }
kiln_status kiln_jit_compile(kiln_jit_unit *u, int n, const kiln_jit_options *o) { (void)u; (void)n; (void)o; return NOGPU(); }
void kiln_jit_unit_clear(kiln_jit_unit *u) { (void)u; }
kiln_status kiln_jit_compile_source(const char *n, const char *s, const char *d, const kiln_jit_options *o, kiln_jit_unit *u) { (void)n; (void)s; (void)d; (void)o; (void)u; return NOGPU(); }
kiln_status kiln_jit_nvrtc_version(int *a, int *b) { (void)a; (void)b; return NOGPU(); }
char *kiln_jit_cache_dir(const kiln_jit_options *o) { (void)o; return kiln_strdup(""); }
kiln_status kiln_rt_kernels_create(kiln_rt_device *d, const kiln_jit_options *o, kiln_rt_kernels **k) { (void)d; (void)o; (void)k; return NOGPU(); }
void kiln_rt_kernels_destroy(kiln_rt_kernels *k) { (void)k; }
kiln_status kiln_rt_kernels_prepare(kiln_rt_kernels *k, const kiln_jit_spec *s, int n) { (void)k; (void)s; (void)n; return NOGPU(); }
kiln_status kiln_rt_kernels_get(kiln_rt_kernels *k, const char *n, const char *d, kiln_rt_func **o) { (void)k; (void)n; (void)d; (void)o; return NOGPU(); }
kiln_status kiln_rt_kernels_add_source(kiln_rt_kernels *k, const char *n, const char *s, const char *e, const char *g) { (void)k; (void)n; (void)s; (void)e; (void)g; return NOGPU(); }
kiln_status kiln_rt_blas_create(kiln_rt_device *d, kiln_devptr w, size_t b, kiln_rt_blas **o) { (void)d; (void)w; (void)b; (void)o; return NOGPU(); }
void kiln_rt_blas_destroy(kiln_rt_blas *b) { (void)b; }
kiln_status kiln_rt_gemm(kiln_rt_blas *b, kiln_rt_stream *s, kiln_devptr o, int64_t ldo, kiln_dtype od, kiln_devptr x, kiln_devptr w, kiln_dtype id, kiln_devptr bias, int64_t M, int64_t N, int64_t K) { (void)b; (void)s; (void)o; (void)ldo; (void)od; (void)x; (void)w; (void)id; (void)bias; (void)M; (void)N; (void)K; return NOGPU(); }
int kiln_rt_blas_n_algos(const kiln_rt_blas *b) { (void)b; return 0; }
kiln_status kiln_rt_nccl_get_id(uint8_t id[KILN_RT_NCCL_ID_BYTES]) { (void)id; return NOGPU(); }
kiln_status kiln_rt_comm_create(kiln_rt_device *d, const uint8_t id[KILN_RT_NCCL_ID_BYTES], int n, int r, kiln_rt_comm **o) { (void)d; (void)id; (void)n; (void)r; (void)o; return NOGPU(); }
void kiln_rt_comm_destroy(kiln_rt_comm *c) { (void)c; }
kiln_status kiln_rt_all_reduce_sum(kiln_rt_comm *c, kiln_devptr b, size_t n, kiln_dtype d, kiln_rt_stream *s) { (void)c; (void)b; (void)n; (void)d; (void)s; return NOGPU(); }
kiln_status kiln_rt_all_gather(kiln_rt_comm *c, kiln_devptr a, kiln_devptr b, size_t n, kiln_dtype d, kiln_rt_stream *s) { (void)c; (void)a; (void)b; (void)n; (void)d; (void)s; return NOGPU(); }
bool kiln_rt_kernels_was_used(kiln_rt_kernels *k, const char *n) { (void)k; (void)n; return false; }
bool kiln_rt_kernels_set_pdl_early(kiln_rt_kernels *k, bool on) { (void)k; (void)on; return false; }
bool kiln_rt_kernels_pdl(const kiln_rt_kernels *k) { (void)k; return false; }
kiln_status kiln_rt_p2p_create(kiln_rt_device *d, kiln_rt_kernels *k, int n, int r, size_t m, int push, kiln_rt_p2p **o) { (void)d; (void)k; (void)n; (void)r; (void)m; (void)push; (void)o; return NOGPU(); }
void kiln_rt_p2p_destroy(kiln_rt_p2p *p) { (void)p; }
void kiln_rt_p2p_handle(const kiln_rt_p2p *p, uint8_t out[KILN_RT_P2P_HANDLE_BYTES]) { (void)p; memset(out, 0, KILN_RT_P2P_HANDLE_BYTES); }
kiln_status kiln_rt_p2p_set_peers(kiln_rt_p2p *p, const uint8_t *h) { (void)p; (void)h; return NOGPU(); }
bool kiln_rt_p2p_fits(const kiln_rt_p2p *p, kiln_devptr b, size_t n, kiln_dtype dt) { (void)p; (void)b; (void)n; (void)dt; return false; }
kiln_status kiln_rt_p2p_all_reduce_sum(kiln_rt_p2p *p, kiln_devptr b, size_t n, kiln_dtype dt, kiln_rt_stream *s) { (void)p; (void)b; (void)n; (void)dt; (void)s; return NOGPU(); }
size_t kiln_rt_p2p_max_bytes(const kiln_rt_p2p *p) { (void)p; return 0; }
