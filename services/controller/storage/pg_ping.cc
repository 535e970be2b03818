#include <libpq-fe.h>
#include <poll.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "services/controller/storage/migrations.h"
#include "services/controller/storage/pg_pool.h"

namespace faultline::controller::pg {

absl::Status PingWithDeadline(const std::string& url, std::chrono::milliseconds timeout) {
  // libpq's asynchronous API with poll(2), so that every wait has the deadline (libpqxx
  // 6.4 blocks without one). Name resolution inside PQconnectStart is not bounded: use an
  // address or a host the resolver answers for at once.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_ptr<PGconn, decltype(&PQfinish)> conn(PQconnectStart(url.c_str()), &PQfinish);
  auto unavailable = [&](const std::string& what) {
    std::string detail = conn ? PQerrorMessage(conn.get()) : "";
    while (!detail.empty() && (detail.back() == '\n' || detail.back() == ' ')) detail.pop_back();
    return absl::UnavailableError(
        absl::StrCat("database unavailable: ", what, detail.empty() ? "" : ": ", detail));
  };
  auto wait = [&](bool for_write) -> absl::Status {
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        return absl::UnavailableError(
            absl::StrCat("database unavailable: no answer within ", timeout.count(), " ms"));
      }
      pollfd p{PQsocket(conn.get()), static_cast<short>(for_write ? POLLOUT : POLLIN), 0};
      if (p.fd < 0) return unavailable("no socket");
      int r = poll(&p, 1, static_cast<int>(left.count()) + 1);
      if (r > 0) return absl::OkStatus();
      if (r < 0 && errno != EINTR) return unavailable("poll failed");
    }
  };
  if (!conn || PQstatus(conn.get()) == CONNECTION_BAD) return unavailable("cannot connect");
  for (PostgresPollingStatusType st = PGRES_POLLING_WRITING; st != PGRES_POLLING_OK;) {
    if (st == PGRES_POLLING_FAILED) return unavailable("cannot connect");
    if (absl::Status s = wait(st == PGRES_POLLING_WRITING); !s.ok()) return s;
    st = PQconnectPoll(conn.get());
  }
  if (PQsetnonblocking(conn.get(), 1) != 0 ||
      PQsendQuery(conn.get(), "SELECT coalesce(max(version), 0) FROM schema_migrations") != 1) {
    return unavailable("cannot send");
  }
  for (int f; (f = PQflush(conn.get())) != 0;) {
    if (f < 0) return unavailable("cannot send");
    if (absl::Status s = wait(true); !s.ok()) return s;
  }
  int version = -1;
  std::string error;
  for (;;) {
    while (PQisBusy(conn.get()) != 0) {
      if (absl::Status s = wait(false); !s.ok()) return s;
      if (PQconsumeInput(conn.get()) != 1) return unavailable("connection lost");
    }
    std::unique_ptr<PGresult, decltype(&PQclear)> r(PQgetResult(conn.get()), &PQclear);
    if (!r) break;
    if (PQresultStatus(r.get()) == PGRES_TUPLES_OK && PQntuples(r.get()) == 1) {
      version = std::atoi(PQgetvalue(r.get(), 0, 0));
    } else {
      error = PQresultErrorMessage(r.get());
      while (!error.empty() && error.back() == '\n') error.pop_back();
    }
  }
  if (!error.empty()) return absl::UnavailableError(absl::StrCat("database error: ", error));
  if (version < Migrations().back().version) {
    return absl::UnavailableError(absl::StrCat("schema at version ", version));
  }
  return absl::OkStatus();
}

}  // namespace faultline::controller::pg
