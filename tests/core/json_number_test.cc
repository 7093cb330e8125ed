#include "corun/core/json_number.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace corun::json_number_test {
namespace {

using nlohmann::json;

TEST(JsonNumber, IntegersWithinRangeAreRead) {
  EXPECT_EQ(json_number<int>(json(-7)), -7);
  EXPECT_EQ(json_number<std::int32_t>(json(2147483647)), 2147483647);  // 2^31 - 1
  EXPECT_EQ(json_number<std::size_t>(json(std::uint64_t{18446744073709551615U})),
            std::uint64_t{18446744073709551615U});  // 2^64 - 1
  EXPECT_EQ(json_number<std::uint8_t>(json(255)), 255);
}

TEST(JsonNumber, WhatTheTypeCannotHoldIsRefusedNotConverted) {
  // nlohmann's get<int>() static_casts: 2.7e108 -> int is undefined behaviour, 2^31 wraps.
  EXPECT_THROW(json_number<int>(json::parse("2.7e108")), JsonNumberError);
  EXPECT_THROW(json_number<std::int32_t>(json(std::int64_t{2147483648})), JsonNumberError);
  EXPECT_THROW(json_number<std::size_t>(json(-1)), JsonNumberError);
  EXPECT_THROW(json_number<std::uint8_t>(json(256)), JsonNumberError);
  EXPECT_THROW(json_number<int>(json(1.5)), JsonNumberError);  // a fraction is not an index
  EXPECT_THROW(json_number<int>(json(true)), JsonNumberError);  // get<int>() reads true as 1
  EXPECT_THROW(json_number<int>(json("3")), JsonNumberError);
  // float's largest finite value is about 3.4028e38; a double beyond it does not fit.
  EXPECT_EQ(json_number<float>(json(3.0e38)), 3.0e38F);
  EXPECT_THROW(json_number<float>(json::parse("1e300")), JsonNumberError);
  EXPECT_DOUBLE_EQ(json_number<double>(json::parse("1e300")), 1e300);
}

TEST(JsonNumber, TheErrorIsALibraryErrorThatLoadersAlreadyCatch) {
  try {
    json_number<float>(json::parse("1e300"));
    FAIL() << "no throw";
  } catch (const nlohmann::json::exception& e) {
    EXPECT_NE(std::string(e.what()).find("1e+300 is out of range"), std::string::npos) << e.what();
  }
}

TEST(JsonNumber, ArraysAndOptionalFields) {
  EXPECT_EQ(json_numbers<std::int32_t>(json::parse("[1, -2, 3]")),
            (std::vector<std::int32_t>{1, -2, 3}));
  EXPECT_THROW(json_numbers<std::int32_t>(json::parse("[1, -13333333333333333397]")),
               JsonNumberError);
  EXPECT_THROW(json_numbers<float>(json::parse("{\"a\": 1}")), JsonNumberError);
  const json j = json::parse(R"({"rows": 12})");
  EXPECT_EQ(json_number_or(j, "rows", std::size_t{0}), 12U);
  EXPECT_EQ(json_number_or(j, "absent", std::size_t{4}), 4U);
}

}  // namespace
}  // namespace corun::json_number_test
