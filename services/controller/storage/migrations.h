#pragma once
#include <string>
#include <vector>

namespace faultline::controller {

struct Migration {
  int version;
  std::string name;
  std::string sql;
};

// Versioned schema migrations, applied in order at start-up. An applied migration must
// never change: its md5 is recorded and checked on every start.
const std::vector<Migration>& Migrations();

// The schema's history as data (constant, no code), in migrations.cc and
// migrations_from_21.cc; Migrations() hands it out.
struct MigrationText {
  int version;
  const char* name;
  const char* sql;
};
// Appends migrations 21 on (migrations_from_21.cc; for Migrations() only).
void AppendMigrationsFrom21(std::vector<Migration>* out);

}  // namespace faultline::controller
