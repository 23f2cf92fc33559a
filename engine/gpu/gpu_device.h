#ifndef ASGD_ENGINE_GPU_GPU_DEVICE_H
#define ASGD_ENGINE_GPU_GPU_DEVICE_H
// The CUDA model (gpu_model.h) as a trainer device: set train_config_t's
// device to &gpu_device_ops and device_options to a gpu_options_t (or
// device_handle to a gpu_model_t made already). Without the CUDA module
// (gpu_module.h), create fails with one line that says why.
#include "engine/core/train_device.h"
#include "engine/gpu/gpu_model.h"

extern const train_device_ops_t gpu_device_ops;

#endif
