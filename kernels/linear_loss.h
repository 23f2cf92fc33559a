#ifndef ASGD_KERNELS_LINEAR_LOSS_H
#define ASGD_KERNELS_LINEAR_LOSS_H
// The per-example loss of the linear models, written once for the CPU twins
// (sparse_sgd.c) and the CUDA ones (sparse_sgd.cu): logistic loss
// log(1 + exp(-y s)) and its derivative from one exponential, without
// overflow for either sign of the margin, or hinge max(0, 1 - y s).
#include <math.h>

#ifdef __CUDACC__
#define LINEAR_LOSS_FN static inline __host__ __device__
#else
#define LINEAR_LOSS_FN static inline
#endif

// Loss of one example with label y (-1/+1) and score s; d loss / d s into *dscore.
LINEAR_LOSS_FN double linear_loss_of(int hinge, double y, double score, double *dscore) {
    double margin = y * score;
    if (hinge) {
        *dscore = margin < 1.0 ? -y : 0.0;
        return margin < 1.0 ? 1.0 - margin : 0.0;
    }
    double e = exp(-fabs(margin));
    double sigma_neg = margin > 0 ? e / (1.0 + e) : 1.0 / (1.0 + e);
    *dscore = -y * sigma_neg;
    return (margin > 0 ? 0.0 : -margin) + log1p(e);
}

#endif
