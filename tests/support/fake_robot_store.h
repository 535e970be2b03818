#pragma once
// The series robot's store in memory (storage/interfaces.h: RobotStore), for unit tests of
// the robot without PostgreSQL. It keeps the PostgreSQL store's rules where a caller can
// tell (tests/integration/store_contract_test.cc runs the same tests on both): a read's
// mails and its cursor kept together, a mail kept once per Message-ID, skipped mails apart,
// series listed oldest first, one reply per (series, kind) and per Message-ID, moves only
// from the state a caller names, one check per (patch, kind) of a stored series, a verdict
// superseding the queued pending one, and only a queued check settled.
#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "services/controller/core/clock.h"
#include "services/controller/storage/interfaces.h"

namespace faultline::controller::fakes {

class FakeRobotStore final : public RobotStore {
 public:
  explicit FakeRobotStore(const Clock* clock) : clock_(clock) {}

  absl::StatusOr<std::map<int, std::string>> Cursor(const std::string& archive) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cursors_.find(archive);
    return it == cursors_.end() ? std::map<int, std::string>{} : it->second;
  }
  absl::Status KeepMails(const std::string& archive, const std::vector<KeptMail>& mails,
                         const std::map<int, std::string>& cursor) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const KeptMail& m : mails) {
      if (!m.skip_reason.empty()) {
        skipped_.emplace(std::make_pair(archive, m.message_id), m);
        continue;
      }
      if (std::none_of(mails_.begin(), mails_.end(),
                       [&](const KeptMail& k) { return k.message_id == m.message_id; })) {
        mails_.push_back(m);
      }
    }
    for (const auto& [epoch, commit] : cursor) cursors_[archive][epoch] = commit;
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::string>> ThreadMails(const std::string& thread_root,
                                                       int version) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++thread_mails_calls_;
    std::vector<std::string> out;
    for (const KeptMail& m : mails_) {
      if (m.thread_root == thread_root && m.version == version) out.push_back(m.raw);
    }
    return out;
  }
  absl::StatusOr<std::optional<SeriesRecord>> GetSeries(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = series_.find(id);
    if (it == series_.end()) return std::optional<SeriesRecord>();
    return std::optional<SeriesRecord>(it->second.second);
  }
  absl::Status PutSeries(const SeriesRecord& series) override {
    std::lock_guard<std::mutex> lock(mu_);
    SeriesRecord record = series;
    record.updated_ms = NowMs();
    auto it = series_.find(series.id);
    const int64_t created = it == series_.end() ? ++sequence_ : it->second.first;
    series_[series.id] = {created, std::move(record)};
    return absl::OkStatus();
  }
  absl::Status PutSeriesMbox(const std::string& id, const std::string& mbox) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (series_.count(id) == 0) return absl::NotFoundError("series " + id + ": not stored");
    mboxes_[id] = mbox;
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> SeriesMbox(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = mboxes_.find(id);
    return it == mboxes_.end() ? std::string() : it->second;
  }
  absl::StatusOr<std::vector<SeriesRecord>> ListSeries(std::optional<SeriesState> state,
                                                       int limit) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::pair<int64_t, const SeriesRecord*>> order;
    for (const auto& [id, entry] : series_) {
      if (!state || entry.second.state == *state) order.emplace_back(entry.first, &entry.second);
    }
    std::sort(order.begin(), order.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<SeriesRecord> out;
    for (const auto& [created, record] : order) {
      if (static_cast<int>(out.size()) >= limit) break;
      out.push_back(*record);
    }
    return out;
  }
  absl::StatusOr<bool> QueueReply(const ReplyRecord& reply) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [created, r] : replies_) {
      if ((r.series_id == reply.series_id && r.kind == reply.kind) ||
          r.message_id == reply.message_id) {
        return false;
      }
    }
    ReplyRecord stored = reply;
    stored.state = ReplyState::kQueued;
    stored.sent_ms = 0;
    replies_.emplace_back(++sequence_, std::move(stored));
    return true;
  }
  absl::StatusOr<std::vector<ReplyRecord>> ListReplies(ReplyState state, int limit) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<ReplyRecord> out;
    for (const auto& [created, r] : replies_) {
      if (r.state == state && static_cast<int>(out.size()) < limit) out.push_back(r);
    }
    return out;
  }
  absl::StatusOr<bool> MoveReply(const std::string& message_id, ReplyState from,
                                 ReplyState to) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [created, r] : replies_) {
      if (r.message_id != message_id || r.state != from) continue;
      r.state = to;
      if (to == ReplyState::kQueued) {
        r.sent_ms = 0;
      } else if (to == ReplyState::kSending || r.sent_ms == 0) {
        r.sent_ms = NowMs();
      }
      return true;
    }
    return false;
  }
  absl::StatusOr<int> RepliesSentSince(int64_t since_ms) override {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const auto& [created, r] : replies_) {
      const bool out = r.state == ReplyState::kSending || r.state == ReplyState::kSent ||
                       r.state == ReplyState::kUncertain;
      n += out && r.sent_ms >= since_ms ? 1 : 0;
    }
    return n;
  }
  absl::Status QueueChecks(const std::vector<CheckRecord>& checks) override {
    std::lock_guard<std::mutex> lock(mu_);
    // A check belongs to a stored series (PostgreSQL: a foreign key); all or none.
    for (const CheckRecord& k : checks) {
      if (series_.count(k.series_id) == 0) {
        return absl::InternalError("database error 23503: a check of a series not stored: " +
                                   k.series_id);
      }
    }
    for (const CheckRecord& k : checks) {
      if (Find(k.patch_message_id, k.kind) == nullptr) {
        CheckRecord stored = k;
        stored.status = CheckStatus::kQueued;
        stored.attempts = 0;
        stored.error.clear();
        checks_.push_back(std::move(stored));
      }
      if (k.kind == CheckKind::kVerdict) {
        if (CheckRecord* pending = Find(k.patch_message_id, CheckKind::kPending);
            pending != nullptr && pending->status == CheckStatus::kQueued) {
          pending->status = CheckStatus::kSuperseded;
        }
      }
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<CheckRecord>> DueChecks(int64_t now_ms, int limit) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<CheckRecord> out;
    for (const CheckRecord& k : checks_) {
      if (k.status == CheckStatus::kQueued && k.next_ms <= now_ms &&
          static_cast<int>(out.size()) < limit) {
        out.push_back(k);
      }
    }
    return out;
  }
  absl::Status SettleCheck(const CheckRecord& check) override {
    std::lock_guard<std::mutex> lock(mu_);
    CheckRecord* k = Find(check.patch_message_id, check.kind);
    if (k != nullptr && k->status == CheckStatus::kQueued) {
      k->status = check.status;
      k->attempts = check.attempts;
      k->error = check.error;
      k->next_ms = check.next_ms;
    }
    return absl::OkStatus();
  }

  // For tests: the skipped mails' reasons, by (archive, Message-ID).
  std::map<std::pair<std::string, std::string>, std::string> SkippedReasons() {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<std::pair<std::string, std::string>, std::string> out;
    for (const auto& [key, mail] : skipped_) out[key] = mail.skip_reason;
    return out;
  }

  // Test inspection: how often a series was assembled from its raw mails.
  int thread_mails_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return thread_mails_calls_;
  }

 private:
  int64_t NowMs() const { return clock_->NowMs(); }
  CheckRecord* Find(const std::string& patch, CheckKind kind) {
    for (CheckRecord& k : checks_) {
      if (k.patch_message_id == patch && k.kind == kind) return &k;
    }
    return nullptr;
  }

  const Clock* clock_;
  mutable std::mutex mu_;
  std::map<std::string, std::map<int, std::string>> cursors_;
  std::vector<KeptMail> mails_;  // arrival order
  std::map<std::pair<std::string, std::string>, KeptMail> skipped_;
  std::map<std::string, std::pair<int64_t, SeriesRecord>> series_;  // id -> (created, record)
  int thread_mails_calls_ = 0;
  std::map<std::string, std::string> mboxes_;             // id -> assembled mbox
  std::vector<std::pair<int64_t, ReplyRecord>> replies_;  // creation order
  std::vector<CheckRecord> checks_;                       // creation order
  int64_t sequence_ = 0;
};

}  // namespace faultline::controller::fakes
