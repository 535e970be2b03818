#pragma once
// One board's step and one upload through the WorkStore's only entry points
// (DecideWorkForBoards, StoreResults), for tests that ask for one at a time.
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/controller/storage/interfaces.h"

namespace faultline::controller::testing {

// Every order delivered for `boards`; the error only when none was delivered (the orders
// already taken must reach their boards).
inline absl::StatusOr<WorkStore::BoardOrders> NextWorkForBoards(
    WorkStore& store, const std::vector<std::string>& boards) {
  WorkStore::BoardOrders all;
  absl::Status status = store.DecideWorkForBoards(boards, [&](WorkStore::BoardOrders&& group) {
    for (auto& order : group) all.push_back(std::move(order));
  });
  if (!status.ok() && all.empty()) return status;
  return all;
}

// What a lone waiting board gets: a run, a switch order, or nothing (an empty order).
inline absl::StatusOr<WorkOrder> NextWork(WorkStore& store, const std::string& board) {
  auto orders = NextWorkForBoards(store, {board});
  if (!orders.ok()) return orders.status();
  if (orders->empty()) return WorkOrder{};
  return std::move(orders->front().second);
}

inline absl::StatusOr<int64_t> StoreResult(WorkStore& store, const std::string& board,
                                           int64_t run_id, const std::string& attempt_id,
                                           bool succeeded, const std::string& failure_reason,
                                           const ResultRecord& result) {
  std::vector<ResultUpload> one(1);
  one[0] = ResultUpload{.board = board,
                        .run_id = run_id,
                        .attempt_id = attempt_id,
                        .succeeded = succeeded,
                        .failure_reason = failure_reason,
                        .result = result};
  return std::move(store.StoreResults(one).front());
}

}  // namespace faultline::controller::testing
