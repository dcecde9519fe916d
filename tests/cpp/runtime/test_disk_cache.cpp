#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "runtime/disk_cache.h"

namespace torch_tpu {
namespace {

namespace fs = std::filesystem;
using runtime::DiskCache;
using runtime::DiskCacheConfig;
using runtime::DiskOutcome;

// A fresh directory per test.
class DiskCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("torch_tpu_disk_cache_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  DiskCacheConfig config(int64_t max_bytes = 1 << 20) const {
    return DiskCacheConfig{true, dir_.string(), max_bytes};
  }

  // Looks `fp` up, "compiling" it to `value` on a miss; returns what the cache gave.
  // `outcome` is what the tier told the last compile.
  std::string get(DiskCache& cache, const std::string& fp, const std::string& value,
                  int* compiles) {
    auto result = cache.get<std::string>(
        fp, [](const std::string& bytes) { return std::make_unique<std::string>(bytes); },
        [&](std::string* bytes, DiskOutcome why) {
          ++*compiles;
          outcome = why;
          *bytes = value;
          return std::make_unique<std::string>(value);
        });
    return *result;
  }

  std::vector<fs::path> entries() const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().extension() == ".xla") out.push_back(e.path());
    return out;
  }

  fs::path dir_;
  DiskOutcome outcome = DiskOutcome::hit;
};

TEST_F(DiskCacheTest, MissThenHitAcrossInstances) {
  int compiles = 0;
  {
    DiskCache cache(config(), "id");
    EXPECT_EQ(get(cache, "fp1", "payload-1", &compiles), "payload-1");
    EXPECT_EQ(outcome, DiskOutcome::miss);
    EXPECT_EQ(cache.stats().misses, 1);
    EXPECT_EQ(cache.stats().writes, 1);
  }
  DiskCache again(config(), "id");  // as a new process would
  EXPECT_EQ(get(again, "fp1", "other", &compiles), "payload-1");
  EXPECT_EQ(compiles, 1);
  EXPECT_EQ(again.stats().hits, 1);
  EXPECT_GT(again.bytes_on_disk(), 0);
}

TEST_F(DiskCacheTest, IdentityChangeNeverReadsOldEntries) {
  int compiles = 0;
  DiskCache a(config(), "plugin-a");
  get(a, "fp", "from-a", &compiles);
  DiskCache b(config(), "plugin-b");
  EXPECT_EQ(get(b, "fp", "from-b", &compiles), "from-b");
  EXPECT_EQ(compiles, 2);
}

TEST_F(DiskCacheTest, CorruptAndTruncatedEntriesAreRebuilt) {
  int compiles = 0;
  DiskCache cache(config(), "id");
  get(cache, "fp", std::string(1000, 'x'), &compiles);
  fs::path entry = entries().at(0);

  {  // flip a payload byte
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-10, std::ios::end);
    f.put('y');
  }
  EXPECT_EQ(get(cache, "fp", std::string(1000, 'x'), &compiles), std::string(1000, 'x'));
  EXPECT_EQ(compiles, 2);
  EXPECT_EQ(outcome, DiskOutcome::bad_entry);
  EXPECT_EQ(cache.stats().bad_entries, 1);

  fs::resize_file(entries().at(0), 40);  // truncate
  get(cache, "fp", std::string(1000, 'x'), &compiles);
  EXPECT_EQ(compiles, 3);
  EXPECT_EQ(outcome, DiskOutcome::bad_entry);
  EXPECT_EQ(cache.stats().bad_entries, 2);

  // and the rewritten entry is good again
  get(cache, "fp", "unused", &compiles);
  EXPECT_EQ(compiles, 3);
}

TEST_F(DiskCacheTest, EntryThePluginRejectsIsRebuilt) {
  int compiles = 0;
  DiskCache cache(config(), "id");
  get(cache, "fp", "good", &compiles);
  int loads = 0;
  auto result = cache.get<std::string>(
      "fp",
      [&](const std::string&) -> std::unique_ptr<std::string> {
        ++loads;
        throw std::runtime_error("incompatible executable");
      },
      [&](std::string* bytes, DiskOutcome why) {
        ++compiles;
        EXPECT_EQ(why, DiskOutcome::bad_entry);
        *bytes = "rebuilt";
        return std::make_unique<std::string>("rebuilt");
      });
  EXPECT_EQ(*result, "rebuilt");
  EXPECT_EQ(loads, 1);
  EXPECT_EQ(compiles, 2);
  EXPECT_EQ(cache.stats().bad_entries, 1);
}

TEST_F(DiskCacheTest, EvictionKeepsTheDirectoryUnderTheCap) {
  int compiles = 0;
  DiskCache cache(config(/*max_bytes=*/5000), "id");
  for (int i = 0; i < 10; ++i)
    get(cache, "fp" + std::to_string(i), std::string(1000, 'a'), &compiles);
  EXPECT_LE(cache.bytes_on_disk(), 5000);
  EXPECT_GT(cache.stats().evictions, 0);
  // the newest entry survived
  get(cache, "fp9", "unused", &compiles);
  EXPECT_EQ(compiles, 10);
}

TEST_F(DiskCacheTest, DisabledCacheAlwaysCompilesAndWritesNothing) {
  int compiles = 0;
  DiskCache cache(DiskCacheConfig{false, dir_.string(), 0}, "id");
  get(cache, "fp", "v", &compiles);
  get(cache, "fp", "v", &compiles);
  EXPECT_EQ(compiles, 2);
  EXPECT_EQ(outcome, DiskOutcome::off);
  EXPECT_FALSE(fs::exists(dir_));
}

TEST_F(DiskCacheTest, ClearRemovesEntries) {
  int compiles = 0;
  DiskCache cache(config(), "id");
  get(cache, "fp", "v", &compiles);
  cache.clear();
  EXPECT_TRUE(entries().empty());
  EXPECT_EQ(cache.bytes_on_disk(), 0);
}

TEST_F(DiskCacheTest, ConcurrentProcessesCompileOnce) {
  fs::create_directories(dir_);
  const fs::path log = dir_ / "compiles.log";
  std::vector<pid_t> children;
  for (int p = 0; p < 4; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      DiskCache cache(config(), "id");
      auto result = cache.get<std::string>(
          "shared", [](const std::string& b) { return std::make_unique<std::string>(b); },
          [&](std::string* bytes, DiskOutcome) {
            std::ofstream(log, std::ios::app) << "compile\n";
            ::usleep(200000);  // a slow compile: the others must wait, not compile too
            *bytes = "exe";
            return std::make_unique<std::string>("exe");
          });
      ::_exit(*result == "exe" ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::ifstream in(log);
  std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(contents, "compile\n");
  EXPECT_EQ(entries().size(), 1u);
}

}  // namespace
}  // namespace torch_tpu
