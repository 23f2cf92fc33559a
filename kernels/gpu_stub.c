// The CPU-only build's gpu.h: no device, and every call says why.
#include "kernels/gpu.h"

#ifndef ASGD_HAVE_CUDA
#include <stdio.h>

#define NOT_BUILT "asgd was built without CUDA (configure with the CUDA Toolkit installed, ASGD_CUDA=AUTO or ON)"

static int not_built(char *err, size_t err_len) {
    snprintf(err, err_len, "%s", NOT_BUILT);
    return -1;
}

int gpu_device_count(char *why, size_t why_len) {
    snprintf(why, why_len, "%s", NOT_BUILT);
    return 0;
}
int gpu_select(int device, char *err, size_t err_len) { return (void)device, not_built(err, err_len); }
void *gpu_alloc(size_t bytes, char *err, size_t err_len) { return (void)bytes, not_built(err, err_len), NULL; }
void gpu_free(void *p) { (void)p; }
void *gpu_alloc_host(size_t bytes, char *err, size_t err_len) { return (void)bytes, not_built(err, err_len), NULL; }
void gpu_free_host(void *p) { (void)p; }
int gpu_upload(void *d, const void *s, size_t n, char *err, size_t err_len) {
    return (void)d, (void)s, (void)n, not_built(err, err_len);
}
int gpu_download(void *d, const void *s, size_t n, char *err, size_t err_len) {
    return (void)d, (void)s, (void)n, not_built(err, err_len);
}
int gpu_zero(void *d, size_t n, char *err, size_t err_len) { return (void)d, (void)n, not_built(err, err_len); }
gpu_stream_t *gpu_stream_new(char *err, size_t err_len) { return not_built(err, err_len), NULL; }
void gpu_stream_destroy(gpu_stream_t **s) { (void)s; }
int gpu_stream_sync(gpu_stream_t *s, char *err, size_t err_len) { return (void)s, not_built(err, err_len); }
int gpu_copy_async(void *d, const void *s, size_t n, gpu_stream_t *st, char *err, size_t err_len) {
    return (void)d, (void)s, (void)n, (void)st, not_built(err, err_len);
}
int gpu_zero_async(void *d, size_t n, gpu_stream_t *st, char *err, size_t err_len) {
    return (void)d, (void)n, (void)st, not_built(err, err_len);
}
int gpu_use_stream(gpu_stream_t *s, char *err, size_t err_len) { return (void)s, not_built(err, err_len); }
gpu_event_t *gpu_event_new(int timing, char *err, size_t err_len) {
    return (void)timing, not_built(err, err_len), NULL;
}
void gpu_event_destroy(gpu_event_t **e) { (void)e; }
int gpu_event_record(gpu_event_t *e, gpu_stream_t *s, char *err, size_t err_len) {
    return (void)e, (void)s, not_built(err, err_len);
}
int gpu_stream_wait_event(gpu_stream_t *s, gpu_event_t *e, char *err, size_t err_len) {
    return (void)s, (void)e, not_built(err, err_len);
}
int gpu_event_sync(gpu_event_t *e, char *err, size_t err_len) { return (void)e, not_built(err, err_len); }
int gpu_event_elapsed_ms(gpu_event_t *a, gpu_event_t *b, float *ms, char *err, size_t err_len) {
    return (void)a, (void)b, (void)ms, not_built(err, err_len);
}
int gpu_check(char *err, size_t err_len) { return (void)err, (void)err_len, 0; }
int gpu_sync_device(char *err, size_t err_len) { return not_built(err, err_len); }
void gpu_release_thread(void) {}
#endif
