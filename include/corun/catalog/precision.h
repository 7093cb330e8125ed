#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace corun {

/// @brief Numeric format of a model's weights and math. `kAwq` is 4-bit weight-only
/// quantisation (activations and math in FP16, weights dequantised in the kernel).
enum class Precision { kFp32, kFp16, kBf16, kInt8, kAwq };

std::string_view to_string(Precision p);
std::optional<Precision> parse_precision(std::string_view s);
/// @brief {"fp32", "fp16", "bf16", "int8", "awq"}.
const std::vector<std::string>& precision_names();

/// @brief Bytes per stored weight, scales included (AWQ: 4 bits + one FP16 scale and zero per
/// group of 128 weights = 0.5 + 4/128 bytes).
double weight_bytes_per_param(Precision p);
/// @brief Bytes per activation / KV-cache element (FP32 4; FP16, BF16 and AWQ 2; INT8 1).
double activation_bytes_per_element(Precision p);

}  // namespace corun
