// GET /v1/plan records the catalog overlay the service was opened with (export/catalog_record.h),
// so that `corun export` of a served plan reads it against the same catalog without a second
// --catalog flag.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "corun/catalog/catalog.h"
#include "corun/export/catalog_record.h"
#include "corun/runtime/twin_source.h"
#include "corun/serve/service.h"
#include "serve_test_util.h"

namespace corun::serve::plan_catalog_test {
namespace {

using nlohmann::json;
using testing::kCam0;
using testing::TempDir;

constexpr const char* kToken = "catalog-token-0123456789abcdef";

json served_plan(const Catalog& catalog, const TempDir& dir) {
  ServiceOptions o;
  o.state_dir = dir.path();
  o.token = kToken;
  o.solver = "greedy";
  o.min_replan_interval_ms = 0;
  auto s = Service::open(Context{}, o, catalog, std::make_unique<TwinSource>());
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
  if (!s.ok()) return nullptr;
  EXPECT_EQ(testing::call_service(**s, kToken, "POST", "/v1/models", kCam0).status, 201);
  EXPECT_TRUE(testing::settle(**s, kToken));
  return json::parse(testing::call_service(**s, kToken, "GET", "/v1/plan").body);
}

TEST(PlanCatalog, TheBuiltInCatalogIsRecordedAsNoOverlay) {
  TempDir dir;
  const json plan = served_plan(Catalog::default_catalog(), dir);
  ASSERT_TRUE(plan.contains("catalog")) << plan.dump();
  EXPECT_EQ(plan["catalog"], json({{"overlay", nullptr}}));
  auto read = exporting::read_catalog_record(plan.dump(), "plan.json");
  ASSERT_TRUE(read.ok()) << read.error().what();
  EXPECT_FALSE(read->has_value());
}

TEST(PlanCatalog, AnOverlayIsRecordedWithItsPathAndHashAndReadsBack) {
  auto catalog =
      Catalog::load_overlay(std::filesystem::path(CORUN_SOURCE_DIR) / "examples/catalog-overlay");
  ASSERT_TRUE(catalog.ok()) << catalog.error().what();
  ASSERT_TRUE(catalog->overlay().has_value());
  TempDir dir;
  const json plan = served_plan(*catalog, dir);
  ASSERT_TRUE(plan.contains("catalog")) << plan.dump();
  EXPECT_EQ(plan["catalog"]["overlay"], catalog->overlay()->dir);
  EXPECT_EQ(plan["catalog"]["hash"], catalog->overlay()->hash);
  // What `corun export` reads from the served plan: the same overlay.
  auto read = exporting::read_catalog_record(plan.dump(), "plan.json");
  ASSERT_TRUE(read.ok()) << read.error().what();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ((*read)->dir, catalog->overlay()->dir);
  EXPECT_EQ((*read)->hash, catalog->overlay()->hash);
}

}  // namespace
}  // namespace corun::serve::plan_catalog_test
