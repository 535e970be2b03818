// The tracer's pure parts: tracefs format files and perf ring-buffer records, built by hand
// in the layout this kernel's tracepoints have (the integration test reads real ones).
#include "agent/sys/lock_wait_tracer.h"

#include <gtest/gtest.h>
#include <linux/perf_event.h>

#include <cstring>

namespace faultline::sys {
namespace {

constexpr char kStartFormat[] = R"(name: mmap_lock_start_locking
ID: 677
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:struct mm_struct * mm;	offset:8;	size:8;	signed:0;
	field:u64 memcg_id;	offset:16;	size:8;	signed:0;
	field:bool write;	offset:24;	size:1;	signed:0;
)";
constexpr char kAcquiredFormat[] = R"(name: mmap_lock_acquire_returned
ID: 675
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;

	field:struct mm_struct * mm;	offset:8;	size:8;	signed:0;
	field:u64 memcg_id;	offset:16;	size:8;	signed:0;
	field:bool write;	offset:24;	size:1;	signed:0;
	field:bool success;	offset:25;	size:1;	signed:0;
)";
constexpr char kBeginFormat[] = R"(name: contention_begin
ID: 408
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;

	field:void * lock_addr;	offset:8;	size:8;	signed:0;
	field:unsigned int flags;	offset:16;	size:4;	signed:0;
)";
constexpr char kEndFormat[] = R"(name: contention_end
ID: 407
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;

	field:void * lock_addr;	offset:8;	size:8;	signed:0;
	field:int ret;	offset:16;	size:4;	signed:1;
)";

LockTracepoints Parsed() {
  std::string error;
  LockTracepoints t;
  t.start = *ParseLockTracepointFormat(std::string("\n") + kStartFormat, false, &error);
  t.acquired = *ParseLockTracepointFormat(std::string("\n") + kAcquiredFormat, true, &error);
  t.contention_begin = *ParseContentionFormat(std::string("\n") + kBeginFormat, true, &error);
  t.contention_end = *ParseContentionFormat(std::string("\n") + kEndFormat, false, &error);
  return t;
}

// One PERF_RECORD_SAMPLE (TID | TIME | RAW) with a raw record of 28 bytes.
std::string Sample(uint16_t type, uint32_t tid, uint64_t time, uint64_t word8, uint32_t word16,
                   uint8_t byte24 = 0, uint8_t byte25 = 0) {
  char raw[28] = {};
  std::memcpy(raw, &type, 2);
  std::memcpy(raw + 8, &word8, 8);
  std::memcpy(raw + 16, &word16, 4);
  raw[24] = static_cast<char>(byte24);
  raw[25] = static_cast<char>(byte25);
  const uint32_t raw_size = sizeof(raw);
  perf_event_header h{PERF_RECORD_SAMPLE, 0,
                      static_cast<uint16_t>(sizeof(perf_event_header) + 20 + raw_size)};
  std::string out(reinterpret_cast<const char*>(&h), sizeof(h));
  const uint32_t pid = 100;
  out.append(reinterpret_cast<const char*>(&pid), 4);
  out.append(reinterpret_cast<const char*>(&tid), 4);
  out.append(reinterpret_cast<const char*>(&time), 8);
  out.append(reinterpret_cast<const char*>(&raw_size), 4);
  out.append(raw, raw_size);
  return out;
}

TEST(LockWaitTracer, FormatFilesGiveTheFieldsWhereverTheKernelPutThem) {
  const LockTracepoints t = Parsed();
  EXPECT_EQ(t.start.id, 677u);
  EXPECT_EQ(t.start.write_offset, 24);
  EXPECT_EQ(t.start.mm_offset, 8);
  EXPECT_EQ(t.acquired.success_offset, 25);
  EXPECT_EQ(t.contention_begin.id, 408u);
  EXPECT_EQ(t.contention_begin.lock_addr_offset, 8);
  EXPECT_EQ(t.contention_begin.flags_offset, 16);
  EXPECT_EQ(t.contention_end.flags_offset, -1);
  EXPECT_TRUE(t.contention());

  std::string error;
  EXPECT_FALSE(ParseLockTracepointFormat(std::string("\n") + kBeginFormat, false, &error));
  EXPECT_EQ(error, "the tracepoint has no 1-byte field 'write'");
  EXPECT_FALSE(ParseContentionFormat(std::string("\n") + kEndFormat, true, &error));
  EXPECT_EQ(error, "the tracepoint has no 4-byte field 'flags'");
  EXPECT_FALSE(ParseContentionFormat("name: x\n", true, &error));
  EXPECT_EQ(error, "no ID line in the tracepoint's format");
}

TEST(LockWaitTracer, RecordsDecodeIntoWaitsAndContention) {
  const LockTracepoints t = Parsed();
  const uint64_t mm = 0xffff888000100000, lock = mm + 184;
  std::string records;
  records += Sample(677, 7, 1'000, mm, 0, /*write=*/1);
  records += Sample(408, 7, 2'000, lock, 4);  // WRITE
  records += Sample(407, 7, 52'000, lock, 0);
  records += Sample(675, 7, 53'000, mm, 0, /*write=*/1, /*success=*/1);
  records += Sample(999, 7, 54'000, 0, 0);  // another event: ignored
  perf_event_header lost{PERF_RECORD_LOST, 0, sizeof(perf_event_header) + 16};
  records.append(reinterpret_cast<const char*>(&lost), sizeof(lost));
  const uint64_t lost_id = 1, lost_n = 3;
  records.append(reinterpret_cast<const char*>(&lost_id), 8);
  records.append(reinterpret_cast<const char*>(&lost_n), 8);
  records += std::string(5, '\0');  // a torn tail: not a record

  LockWaitAggregator a;
  a.TraceContention();
  DecodeLockRecords(records, t, a);
  EXPECT_EQ(a.write().acquisitions, 1u);
  EXPECT_EQ(a.write().wait_ns, 52'000u);
  EXPECT_EQ(a.write().contention.contended, 1u);
  EXPECT_EQ(a.write().contention.wait_ns, 50'000u);
  EXPECT_EQ(a.lost(), 3u);

  // Without contention tracepoints their records are not decoded as anything.
  LockTracepoints plain = t;
  plain.contention_begin = plain.contention_end = {};
  LockWaitAggregator b;
  DecodeLockRecords(records, plain, b);
  EXPECT_EQ(b.write().contention.contended, 0u);
  EXPECT_EQ(b.write().acquisitions, 1u);
}

}  // namespace
}  // namespace faultline::sys
