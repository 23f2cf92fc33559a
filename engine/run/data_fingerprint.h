#ifndef ASGD_ENGINE_RUN_DATA_FINGERPRINT_H
#define ASGD_ENGINE_RUN_DATA_FINGERPRINT_H
// A data set's fingerprint: the sum, modulo 2^64, of a 64-bit hash of each
// example — its label and its contents bit for bit (a sparse example's
// indices and values, an image's pixels, a rating's user, item and value).
// As a sum it is the sum of its parts': the fingerprint of a set split into
// train and test is the sum of theirs, whatever the split; the order of the
// examples does not count. Model files record the training run's
// (model_file.h), and asgd eval tells by them whether it was given the same
// data and split.
#include <stdint.h>

#include "engine/data/data_source.h"

// The training set's (test 0) or the test set's (test 1) fingerprint, of the kind b holds.
uint64_t data_fingerprint(const data_bundle_t *b, int test);

#endif
