#include "kernels/dense.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "kernels/blas_runtime.h"
#include "kernels/dense_small.h"

// A minibatch of 8 to 32 rows into a layer of 64 or more units runs faster as
// z^T = w x^T: OpenBLAS takes x w^T of that shape through its small-matrix
// kernels, which were 1.2-1.5x slower there (784->256 and 256->128 at batch
// 16, SkylakeX and Haswell kernels; at batch 64 and above, or 10 units, the
// small-matrix form was as fast or faster). z^T goes through a buffer on the
// stack and into z with the bias.
#define DENSE_FORWARD_T_FLOATS 4096

// A product that overwrites its output c (n floats): the beta to ask for.
// Where the kernels would scale c by 0 in a pass of their own, c is zeroed
// here instead (memset, in vector stores) and added to with beta 1: the same
// bits, since those kernels add the product to the zeroed c either way
// (blas_runtime.h, blas_beta0_direct).
static float zero_output(float *c, size_t n) {
    if (blas_beta0_direct()) return 0.0f;
    memset(c, 0, n * sizeof *c);
    return 1.0f;
}

static int forward_transposed(int batch, int out) {
    return batch >= 8 && batch <= 32 && out >= 64 && (size_t)batch * (size_t)out <= DENSE_FORWARD_T_FLOATS;
}

void dense_forward_cpu(int batch, int in, int out, const float *x, const float *w, const float *bias, float *z) {
    if (!dense_forward_small(batch, in, out, x, w, bias, z)) dense_forward_blas_cpu(batch, in, out, x, w, bias, z);
}

void dense_forward_blas_cpu(int batch, int in, int out, const float *x, const float *w, const float *bias, float *z) {
    if (forward_transposed(batch, out)) {
        float zt[DENSE_FORWARD_T_FLOATS];  // (out, batch)
        float beta = zero_output(zt, (size_t)out * (size_t)batch);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, out, batch, in, 1.0f, w, in, x, in, beta, zt, batch);
        for (int r = 0; r < batch; r++)
            for (int o = 0; o < out; o++) z[(size_t)r * out + o] = zt[(size_t)o * batch + r] + bias[o];
        return;
    }
    for (int r = 0; r < batch; r++) memcpy(z + (size_t)r * out, bias, (size_t)out * sizeof *z);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, out, in, 1.0f, x, in, w, in, 1.0f, z, out);
}

void relu_forward_cpu(int n, float *z) {
    for (int i = 0; i < n; i++) z[i] = z[i] > 0.0f ? z[i] : 0.0f;
}

void relu_backward_cpu(int n, const float *activation, float *dz) {
    for (int i = 0; i < n; i++) dz[i] = activation[i] > 0.0f ? dz[i] : 0.0f;
}

// One row of softmax cross-entropy: returns its loss, sets *hit, writes drow if not NULL.
static double softmax_xent_row(int classes, const float *row, int label, float scale, float *drow, int *hit) {
    int argmax = 0;
    float max = row[0];
    for (int c = 1; c < classes; c++)
        if (row[c] > max) max = row[c], argmax = c;
    double sum = 0.0;
    for (int c = 0; c < classes; c++) sum += exp((double)(row[c] - max));
    double log_sum = log(sum);
    *hit = argmax == label;
    if (drow) {
        for (int c = 0; c < classes; c++) {
            double p = exp((double)(row[c] - max) - log_sum);
            drow[c] = scale * (float)(p - (c == label ? 1.0 : 0.0));
        }
    }
    return log_sum - (double)(row[label] - max);
}

double softmax_xent_cpu(int batch, int classes, const float *logits, const int32_t *labels, float scale, float *dlogits,
                        int *correct) {
    double loss = 0.0;
    int hits = 0;
    for (int r = 0; r < batch; r++) {
        int hit;
        loss += softmax_xent_row(classes, logits + (size_t)r * classes, labels[r], scale,
                                 dlogits ? dlogits + (size_t)r * classes : NULL, &hit);
        hits += hit;
    }
    if (correct) *correct = hits;
    return loss;
}

void softmax_xent_rows_cpu(int batch, int classes, const float *logits, const int32_t *labels, float scale,
                           float *dlogits, float *row_loss, float *row_correct) {
    for (int r = 0; r < batch; r++) {
        int hit;
        row_loss[r] = (float)softmax_xent_row(classes, logits + (size_t)r * classes, labels[r], scale,
                                              dlogits ? dlogits + (size_t)r * classes : NULL, &hit);
        row_correct[r] = (float)hit;
    }
}

void dense_forward_act_cpu(int batch, int in, int out, const float *x, const float *w, const float *bias, float *z,
                           int relu) {
    dense_forward_cpu(batch, in, out, x, w, bias, z);
    if (relu) relu_forward_cpu(batch * out, z);
}

void gather_rows_cpu(int rows, int dim, const float *src, const int32_t *src_labels, const uint32_t *idx, float *dst,
                     int32_t *dst_labels) {
    for (int r = 0; r < rows; r++) {
        memcpy(dst + (size_t)r * dim, src + (size_t)idx[r] * dim, (size_t)dim * sizeof *dst);
        dst_labels[r] = src_labels[idx[r]];
    }
}

void dense_weight_grad_cpu(int batch, int in, int out, const float *dz, int ldz, const float *x, float *dw) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, batch, 1.0f, dz, ldz, x, in, 1.0f, dw, in);
}

void dense_weight_grad_set_cpu(int batch, int in, int out, const float *dz, int ldz, const float *x, float *dw) {
    if (dense_wgrad_small(batch, in, out, dz, ldz, x, dw)) return;
    float beta = zero_output(dw, (size_t)out * (size_t)in);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, batch, 1.0f, dz, ldz, x, in, beta, dw, in);
}

void dense_bias_grad_cpu(int batch, int out, const float *dz, float *dbias) {
    for (int r = 0; r < batch; r++)
        for (int o = 0; o < out; o++) dbias[o] += dz[(size_t)r * out + o];
}

void dense_backward_input_cpu(int batch, int in, int out, const float *dz, const float *w, float *dx) {
    float beta = zero_output(dx, (size_t)batch * (size_t)in);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, in, out, 1.0f, dz, out, w, in, beta, dx, in);
}
