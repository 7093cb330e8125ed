#include "corun/catalog/precision.h"

#include "corun/core/enum_names.h"

namespace corun {

namespace {

constexpr EnumNames<Precision, 5> kPrecisionNames{{{{Precision::kFp32, "fp32"},
                                                    {Precision::kFp16, "fp16"},
                                                    {Precision::kBf16, "bf16"},
                                                    {Precision::kInt8, "int8"},
                                                    {Precision::kAwq, "awq"}}}};

}  // namespace

std::string_view to_string(Precision p) { return kPrecisionNames.name(p); }

std::optional<Precision> parse_precision(std::string_view s) { return kPrecisionNames.parse(s); }

const std::vector<std::string>& precision_names() {
  static const std::vector<std::string> names = kPrecisionNames.names();
  return names;
}

double weight_bytes_per_param(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return 4;
    case Precision::kFp16:
    case Precision::kBf16:
      return 2;
    case Precision::kInt8:
      // Per-output-channel scales add 2 bytes per row of thousands of weights: negligible.
      return 1;
    case Precision::kAwq:
      // 4-bit weights plus one FP16 scale and one FP16 zero point per group of 128 weights.
      return 0.5 + 4.0 / 128.0;
  }
  return 2;
}

double activation_bytes_per_element(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return 4;
    case Precision::kFp16:
    case Precision::kBf16:
    case Precision::kAwq:  // weight-only quantisation: activations stay FP16
      return 2;
    case Precision::kInt8:
      return 1;
  }
  return 2;
}

}  // namespace corun
