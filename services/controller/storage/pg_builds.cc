// BuildStore on PostgreSQL: builds claimed like runs (FOR UPDATE SKIP LOCKED, a lease on the
// database's clock), images in 1 MiB chunks by sha256.
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "services/controller/storage/pg_pool.h"
#include "services/controller/storage/pg_store.h"

namespace faultline::controller {
namespace {

using nlohmann::json;

constexpr size_t kChunkBytes = 1 << 20;

constexpr const char* kBuildColumns = R"sql(
  b.id, b.label, b.arch, b.state, coalesce(b.builder, ''), coalesce(b.attempt_id, ''),
  b.source::text, coalesce(b.outcome::text, '{}'), coalesce(b.image_sha256, ''),
  coalesce(b.error, ''), b.attempts, (extract(epoch FROM b.created_at) * 1000)::bigint,
  coalesce((extract(epoch FROM b.finished_at) * 1000)::bigint, 0),
  coalesce((SELECT jsonb_agg(jsonb_build_object(
                     'board', bb.board, 'reason', bb.reason, 'console', bb.console,
                     'at_ms', (extract(epoch FROM bb.at) * 1000)::bigint) ORDER BY bb.board)
              FROM bad_boots bb JOIN boards bo ON bo.name = bb.board AND bo.arch = b.arch
             WHERE bb.label = b.label)::text, '[]'))sql";

BuildRecord BuildFromRow(const pqxx::row& r) {
  BuildRecord b;
  b.id = r[0].as<int64_t>();
  b.label = r[1].as<std::string>();
  b.arch = r[2].as<std::string>();
  b.state = pg::ParseEnumOr(ParseBuildState(r[3].as<std::string>()), BuildState::kFailed);
  b.builder = r[4].as<std::string>();
  b.attempt_id = r[5].as<std::string>();
  b.source_json = r[6].as<std::string>();
  const json outcome = json::parse(r[7].as<std::string>(), nullptr, false);
  if (outcome.is_object()) {
    auto text = [&](const char* k) { return outcome.value(k, std::string()); };
    b.key = text("key");
    b.release = text("release");
    b.base_commit = text("base_commit");
    b.tree_hash = text("tree_hash");
    b.config_sha256 = text("config_sha256");
    b.compiler = text("compiler");
    b.image_bytes = outcome.value("image_bytes", uint64_t{0});
    b.build_seconds = outcome.value("build_seconds", 0.0);
    b.cached = outcome.value("cached", false);
    if (outcome.contains("series") && outcome["series"].is_array()) {
      for (const auto& s : outcome["series"]) b.series.push_back(s.get<std::string>());
    }
    if (auto f = outcome.find("apply_failure"); f != outcome.end() && f->is_object()) {
      auto field = [&](const char* k) { return f->value(k, std::string()); };
      b.apply_failure = ApplyFailureRecord{.patch = f->value("patch", 0),
                                           .subject = field("subject"),
                                           .source = field("source"),
                                           .file = field("file"),
                                           .hunk = field("hunk"),
                                           .reason = field("reason")};
    }
  }
  b.image_sha256 = r[8].as<std::string>();
  b.error = r[9].as<std::string>();
  b.attempts = r[10].as<uint32_t>();
  b.created_ms = r[11].as<int64_t>();
  b.finished_ms = r[12].as<int64_t>();
  const json bad = json::parse(r[13].as<std::string>(), nullptr, false);
  if (bad.is_array()) {
    for (const auto& x : bad) {
      b.bad_boots.push_back({x.value("board", std::string()), x.value("reason", std::string()),
                             x.value("console", std::string()), x.value("at_ms", int64_t{0})});
    }
  }
  return b;
}

// Queued runs that needed `label` and that no build of it can serve any more fail, naming
// the build; their jobs are recomputed.
// The queued runs of `label` fail with `why`, and say which build failed them (runs.
// failed_build: a bisection tells a commit that did not build from one whose runs failed).
void FailRunsOfFailedLabel(pqxx::work& w, const std::string& label, int64_t build_id,
                           const std::string& why) {
  auto open = w.exec_params1(
      "SELECT count(*) FROM builds WHERE label = $1 AND state IN ('queued', 'building', 'done')",
      label);
  if (open[0].as<int64_t>() > 0) return;
  auto failed = w.exec_params(R"sql(
      UPDATE runs SET state = 'failed', failure_reason = $2, failed_build = $3,
                      finished_at = now()
       WHERE kernel = $1 AND state = 'queued'
      RETURNING job_id)sql",
                              label, why, build_id);
  std::set<int64_t> jobs;
  for (const auto& r : failed) jobs.insert(r[0].as<int64_t>());
  for (int64_t job : jobs) pg::RecomputeJobState(w, job);
}

}  // namespace

absl::StatusOr<std::optional<BuildRecord>> PgBuildStore::ClaimBuild(
    const std::string& builder, const std::vector<std::string>& arches, uint32_t lease_seconds) {
  return pool_->Query<std::optional<BuildRecord>>(
      [&](pqxx::connection& c, std::optional<BuildRecord>& out) -> absl::Status {
        pqxx::work w(c);
        auto rows = w.exec_params(absl::StrCat(R"sql(
      UPDATE builds b SET state = 'building', builder = $1, attempt_id = gen_random_uuid()::text,
             attempts = b.attempts + 1, lease_expires = now() + make_interval(secs => $3),
             started_at = now()
       WHERE b.id = (SELECT q.id FROM builds q
                      WHERE q.state = 'queued'
                        -- a prebuilt image is fetched, not compiled: any builder takes it
                        AND (q.arch IN (SELECT jsonb_array_elements_text($2::jsonb))
                             OR coalesce(q.source->>'image', '') <> '')
                        AND (q.not_before IS NULL OR q.not_before <= now())
                      -- The shortest expected first: a prebuilt image (a fetch), then a build
                      -- whose object directory is warm (a kernel of the same tree, arch and
                      -- config was built: it compiles what differs), then cold ones; a build
                      -- queued for 30 minutes is not passed over any more. By id within each.
                      ORDER BY CASE
                                 WHEN coalesce(q.source->>'image', '') <> '' THEN 0
                                 WHEN q.created_at < now() - interval '30 minutes' THEN 1
                                 WHEN EXISTS (
                                   SELECT 1 FROM builds d
                                    WHERE d.state = 'done' AND d.arch = q.arch
                                      AND d.source->'tree' = q.source->'tree'
                                      AND d.source->'config_base'
                                          IS NOT DISTINCT FROM q.source->'config_base'
                                      AND d.source->'fragments'
                                          IS NOT DISTINCT FROM q.source->'fragments') THEN 1
                                 ELSE 2
                               END, q.id
                      LIMIT 1 FOR UPDATE OF q SKIP LOCKED)
      RETURNING )sql",
                                               kBuildColumns),
                                  builder, json(arches).dump(), static_cast<int>(lease_seconds));
        w.commit();
        if (!rows.empty()) {
          out = BuildFromRow(rows[0]);
          out->lease_seconds = lease_seconds;
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<bool> PgBuildStore::RenewBuild(int64_t build_id, const std::string& attempt_id,
                                              uint32_t lease_seconds) {
  return pool_->Query<bool>([&](pqxx::connection& c, bool& current) -> absl::Status {
    pqxx::work w(c);
    auto r = w.exec_params(R"sql(
      UPDATE builds SET lease_expires = now() + make_interval(secs => $3)
       WHERE id = $1 AND attempt_id = $2 AND state = 'building')sql",
                           build_id, attempt_id, static_cast<int>(lease_seconds));
    w.commit();
    current = r.affected_rows() == 1;
    return absl::OkStatus();
  });
}

absl::Status PgBuildStore::FinishBuild(int64_t build_id, const std::string& attempt_id,
                                       bool succeeded, const BuildRecord& outcome) {
  return pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    auto row = w.exec_params(
        "SELECT label, arch FROM builds WHERE id = $1 AND attempt_id = $2 AND state = 'building' "
        "FOR UPDATE",
        build_id, attempt_id);
    if (row.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("build ", build_id, " attempt ", attempt_id,
                                                        " is not current (lapsed or finished)"));
    }
    const std::string label = row[0][0].as<std::string>();
    const std::string arch = row[0][1].as<std::string>();
    if (succeeded) {
      auto stored =
          w.exec_params("SELECT bytes FROM artifacts WHERE sha256 = $1", outcome.image_sha256);
      if (stored.empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "build ", build_id, ": image ", outcome.image_sha256, " was not uploaded"));
      }
      json o = {{"key", outcome.key},
                {"release", outcome.release},
                {"base_commit", outcome.base_commit},
                {"tree_hash", outcome.tree_hash},
                {"config_sha256", outcome.config_sha256},
                {"compiler", outcome.compiler},
                {"series", outcome.series},
                {"image_bytes", stored[0][0].as<uint64_t>()},
                {"build_seconds", outcome.build_seconds},
                {"cached", outcome.cached}};
      w.exec_params(R"sql(
        UPDATE builds SET state = 'done', outcome = $2::jsonb, image_sha256 = $3,
               finished_at = now(), lease_expires = NULL, error = NULL
         WHERE id = $1)sql",
                    build_id, o.dump(), outcome.image_sha256);
      // Boards of this arch may now boot it (faultline_bootable_labels decides which).
      w.exec_params(R"sql(
        UPDATE boards SET bootable_kernel_labels = faultline_bootable_labels(name)
         WHERE arch = $1
           AND bootable_kernel_labels IS DISTINCT FROM faultline_bootable_labels(name))sql",
                    arch);
      w.exec("NOTIFY faultline_work");
    } else {
      // A series that did not apply says which patch, where, in the outcome (no column).
      json failed = json::object();
      if (const auto& f = outcome.apply_failure) {
        failed["apply_failure"] = {{"patch", f->patch},   {"subject", f->subject},
                                   {"source", f->source}, {"file", f->file},
                                   {"hunk", f->hunk},     {"reason", f->reason}};
      }
      w.exec_params(R"sql(
        UPDATE builds SET state = 'failed', error = $2, finished_at = now(), lease_expires = NULL,
               outcome = NULLIF($3, '{}')::jsonb
         WHERE id = $1)sql",
                    build_id, outcome.error,
                    failed.dump(-1, ' ', false, json::error_handler_t::replace));
      FailRunsOfFailedLabel(w, label, build_id,
                            absl::StrCat("kernel ", label, ": build ", build_id, " (", arch,
                                         ") failed: ", outcome.error.substr(0, 2000)));
    }
    w.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<int> PgBuildStore::ExpireBuildLeases(uint32_t max_attempts) {
  return pool_->Query<int>([&](pqxx::connection& c, int& touched) -> absl::Status {
    pqxx::work w(c);
    auto lapsed = w.exec_params(R"sql(
      UPDATE builds SET state = CASE WHEN attempts >= $1 THEN 'failed' ELSE 'queued' END,
             error = CASE WHEN attempts >= $1
                          THEN 'builder lost ' || attempts || ' times (last: ' || builder || ')'
                          ELSE error END,
             finished_at = CASE WHEN attempts >= $1 THEN now() END,
             attempt_id = NULL, lease_expires = NULL
       WHERE state = 'building' AND lease_expires < now()
      RETURNING label, state, coalesce(error, ''), id, arch)sql",
                                static_cast<int>(max_attempts));
    for (const auto& r : lapsed) {
      if (r[1].as<std::string>() == "failed") {
        FailRunsOfFailedLabel(
            w, r[0].as<std::string>(), r[3].as<int64_t>(),
            absl::StrCat("kernel ", r[0].as<std::string>(), ": build ", r[3].as<int64_t>(), " (",
                         r[4].as<std::string>(), ") failed: ", r[2].as<std::string>()));
      }
    }
    w.commit();
    touched = static_cast<int>(lapsed.size());
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<BuildRecord>> PgBuildStore::ListBuilds(int64_t job_id) {
  return pool_->Query<std::vector<BuildRecord>>(
      [&](pqxx::connection& c, std::vector<BuildRecord>& out) -> absl::Status {
        pqxx::read_transaction t(c);
        auto rows = t.exec_params(absl::StrCat("SELECT ", kBuildColumns, R"sql( FROM builds b
              WHERE $1 = 0 OR b.id IN (SELECT build_id FROM job_builds WHERE job_id = $1)
              ORDER BY b.id DESC LIMIT 500)sql"),
                                  job_id);
        for (const auto& r : rows) out.push_back(BuildFromRow(r));
        return absl::OkStatus();
      });
}

absl::Status PgBuildStore::PutArtifact(const std::string& sha256, const std::string& data) {
  return pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    auto inserted = w.exec_params(
        "INSERT INTO artifacts (sha256, bytes) VALUES ($1, $2) ON CONFLICT DO NOTHING", sha256,
        static_cast<int64_t>(data.size()));
    if (inserted.affected_rows() == 1) {
      for (size_t at = 0; at < data.size(); at += kChunkBytes) {
        const std::string chunk = data.substr(at, kChunkBytes);
        w.exec_params(
            "INSERT INTO artifact_chunks (sha256, offset_bytes, data) VALUES ($1, $2, $3)", sha256,
            static_cast<int64_t>(at), pqxx::binarystring(chunk.data(), chunk.size()));
      }
    }
    w.commit();
    return absl::OkStatus();
  });
}

absl::Status PgBuildStore::RecordArtifact(const std::string& sha256, uint64_t bytes,
                                          const std::string& location) {
  return pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    w.exec_params(
        "INSERT INTO artifacts (sha256, bytes, location) VALUES ($1, $2, $3) "
        "ON CONFLICT DO NOTHING",
        sha256, static_cast<int64_t>(bytes), location);
    w.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<uint64_t> PgBuildStore::ArtifactBytes(const std::string& sha256) {
  return pool_->Query<uint64_t>([&](pqxx::connection& c, uint64_t& bytes) -> absl::Status {
    pqxx::read_transaction t(c);
    auto r = t.exec_params("SELECT bytes FROM artifacts WHERE sha256 = $1", sha256);
    if (r.empty()) return absl::NotFoundError(absl::StrCat("no artifact ", sha256));
    bytes = r[0][0].as<uint64_t>();
    return absl::OkStatus();
  });
}

absl::Status PgBuildStore::ReadArtifact(
    const std::string& sha256, uint64_t offset,
    const std::function<absl::Status(const std::string& chunk, uint64_t at)>& sink) {
  absl::StatusOr<uint64_t> bytes = ArtifactBytes(sha256);
  if (!bytes.ok()) return bytes.status();
  absl::Status in_db = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::read_transaction t(c);
    auto r = t.exec_params("SELECT location FROM artifacts WHERE sha256 = $1", sha256);
    if (!r.empty() && r[0][0].as<std::string>() != "db") {
      return absl::FailedPreconditionError(
          absl::StrCat("artifact ", sha256, " is in the object store (", r[0][0].as<std::string>(),
                       "): fetch it by the URL of the kernel switch"));
    }
    return absl::OkStatus();
  });
  if (!in_db.ok()) return in_db;
  // One chunk per query: the connection goes back to the pool between chunks, so a slow
  // reader never holds one for the whole image.
  uint64_t at = offset - offset % kChunkBytes;
  while (at < *bytes) {
    std::string chunk;
    absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
      pqxx::read_transaction t(c);
      auto r =
          t.exec_params("SELECT data FROM artifact_chunks WHERE sha256 = $1 AND offset_bytes = $2",
                        sha256, static_cast<int64_t>(at));
      if (r.empty()) {
        return absl::DataLossError(absl::StrCat("artifact ", sha256, " has no chunk at ", at));
      }
      pqxx::binarystring data(r[0][0]);
      chunk.assign(reinterpret_cast<const char*>(data.data()), data.size());
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    const uint64_t skip = offset > at ? offset - at : 0;
    if (absl::Status sent = sink(chunk.substr(skip), at + skip); !sent.ok()) return sent;
    at += chunk.size();
    if (chunk.empty()) break;
  }
  return absl::OkStatus();
}

}  // namespace faultline::controller
