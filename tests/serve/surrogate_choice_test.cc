// corun serve --surrogate: the fitted surrogate plans while the registered models are the ones
// it was fitted on; any other model set falls back to the twin (and planning never stops).
#include <gtest/gtest.h>

#include "corun/catalog/catalog.h"
#include "corun/profile/campaign.h"
#include "corun/runtime/twin_source.h"
#include "corun/serve/service.h"

namespace corun::surrogate_choice_test {
namespace {

constexpr const char* kTwo = R"(device: rtx3090
models:
  - name: chat
    model: qwen2.5-0.5b
    knobs: {request_concurrency: [1, 2, 4]}
    demand: {rps: 1.0, prompt_tokens: 256, output_tokens: 64}
    sla: {ttft_ms_p95: 1500}
  - name: cam0
    model: yolo11n
    knobs: {imgsz: [320, 640]}
    demand: {fps: 30}
    sla: {latency_ms_p95: 50}
)";

TEST(ServeSurrogate, UsedWhileTheModelsMatchTwinOtherwise) {
  auto w = parse_workload(kTwo, "<test>", Catalog::default_catalog());
  ASSERT_TRUE(w.ok()) << w.error().what();
  auto tb = make_testbed("sim");
  ASSERT_TRUE(tb.ok());
  auto table = surrogate::StandaloneTable::from_samples(
      *w, profile::measure_plan(Context{.seed = 2}, *w, **tb, profile::Plan::kStandalone, 1, 10));
  ASSERT_TRUE(table.ok());
  const auto corun =
      profile::measure_plan(Context{.seed = 2}, *w, **tb, profile::Plan::kMeanField, 40, 10);
  surrogate::FitOptions o;
  o.regressor = surrogate::RegressorKind::kLinear;
  surrogate::Provenance prov;
  prov.testbed = "sim";
  auto s = surrogate::Surrogate::fit(Context{}, *w, *table, corun, o, prov);
  ASSERT_TRUE(s.ok()) << s.error().what();

  constexpr double kTwinMargin = 0.123;
  auto source = FittedOrTwinSource::on_own_testbed(Context{.seed = 1}, *s, {3, 10},
                                                   TwinOptions{kTwinMargin, 10});
  ASSERT_TRUE(source.ok()) << source.error().what();
  ASSERT_TRUE((*source)->predictor_for(*w).ok());
  const auto fitted = (*source)->margins(*w);
  ASSERT_EQ(fitted.size(), 2u);
  EXPECT_NE(fitted[0], kTwinMargin);  // the error model's bound, not the twin's constant
  EXPECT_GT(fitted[0], 0.0);

  const Workload one = w->prefix(1);  // a model set the surrogate was not fitted on
  auto p = (*source)->predictor_for(one);
  ASSERT_TRUE(p.ok()) << p.error().what();
  EXPECT_EQ((*p)->models(), 1u);
  EXPECT_EQ((*source)->margins(one), std::vector<double>{kTwinMargin});
}

}  // namespace
}  // namespace corun::surrogate_choice_test
