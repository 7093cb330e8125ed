#include <gtest/gtest.h>

#include "corun/spec/knobs.h"

namespace corun::knobs_test {
namespace {

TEST(Knobs, TheIssueVocabularyIsDeclared) {
  for (const char* name : {"precision", "batch", "sm_share", "request_concurrency", "imgsz",
                           "skip_rate", "prefill_chunk"}) {
    EXPECT_TRUE(find_knob(name).has_value()) << name;
  }
  EXPECT_FALSE(find_knob("imgsize").has_value());
}

TEST(Knobs, DeclarationsAreConsistent) {
  for (const auto& d : knob_decls()) {
    SCOPED_TRACE(d.name);
    EXPECT_LE(d.min, d.default_value);
    EXPECT_LE(d.default_value, d.max);
    EXPECT_FALSE(d.families.empty());
    EXPECT_FALSE(d.help.empty());
    EXPECT_EQ(&knob_decl(d.id), &d);
  }
  // MPS active-thread percentage is 1..100 by definition.
  EXPECT_EQ(knob_decl(KnobId::kSmShare).min, 1);
  EXPECT_EQ(knob_decl(KnobId::kSmShare).max, 100);
}

TEST(Knobs, SettingsRoundTripEveryKnob) {
  Settings s;
  s.set(KnobId::kPrecision, static_cast<double>(static_cast<int>(Precision::kAwq)));
  s.set(KnobId::kImgsz, 480);
  s.set(KnobId::kSkipRate, 0.33);
  s.set(KnobId::kSmShare, 40);
  EXPECT_EQ(s.precision, Precision::kAwq);
  EXPECT_EQ(s.imgsz, 480);
  EXPECT_DOUBLE_EQ(s.get(KnobId::kSkipRate), 0.33);
  EXPECT_EQ(format_knob_value(KnobId::kPrecision, s.get(KnobId::kPrecision)), "awq");
  EXPECT_EQ(format_knob_value(KnobId::kSkipRate, 0.33), "0.33");
}

}  // namespace
}  // namespace corun::knobs_test
