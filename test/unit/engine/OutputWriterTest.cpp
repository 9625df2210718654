//===- OutputWriterTest.cpp - The output writer thread --------------------===//
#include "trellis/Runtime/OutputWriter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

using namespace trellis;

TEST(OutputWriter, RunsJobsInOrderOffTheCallersThread) {
  OutputWriter writer;
  std::vector<int> order;
  std::thread::id caller = std::this_thread::get_id(), worker;
  for (int i = 0; i < 5; ++i)
    writer.submit(std::to_string(i) + ".npy", [&, i] {
      worker = std::this_thread::get_id();
      order.push_back(i);
      return Status::ok();
    });
  ASSERT_TRUE(bool(writer.drain()));
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_NE(worker, caller);
}

TEST(OutputWriter, ErrorsBelongToTheirTicketAndNameTheFile) {
  OutputWriter writer;
  std::atomic<bool> release{false};
  // Generation 1: one good file, one that fails.
  writer.submit("/out/1/a.npy", [] { return Status::ok(); });
  writer.submit("/out/1/b.npy", [] { return Status(Error{"disk full"}); });
  uint64_t first = writer.mark();
  // Generation 2 is still being written (blocked) when 1 is collected.
  writer.submit("/out/2/a.npy", [&] {
    while (!release)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return Status::ok();
  });
  uint64_t second = writer.mark();
  Status s = writer.wait(first);
  ASSERT_FALSE(bool(s));
  EXPECT_NE(s.message().find("/out/1/b.npy"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("disk full"), std::string::npos) << s.message();
  release = true;
  // Reported once: generation 2's wait sees only its own (good) file.
  EXPECT_TRUE(bool(writer.wait(second)));
}

TEST(OutputWriter, DestructorFinishesQueuedJobs) {
  std::atomic<int> done{0};
  {
    OutputWriter writer;
    for (int i = 0; i < 20; ++i)
      writer.submit("f", [&] {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        ++done;
        return Status::ok();
      });
  }
  EXPECT_EQ(done.load(), 20);
}

TEST(OutputWriter, AnExceptionInAJobIsAnError) {
  OutputWriter writer;
  writer.submit("x.npy", []() -> Status { throw std::runtime_error("boom"); });
  Status s = writer.drain();
  ASSERT_FALSE(bool(s));
  EXPECT_NE(s.message().find("boom"), std::string::npos);
  EXPECT_NE(s.message().find("x.npy"), std::string::npos);
}
