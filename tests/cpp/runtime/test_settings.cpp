#include <gtest/gtest.h>

#include <stdlib.h>

#include <set>
#include <string>
#include <vector>

#include "runtime/settings.h"

namespace torch_tpu {
namespace {

namespace settings = runtime::settings;
using settings::SettingError;
using settings::Value;

// The message of the SettingError that parsing `raw` as `name` throws ("" if none).
std::string error_of(const std::string& name, const char* raw) {
  try {
    settings::parse(settings::find(name), raw);
  } catch (const SettingError& e) {
    return e.what();
  }
  return "";
}

TEST(Settings, TableNamesEachVariableOnceWithADoc) {
  std::set<std::string> names;
  for (const auto& s : settings::table()) {
    EXPECT_EQ(std::string(s.name).rfind("TORCH_TPU_", 0), 0u) << s.name;
    EXPECT_TRUE(names.insert(s.name).second) << s.name << " twice";
    EXPECT_GT(std::string(s.doc).size(), 10u) << s.name;
    // Every default parses (an unset variable reads as its default).
    EXPECT_NO_THROW(settings::parse(s, nullptr)) << s.name;
  }
  EXPECT_THROW(settings::find("TORCH_TPU_NO_SUCH_THING"), SettingError);
}

TEST(Settings, FlagsAcceptTheUsualSpellings) {
  const auto& s = settings::find("TORCH_TPU_DONATE");
  for (const char* on : {"1", "true", "TRUE", " yes ", "on"})
    EXPECT_EQ(settings::parse(s, on), Value(true)) << on;
  for (const char* off : {"0", "false", "No", "off"})
    EXPECT_EQ(settings::parse(s, off), Value(false)) << off;
  EXPECT_EQ(settings::parse(s, nullptr), Value(true));  // its default
  EXPECT_EQ(settings::parse(s, ""), Value(true));       // empty is unset
  const std::string error = error_of("TORCH_TPU_DONATE", "maybe");
  EXPECT_NE(error.find("TORCH_TPU_DONATE='maybe'"), std::string::npos) << error;
  EXPECT_NE(error.find("true"), std::string::npos) << error;
}

TEST(Settings, IntegersCheckTheirRangeAndNames) {
  const auto& entries = settings::find("TORCH_TPU_CACHE_ENTRIES");
  EXPECT_EQ(settings::parse(entries, nullptr), Value(int64_t{4096}));
  EXPECT_EQ(settings::parse(entries, "12"), Value(int64_t{12}));
  for (const char* bad : {"0", "-3", "12abc", "abc", "99999999999999999999"})
    EXPECT_NE(error_of("TORCH_TPU_CACHE_ENTRIES", bad).find("an integer >= 1"), std::string::npos)
        << bad;
  const auto& buckets = settings::find("TORCH_TPU_SHAPE_BUCKETS");
  EXPECT_EQ(settings::parse(buckets, nullptr), Value(int64_t{-1}));  // the default rule
  EXPECT_EQ(settings::parse(buckets, "OFF"), Value(int64_t{0}));
  EXPECT_EQ(settings::parse(buckets, "0"), Value(int64_t{0}));
  EXPECT_EQ(settings::parse(buckets, "64"), Value(int64_t{64}));
  EXPECT_NE(error_of("TORCH_TPU_SHAPE_BUCKETS", "tiny").find("or off"), std::string::npos);
  // No default: unset reads as none, and the caller decides.
  EXPECT_EQ(settings::parse(settings::find("TORCH_TPU_MAX_MAPPINGS"), nullptr), Value());
}

TEST(Settings, ChoicesAndWordLists) {
  const auto& transport = settings::find("TORCH_TPU_DIST_TRANSPORT");
  EXPECT_EQ(settings::parse(transport, nullptr), Value(std::string("auto")));
  EXPECT_EQ(settings::parse(transport, " Host "), Value(std::string("host")));
  const std::string error = error_of("TORCH_TPU_DIST_TRANSPORT", "gloo");
  EXPECT_NE(error.find("one of auto, host, in_program"), std::string::npos) << error;
  const auto& log = settings::find("TORCH_TPU_LOG");
  EXPECT_EQ(settings::parse(log, nullptr), Value(std::vector<std::string>{}));
  EXPECT_EQ(settings::parse(log, "compiles,"), Value(std::vector<std::string>{"compiles"}));
  EXPECT_NE(error_of("TORCH_TPU_LOG", "compiles,everything").find("TORCH_TPU_LOG"),
            std::string::npos);
  // Text is kept as written.
  EXPECT_EQ(settings::parse(settings::find("TORCH_TPU_DUMP_DIR"), "/tmp/A b"),
            Value(std::string("/tmp/A b")));
}

TEST(Settings, TypedHelpersReadTheEnvironment) {
  ::setenv("TORCH_TPU_FUSED_MAX_OPS", "17", 1);
  ::setenv("TORCH_TPU_LOG", "compiles", 1);
  EXPECT_EQ(settings::integer("TORCH_TPU_FUSED_MAX_OPS"), 17);
  EXPECT_TRUE(settings::lists("TORCH_TPU_LOG", "compiles"));
  EXPECT_NO_THROW(settings::check_all());
  ::setenv("TORCH_TPU_FUSED_MAX_OPS", "lots", 1);
  try {
    settings::check_all();
    ADD_FAILURE() << "check_all accepted TORCH_TPU_FUSED_MAX_OPS=lots";
  } catch (const SettingError& e) {
    EXPECT_NE(std::string(e.what()).find("TORCH_TPU_FUSED_MAX_OPS"), std::string::npos);
  }
  ::unsetenv("TORCH_TPU_FUSED_MAX_OPS");
  ::unsetenv("TORCH_TPU_LOG");
  EXPECT_EQ(settings::integer("TORCH_TPU_FUSED_MAX_OPS"), 4096);
  EXPECT_FALSE(settings::lists("TORCH_TPU_LOG", "compiles"));
}

}  // namespace
}  // namespace torch_tpu
