#include "services/controller/core/report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "common/kernel_label.h"

namespace faultline::controller {

double Median(std::vector<double> values) {
  return stats::MedianOf(std::move(values));
}

std::vector<SummaryRow> Summarize(const std::vector<RunOutcome>& outcomes) {
  std::vector<SummaryRow> rows;
  std::vector<std::vector<double>> values;
  std::vector<std::vector<double>> pages;
  for (const auto& o : outcomes) {
    auto it = std::find_if(rows.begin(), rows.end(), [&](const SummaryRow& r) {
      return std::tie(r.cell, r.kernel, r.board) == std::tie(o.cell, o.kernel, o.board);
    });
    size_t index = static_cast<size_t>(it - rows.begin());
    if (it == rows.end()) {
      rows.push_back(SummaryRow{o.cell, o.kernel, o.board});
      values.emplace_back();
      pages.emplace_back();
    }
    if (o.succeeded) {
      values[index].push_back(o.throughput);
      pages[index].push_back(o.pages_per_second);
      if (o.too_coarse) ++rows[index].too_coarse;
    }
    if (o.failed) ++rows[index].failed;
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& v = values[i];
    rows[i].n = static_cast<uint32_t>(v.size());
    if (v.empty()) continue;
    rows[i].median = Median(v);
    rows[i].median_pages_per_second = Median(pages[i]);
    rows[i].min = *std::min_element(v.begin(), v.end());
    rows[i].max = *std::max_element(v.begin(), v.end());
    rows[i].mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  }
  return rows;
}

int MinPairsForAlpha(double alpha) {
  int n = 1;
  while (n < 64 && 2.0 / std::ldexp(1.0, n) > alpha) ++n;
  return n;
}

std::vector<ComparisonRow> CompareKernels(const std::vector<RunOutcome>& outcomes,
                                          const std::string& baseline,
                                          const std::vector<std::string>& kernels,
                                          const stats::CompareOptions& options) {
  std::vector<Cell> cells;
  std::set<std::string> boards;
  for (const auto& o : outcomes) {
    if (std::find(cells.begin(), cells.end(), o.cell) == cells.end()) cells.push_back(o.cell);
    if (!o.board.empty()) boards.insert(o.board);
  }
  // A cell in which any run completed too few rounds is compared in pages/s, for every
  // kernel alike: rounds/s would be quantised (0 for a slow pass) and pages/s is not.
  auto coarse = [&](const std::string& board, const Cell& cell) {
    return std::any_of(outcomes.begin(), outcomes.end(), [&](const RunOutcome& o) {
      return o.succeeded && o.too_coarse && o.board == board && o.cell == cell;
    });
  };
  auto samples = [&](const std::string& board, const Cell& cell, const std::string& kernel,
                     bool in_pages) {
    std::vector<double> v;
    for (const auto& o : outcomes) {
      if (o.succeeded && o.board == board && o.kernel == kernel && o.cell == cell) {
        v.push_back(in_pages ? o.pages_per_second : o.throughput);
      }
    }
    return v;
  };
  // Succeeded runs of A and B with the same repetition, in repetition order.
  auto pairs = [&](const std::string& board, const Cell& cell, const std::string& a_kernel,
                   const std::string& b_kernel, bool in_pages) {
    std::map<int, std::pair<std::vector<double>, std::vector<double>>> by_rep;
    for (const auto& o : outcomes) {
      if (!o.succeeded || o.repetition < 0 || o.board != board || !(o.cell == cell)) continue;
      const double v = in_pages ? o.pages_per_second : o.throughput;
      if (o.kernel == a_kernel) by_rep[o.repetition].first.push_back(v);
      if (o.kernel == b_kernel) by_rep[o.repetition].second.push_back(v);
    }
    std::pair<std::vector<double>, std::vector<double>> out;
    for (const auto& [rep, values] : by_rep) {
      if (values.first.size() != 1 || values.second.size() != 1) continue;
      out.first.push_back(values.first.front());
      out.second.push_back(values.second.front());
    }
    return out;
  };
  std::vector<ComparisonRow> rows;
  for (const auto& board : boards) {
    for (const auto& cell : cells) {
      const bool in_pages = coarse(board, cell);
      std::vector<double> a = samples(board, cell, baseline, in_pages);
      for (const auto& kernel : kernels) {
        if (kernel == baseline) continue;
        std::vector<double> b = samples(board, cell, kernel, in_pages);
        if (a.empty() && b.empty()) continue;
        const stats::CellComparison unpaired = stats::Compare(a, b, options);
        ComparisonRow row{
            cell, board, baseline, kernel, unpaired, in_pages ? "pages/s" : "rounds/s", unpaired};
        auto [pa, pb] = pairs(board, cell, baseline, kernel, in_pages);
        if (static_cast<int>(pa.size()) >= MinPairsForAlpha(options.alpha)) {
          row.stats = stats::ComparePaired(pa, pb, options);
        }
        rows.push_back(std::move(row));
      }
    }
  }
  std::vector<stats::CellComparison> stats;
  for (const auto& r : rows) stats.push_back(r.stats);
  stats::ApplyStudyVerdicts(&stats, options);
  for (size_t i = 0; i < rows.size(); ++i) rows[i].stats = stats[i];
  return rows;
}

std::map<std::string, std::string> EnvironmentDifferences(const std::vector<RunEnvironment>& runs) {
  // Per-run values differ by design. (A run's folded stacks are a result of their own,
  // RunRecord.folded_stacks: they never reach the environment.)
  auto per_run = [](const std::string& key) {
    return key.rfind("param.", 0) == 0 || key.rfind("memcg.", 0) == 0 || key == "kernel.label";
  };
  // board -> key -> kernel -> values
  std::map<std::string, std::map<std::string, std::map<std::string, std::set<std::string>>>> seen;
  std::map<std::string, std::set<std::string>> kernels_on_board;
  for (const auto& r : runs) {
    kernels_on_board[r.board].insert(r.kernel);
    for (const auto& [k, v] : r.facts) {
      if (!per_run(k)) seen[r.board][k][r.kernel].insert(v);
    }
  }
  std::map<std::string, std::string> out;
  for (const auto& [board, keys] : seen) {
    if (kernels_on_board[board].size() < 2) continue;
    for (const auto& [key, by_kernel] : keys) {
      std::set<std::set<std::string>> distinct;
      for (const auto& [kernel, values] : by_kernel) distinct.insert(values);
      bool differs = distinct.size() > 1 || by_kernel.size() < kernels_on_board[board].size();
      if (!differs) continue;
      std::string text;
      for (const auto& kernel : kernels_on_board[board]) {
        if (!text.empty()) text += " | ";
        text += kernel + ": ";
        auto it = by_kernel.find(kernel);
        if (it == by_kernel.end()) {
          text += "(absent)";
          continue;
        }
        std::string values;
        for (const auto& v : it->second) values += (values.empty() ? "" : ", ") + v;
        text += values;
      }
      out[board + "/" + key] = text;
    }
  }
  return out;
}

std::string ConfigLabel(const std::map<std::string, std::string>& cell) {
  if (cell.empty()) return "default";
  std::string out;
  for (const auto& [k, v] : cell) out += (out.empty() ? "" : ",") + k + "=" + v;
  return out;
}

std::map<std::string, std::map<std::string, std::string>> BoardFactsOf(
    const std::vector<RunEnvironment>& runs) {
  // What describes the board; per-run values (cgroup paths, params, labels) and the long
  // kernel command line stay out.
  auto about_board = [](const std::string& key) {
    for (const char* prefix : {"cpu.", "memory.", "thp.", "swap.", "cgroup.", "virt.", "mm."}) {
      if (key.rfind(prefix, 0) == 0) return true;
    }
    return key == "page_size" || key == "kernel.release" || key == "kernel.per_vma_lock" ||
           key == "kernel.lru_gen";
  };
  std::map<std::string, std::map<std::string, std::set<std::string>>> seen;
  for (const RunEnvironment& r : runs) {
    for (const auto& [k, v] : r.facts) {
      if (about_board(k)) seen[r.board][k].insert(v);
    }
  }
  std::map<std::string, std::map<std::string, std::string>> out;
  for (const auto& [board, facts] : seen) {
    for (const auto& [k, values] : facts) {
      std::string joined;
      for (const std::string& v : values) joined += (joined.empty() ? "" : " | ") + v;
      out[board][k] = joined;
    }
  }
  return out;
}

std::string SeriesKernel(const std::string& label) {
  return KernelLabel::Parse(label).WithoutSlot();
}

}  // namespace faultline::controller
