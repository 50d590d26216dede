#include "util/files.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace cuda_agent {
namespace {

TEST(FileLock, ASecondHolderWaitsUntilTheFirstReleases) {
  TempDir dir;
  const fs::path path = dir.path() / "locks" / "gpu0.lock";
  FileLock first;
  ASSERT_TRUE(FileLock::Acquire(path, &first).ok());
  ASSERT_TRUE(first.held());
  std::atomic<bool> second_held{false};
  std::atomic<int> waits{0};
  std::thread other([&] {
    FileLock second;
    Status s = FileLock::Acquire(path, &second, [&](double) {
      ++waits;
      return true;
    });
    second_held = s.ok() && second.held();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_FALSE(second_held.load());
  first.release();
  other.join();
  EXPECT_TRUE(second_held.load());
  EXPECT_GE(waits.load(), 1);
}

TEST(FileLock, AWaitThatIsCalledOffGivesUpWithoutTheLock) {
  TempDir dir;
  const fs::path path = dir.path() / "gpu0.lock";
  FileLock first;
  ASSERT_TRUE(FileLock::Acquire(path, &first).ok());
  FileLock second;
  Status s = FileLock::Acquire(path, &second, [](double waited_s) { return waited_s < 0.6; });
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(second.held());
}

}  // namespace
}  // namespace cuda_agent
