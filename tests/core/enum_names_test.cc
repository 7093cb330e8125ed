// One table per enum: its name, its parse and its list of names agree by construction.
#include "corun/core/enum_names.h"

#include <gtest/gtest.h>

namespace corun::enum_names_test {
namespace {

enum class Colour { kRed, kGreen, kBlue };

constexpr EnumNames<Colour, 3> kColours{
    {{{Colour::kRed, "red"}, {Colour::kGreen, "green"}, {Colour::kBlue, "blue"}}}};

TEST(EnumNames, NameParseAndListReadOneTable) {
  static_assert(kColours.name(Colour::kGreen) == "green");  // usable at compile time
  static_assert(kColours.parse("blue") == Colour::kBlue);
  EXPECT_EQ(kColours.name(static_cast<Colour>(7)), "unknown");
  EXPECT_EQ(kColours.parse("Red"), std::nullopt);  // exact: names are case-sensitive
  EXPECT_EQ(kColours.names(), (std::vector<std::string>{"red", "green", "blue"}));
  for (const Colour c : kColours.values()) EXPECT_EQ(kColours.parse(kColours.name(c)), c);
}

}  // namespace
}  // namespace corun::enum_names_test
