// CPU twins of the sparse-model kernels (sparse_sgd.h), with the engine's
// per-example arithmetic.
#include "kernels/sparse_sgd.h"

#include "kernels/linear_loss.h"

#include <math.h>
#include <string.h>

double linear_example_loss(int hinge, double y, double score, double *dscore) {
    return linear_loss_of(hinge, y, score, dscore);
}

static float score_of(size_t row, const size_t *row_ptr, const uint32_t *col, const float *val, const float *w,
                      size_t dim) {
    float dot = w[dim];
    for (size_t k = row_ptr[row]; k < row_ptr[row + 1]; k++) dot += w[col[k]] * val[k];
    return dot;
}

void linear_sgd_hogwild_cpu(size_t count, const uint32_t *order, const size_t *row_ptr, const uint32_t *col,
                            const float *val, const float *y, size_t dim, int hinge, float lr, float l2,
                            int scatter_atomic, size_t in_flight, float *w, double *loss_acc) {
    (void)scatter_atomic, (void)in_flight;  // one thread: every update lands, one at a time
    double total = 0.0;
    for (size_t e = 0; e < count; e++) {
        size_t row = order[e];
        double dscore;
        double loss = linear_example_loss(hinge, y[row], score_of(row, row_ptr, col, val, w, dim), &dscore);
        float coef = (float)dscore;
        if (coef != 0.0f || l2 != 0.0f) {
            for (size_t k = row_ptr[row]; k < row_ptr[row + 1]; k++) {
                float value = w[col[k]];
                float g = coef * val[k];
                if (l2 > 0.0f) {
                    g += l2 * value;
                    loss += 0.5 * l2 * (double)value * value;
                }
                w[col[k]] = value - lr * g;
            }
            if (coef != 0.0f) w[dim] = w[dim] - lr * coef;
        }
        total += loss;
    }
    loss_acc[0] += total;
}

void linear_grad_csr_cpu(size_t count, const uint32_t *order, const size_t *row_ptr, const uint32_t *col,
                         const float *val, const float *y, size_t dim, int hinge, float scale, const float *w,
                         float *grad, uint8_t *touched, double *loss_acc) {
    double total = 0.0;
    for (size_t e = 0; e < count; e++) {
        size_t row = order[e];
        double dscore;
        total += linear_example_loss(hinge, y[row], score_of(row, row_ptr, col, val, w, dim), &dscore);
        float coef = (float)(dscore * scale);
        for (size_t k = row_ptr[row]; k < row_ptr[row + 1]; k++) {
            grad[col[k]] += coef * val[k];
            touched[col[k]] = 1;
        }
        grad[dim] += coef;
    }
    loss_acc[0] += total;
}

void linear_apply_csr_cpu(size_t dim, float lr, float l2, float loss_weight, float *grad, uint8_t *touched, float *w,
                          double *loss_acc) {
    double reg = 0.0;
    for (size_t j = 0; j < dim; j++) {
        if (!touched[j]) continue;
        float g = grad[j];
        if (l2 > 0.0f) {
            g += l2 * w[j];
            reg += (double)w[j] * w[j];
        }
        w[j] = w[j] - lr * g;
        grad[j] = 0.0f;
        touched[j] = 0;
    }
    w[dim] = w[dim] - lr * grad[dim];
    grad[dim] = 0.0f;
    loss_acc[0] += loss_weight * 0.5 * l2 * reg;
}

void mf_sgd_hogwild_cpu(size_t count, const uint32_t *order, const uint32_t *user, const uint32_t *item,
                        const float *rating, float mean, size_t n_users, size_t rank, float lr, float l2,
                        int scatter_atomic, size_t in_flight, float *w, double *loss_acc) {
    (void)scatter_atomic, (void)in_flight;
    double total = 0.0;
    for (size_t e = 0; e < count; e++) {
        uint32_t r = order[e];
        float *u = w + (size_t)user[r] * rank, *v = w + (n_users + (size_t)item[r]) * rank;
        double dot = mean;
        for (size_t k = 0; k < rank; k++) dot += (double)u[k] * v[k];
        double err = dot - rating[r], reg = 0.0;
        for (size_t k = 0; k < rank; k++) {
            float uk = u[k], vk = v[k];
            reg += (double)uk * uk + (double)vk * vk;
            u[k] = uk - lr * (float)(err * vk + l2 * uk);
            v[k] = vk - lr * (float)(err * uk + l2 * vk);
        }
        total += 0.5 * err * err + 0.5 * l2 * reg;
    }
    loss_acc[0] += total;
}
