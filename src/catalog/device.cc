#include "corun/catalog/device.h"

namespace corun {

double Device::peak_flops(Precision p) const {
  double tflops = 0;
  switch (p) {
    case Precision::kFp32:
      tflops = peak_fp32_tflops;
      break;
    case Precision::kFp16:
    case Precision::kAwq:  // weights are dequantised in the kernel; the math is FP16
      tflops = peak_fp16_tflops;
      break;
    case Precision::kBf16:
      // Without BF16 tensor cores (Volta) cuBLAS and PyTorch still run BF16, on CUDA cores.
      tflops = peak_bf16_tflops > 0 ? peak_bf16_tflops : peak_fp32_tflops;
      break;
    case Precision::kInt8:
      tflops = peak_int8_tops;
      break;
  }
  return tflops * 1e12;
}

bool Device::has_native(Precision p) const { return p != Precision::kBf16 || peak_bf16_tflops > 0; }

}  // namespace corun
