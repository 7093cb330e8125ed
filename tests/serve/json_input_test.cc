// Strict JSON input of the API and its YAML hand-over to the spec parser. Golden values are
// facts of the standards: RFC 8259 §6 (integers exact within ±(2^53 - 1)), IEEE-754 binary64
// (largest finite 1.7976931348623157e308; anything from 1.7976931348623158e308 up rounds to
// infinity), RFC 8259 §4 (duplicate names), YAML 1.2 §5.1 (printable characters).
#include "corun/serve/json_input.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>
#include <variant>

namespace corun::serve::json_input_test {
namespace {

using nlohmann::json;

JsonInputError refusal(const std::string& text, const JsonLimits& limits = {}) {
  auto r = parse_json_input(text, limits);
  if (std::holds_alternative<json>(r)) return {"", "accepted", ""};
  return std::get<JsonInputError>(r);
}

bool accepted(const std::string& text, const JsonLimits& limits = {}) {
  return std::holds_alternative<json>(parse_json_input(text, limits));
}

TEST(JsonInput, IntegersAreExactOnlyWithinTwoToThe53) {
  EXPECT_TRUE(accepted(R"({"n":9007199254740991})"));   // 2^53 - 1
  EXPECT_TRUE(accepted(R"({"n":-9007199254740991})"));  // -(2^53 - 1)
  for (const char* n : {"9007199254740992", "-9007199254740992", "18446744073709551615",
                        "18446744073709551616", "-99999999999999999999"}) {
    SCOPED_TRACE(n);
    const auto e = refusal(std::string(R"({"n":)") + n + "}");
    EXPECT_EQ(e.code, "bad_number");
    EXPECT_EQ(e.field, "n");
  }
  // Fractions and exponents are doubles by nature, kept as such.
  EXPECT_TRUE(accepted(R"({"n":1e20})"));
  EXPECT_TRUE(accepted(R"({"n":9007199254740993.0})"));
}

TEST(JsonInput, NumbersMustBeFiniteDoubles) {
  EXPECT_TRUE(accepted("[1.7976931348623157e308]"));
  EXPECT_TRUE(accepted("[-1.7976931348623157e308]"));
  EXPECT_TRUE(accepted("[4.9e-324]"));  // the smallest subnormal
  for (const char* n : {"1.7976931348623159e308", "1e309", "-1e999", "1E+400"}) {
    SCOPED_TRACE(n);
    const auto e = refusal(std::string("[0,") + n + "]");
    EXPECT_EQ(e.code, "bad_number");
    EXPECT_EQ(e.field, "[1]");
  }
  for (const char* n : {"NaN", "Infinity", "-Infinity", "nan", "inf"}) {
    SCOPED_TRACE(n);
    const auto e = refusal(std::string(R"({"a":{"b":)") + n + "}}");
    EXPECT_EQ(e.code, "bad_json");
    EXPECT_EQ(e.field, "a.b");
  }
}

TEST(JsonInput, DuplicateKeysAreRefusedWithTheirPath) {
  const auto e = refusal(R"({"a":[1,{"b":[true,{"c":1,"d":null,"c":2}]}]})");
  EXPECT_EQ(e.code, "duplicate_key");
  EXPECT_EQ(e.field, "a[1].b[1].c");
  EXPECT_NE(e.message.find("'c'"), std::string::npos) << e.message;
  // The same key in sibling objects, or in an object and its child, is not a duplicate.
  EXPECT_TRUE(accepted(R"([{"a":1},{"a":2}])"));
  EXPECT_TRUE(accepted(R"({"a":{"a":{"a":1}}})"));
}

TEST(JsonInput, TextMustBeUnicodeInUtf8) {
  for (const std::string& bad :
       {std::string("{\"k\":\"\xff\"}"), std::string("{\"k\":\"\xc0\xaf\"}"),  // overlong '/'
        std::string("{\"k\":\"\xed\xa0\x80\"}"),                               // encoded surrogate
        std::string(R"({"k":"\udc00"})"), std::string("{\"k\":\"\xe2\x82\"}")}) {
    SCOPED_TRACE(bad);
    const auto e = refusal(bad);
    EXPECT_EQ(e.code, "bad_json");
    EXPECT_EQ(e.field, "k");
  }
  // A surrogate pair is one character: U+1F600.
  const auto ok = parse_json_input(R"(["\ud83d\ude00"])");
  ASSERT_TRUE(std::holds_alternative<json>(ok));
  EXPECT_EQ(std::get<json>(ok)[0].get<std::string>(), "\xf0\x9f\x98\x80");
}

TEST(JsonInput, DepthAndKeyLengthHaveLimits) {
  JsonLimits limits;
  limits.max_depth = 4;
  EXPECT_TRUE(accepted("[[[[1]]]]", limits));
  EXPECT_EQ(refusal("[[[[[1]]]]]", limits).code, "bad_json");
  limits.max_key_bytes = 8;
  EXPECT_TRUE(accepted(R"({"12345678":1})", limits));
  const auto e = refusal(R"({"123456789":1})", limits);
  EXPECT_EQ(e.code, "bad_json");
  EXPECT_NE(e.message.find("9 bytes"), std::string::npos) << e.message;
  // Deep input is refused without recursion (the default depth is 16).
  EXPECT_EQ(refusal(std::string(100000, '[')).code, "bad_json");
}

TEST(JsonInput, YamlNodeKeepsEveryStringAndEveryType) {
  const std::vector<std::string> strings = {
      "30",
      "true",
      "null",
      "~",
      "",
      "a: b",
      "- x",
      "#c",
      "*alias",
      "&anchor",
      "!!int 5",
      "\"q\"",
      "b\\s",
      "'s'",
      "line\nbreak\r\n",
      "tab\there",
      std::string("nul\0x", 5),
      "\x01\x1f\x7f",
      "\xc2\x80\xc2\x85\xc2\x9f",  // C1 controls U+0080, U+0085 (NEL), U+009F
      "\xe2\x80\xa8\xe2\x80\xa9",  // U+2028, U+2029 (YAML 1.1 line breaks)
      "\xef\xbb\xbf"
      "bom",                       // U+FEFF
      "\xef\xbf\xbe\xef\xbf\xbf",  // U+FFFE, U+FFFF (not YAML-printable)
      "\xf0\x9f\x98\x80 caf\xc3\xa9"};
  json doc = json::object();
  json list = json::array();
  for (std::size_t i = 0; i < strings.size(); ++i) {
    doc[strings[i]] = strings[i];  // as a key and as a value
    list.push_back(strings[i]);
  }
  doc["__list"] = list;
  doc["__int"] = -42;
  doc["__uint"] = 9007199254740991ULL;
  doc["__float"] = 0.1;
  doc["__bool"] = false;
  doc["__null"] = nullptr;
  const YAML::Node n = to_yaml_node(doc);
  ASSERT_TRUE(n.IsMap());
  for (std::size_t i = 0; i < strings.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(n[strings[i]]) << "key lost";
    EXPECT_EQ(n[strings[i]].Scalar(), strings[i]);
    // Tagged !!str: a string under YAML's core schema whatever it spells.
    EXPECT_EQ(n[strings[i]].Tag(), "tag:yaml.org,2002:str");
    EXPECT_EQ(n["__list"][i].Scalar(), strings[i]);
  }
  EXPECT_EQ(n["__int"].Tag(), "tag:yaml.org,2002:int");
  EXPECT_EQ(n["__int"].as<long long>(), -42);
  EXPECT_EQ(n["__uint"].as<unsigned long long>(), 9007199254740991ULL);
  EXPECT_EQ(n["__float"].Tag(), "tag:yaml.org,2002:float");
  EXPECT_EQ(n["__float"].as<double>(), 0.1);
  EXPECT_EQ(n["__bool"].Tag(), "tag:yaml.org,2002:bool");
  EXPECT_FALSE(n["__bool"].as<bool>());
  EXPECT_TRUE(n["__null"].IsNull());
}

}  // namespace
}  // namespace corun::serve::json_input_test
