#include "kernels/dense.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

void dense_forward_cpu(int batch, int in, int out, const float *x, const float *w, const float *bias, float *z) {
    for (int r = 0; r < batch; r++) memcpy(z + (size_t)r * out, bias, (size_t)out * sizeof *z);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, out, in, 1.0f, x, in, w, in, 1.0f, z, out);
}

void relu_forward_cpu(int n, float *z) {
    for (int i = 0; i < n; i++) z[i] = z[i] > 0.0f ? z[i] : 0.0f;
}

void relu_backward_cpu(int n, const float *activation, float *dz) {
    for (int i = 0; i < n; i++) dz[i] = activation[i] > 0.0f ? dz[i] : 0.0f;
}

double softmax_xent_cpu(int batch, int classes, const float *logits, const int32_t *labels, float scale,
                        float *dlogits, int *correct) {
    double loss = 0.0;
    int hits = 0;
    for (int r = 0; r < batch; r++) {
        const float *row = logits + (size_t)r * classes;
        int argmax = 0;
        float max = row[0];
        for (int c = 1; c < classes; c++)
            if (row[c] > max) max = row[c], argmax = c;
        double sum = 0.0;
        for (int c = 0; c < classes; c++) sum += exp((double)(row[c] - max));
        double log_sum = log(sum);
        int label = labels[r];
        loss += log_sum - (double)(row[label] - max);
        hits += argmax == label;
        if (dlogits) {
            float *drow = dlogits + (size_t)r * classes;
            for (int c = 0; c < classes; c++) {
                double p = exp((double)(row[c] - max) - log_sum);
                drow[c] = scale * (float)(p - (c == label ? 1.0 : 0.0));
            }
        }
    }
    if (correct) *correct = hits;
    return loss;
}

void dense_weight_grad_cpu(int batch, int in, int out, const float *dz, int ldz, const float *x, float *dw) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, batch, 1.0f, dz, ldz, x, in, 1.0f, dw, in);
}

void dense_bias_grad_cpu(int batch, int out, const float *dz, float *dbias) {
    for (int r = 0; r < batch; r++)
        for (int o = 0; o < out; o++) dbias[o] += dz[(size_t)r * out + o];
}

void dense_backward_input_cpu(int batch, int in, int out, const float *dz, const float *w, float *dx) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, in, out, 1.0f, dz, out, w, in, 0.0f, dx, in);
}
