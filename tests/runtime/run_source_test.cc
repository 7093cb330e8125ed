// Where corun run's predictions come from (runtime/run_source.h): the catalog twin when nothing
// is profiled, a given surrogate only when it fits the workload.
#include "corun/runtime/run_source.h"

#include <gtest/gtest.h>

#include <string>

#include "corun/catalog/catalog.h"
#include "corun/testbed/sim.h"

namespace corun::run_source_test {
namespace {

Workload two_cameras(const std::string& extra) {
  auto w = parse_workload(R"(device: rtx3090
models:
  - {name: cam0, model: yolo11n, knobs: {imgsz: [320, 640]}, demand: {fps: 30}}
  - {name: cam1, model: yolo11s, knobs: {imgsz: [320, 640]}, demand: {fps: 30}}
)" + extra,
                          "cams.yaml", Catalog::default_catalog());
  EXPECT_TRUE(w.ok()) << w.error().what();
  return *w;
}

TEST(RunSource, WithoutProfilingARunPlansFromTheCatalogTwin) {
  const SimTestbed sim;
  RunSourceOptions o;
  o.profile = false;
  auto made = make_run_source(Context{}, two_cameras(""), "", sim, o);
  ASSERT_TRUE(made.ok()) << made.error().what();
  EXPECT_EQ(made->kind, RunSource::Kind::kTwin);
  EXPECT_EQ(made->source->describe(), "twin (catalog simulator)");
  EXPECT_TRUE(made->refit_dataset.empty());  // nothing profiled: nothing to refit on
  // A workload that says `profiling: none` is not profiled either.
  o.profile = true;
  made = make_run_source(Context{}, two_cameras("profiling: none\n"), "", sim, o);
  ASSERT_TRUE(made.ok()) << made.error().what();
  EXPECT_EQ(made->kind, RunSource::Kind::kTwin);
}

TEST(RunSource, AGivenSurrogateThatCannotBeReadIsAnErrorNamingIt) {
  const SimTestbed sim;
  RunSourceOptions o;
  o.surrogate = "/nonexistent/surrogate.json";
  auto made = make_run_source(Context{}, two_cameras(""), "", sim, o);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.error().what().find("/nonexistent/surrogate.json"), std::string::npos)
      << made.error().what();
}

}  // namespace
}  // namespace corun::run_source_test
