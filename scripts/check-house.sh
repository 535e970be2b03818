#!/usr/bin/env bash
# The house's layout rules, checked over the tracked product sources (not *_test.cc, not
# tests/, not generated code):
#   - no source file over 600 lines, no function over 150 (a function: a clang-formatted
#     definition from its signature's '{' to the '}' at its indent);
#   - one SHA-256: OpenSSL's SHA-256 is called in common/sha256.cc only;
#   - reports are rendered in report/, not in the CLI (no Render* definitions in services/cli);
#   - the controller links the report library (its link line, with a build dir);
#   - no literal comparison of an API state or verdict (`x.verdict() == "regression"`,
#     `b.state() != "done"`, `marks(i) == "bad"`) outside the type that owns the words
#     (proto/faultline/v1/values.h), and no bisection origin read by hand
#     (`r.origin().rfind("change point", 0)`: its change point is a field), no build's apply
#     error parsed back (ParseApplyFailure: kbuild/, and the robot's reader of old builds);
#   - .clang-tidy's HeaderFilterRegex takes every tracked header (as clang-tidy sees it: by
#     its absolute path), so no folder's headers go unchecked.
#
#   scripts/check-house.sh [ROOT]   exit 1 naming each breach, 2 when it cannot run
# ROOT defaults to this checkout; FAULTLINE_BUILD_DIR (default ROOT/build) is read for the
# link check when it holds a build.ninja.
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
build=${FAULTLINE_BUILD_DIR:-$root/build}
cd "$root"
git rev-parse --git-dir >/dev/null 2>&1 || { echo "check-house: $root is not a checkout" >&2; exit 2; }
python3 - "$build" <<'PY'
import os, re, subprocess, sys

build = sys.argv[1]
MAX_FILE, MAX_FUNCTION = 600, 150
files = [f for f in subprocess.run(
    ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.cc", "*.h"],
    capture_output=True, text=True, check=True).stdout.split() if os.path.isfile(f)]
product = [f for f in files if not f.endswith("_test.cc") and not f.startswith("tests/")]
breaches = []

CONTROL = re.compile(r"^\s*(if|for|while|switch|else|do|try|catch|namespace|class|struct|"
                     r"union|enum|extern|return|case|default)\b")

ACCESS = re.compile(r"^\s*(public|private|protected):\s*$")
DECLARATION = re.compile(r"^\s*[A-Za-z_~]")
LAMBDA = re.compile(r"\[[^\]]*\]\s*\(")

def functions(lines):
    """(start, end, name) of each definition whose body opens on a signature's last line."""
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^( *)\S", line)
        if not m or not line.rstrip().endswith("{") or CONTROL.match(line) or "=" in line.split("(")[0]:
            i += 1
            continue
        # The signature: this line and the lines above it up to a blank line, ';', '}' or '{'.
        j = i
        while j > 0 and lines[j - 1].strip() and not re.search(r"[;{}]\s*$", lines[j - 1]) \
                and not lines[j - 1].lstrip().startswith(("//", "#")) \
                and not ACCESS.match(lines[j - 1]):
            j -= 1
        signature = " ".join(l.strip() for l in lines[j:i + 1])
        if "(" not in signature or CONTROL.match(lines[j]) or not DECLARATION.match(lines[j]) \
                or "=" in lines[j].split("(")[0] or LAMBDA.search(signature) or signature.startswith(("//", "#")) \
                or re.search(r"\)\s*(const)?\s*(noexcept)?\s*(override)?\s*(->[^{]*)?(:.*)?\{$",
                             signature) is None:
            i += 1
            continue
        indent = re.match(r"^( *)", lines[j]).group(1)
        end = i + 1
        while end < len(lines) and lines[end].rstrip() != indent + "}" and \
                not lines[end].startswith(indent + "} "):
            end += 1
        name = re.findall(r"([\w:~]+)\s*\(", signature.split(" -> ")[0])
        yield i, end, (name[0] if name else "?")
        i += 1  # nested definitions (local classes' members) are measured too

for f in product:
    with open(f, encoding="utf-8", errors="replace") as fh:
        lines = fh.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) > MAX_FILE:
        breaches.append(f"{f}: {len(lines)} lines, over the {MAX_FILE}-line limit for a source file")
    for start, end, name in functions(lines):
        body = end - start - 1
        if body > MAX_FUNCTION:
            breaches.append(f"{f}:{start + 1}: {name} is {body} lines, over the "
                            f"{MAX_FUNCTION}-line limit for a function")

sha = re.compile(r"\b(EVP_sha256|SHA256_Init|SHA256_Update|SHA256_Final|SHA256)\s*\(")
for f in product:
    if f == "common/sha256.cc":
        continue
    for n, line in enumerate(open(f, encoding="utf-8", errors="replace"), 1):
        if sha.search(line) and not line.lstrip().startswith("//"):
            breaches.append(f"{f}:{n}: calls OpenSSL's SHA-256 (one SHA-256: common/sha256.h)")

render = re.compile(r"^[A-Za-z][\w:<>,*& ]*\s(Render\w*)\s*\(")
for f in product:
    if not f.startswith("services/cli/"):
        continue
    for n, line in enumerate(open(f, encoding="utf-8", errors="replace"), 1):
        m = render.match(line)
        if m and not line.rstrip().endswith(";"):
            breaches.append(f"{f}:{n}: defines {m.group(1)} (renderers live in report/)")

# Vocabularies that cross rooms are types (proto/faultline/v1/values.h), not strings
# compared by hand: a comparison of a state, verdict, phase or mark accessor with a literal.
literal_state = re.compile(
    r"""(?:\.|->)(?:verdict|outcome|state|phase|confirmation|revert|role)\(\)\s*[!=]=\s*"|"""
    r"""\bmarks\([^)]*\)\s*[!=]=\s*"|"""
    r""""\s*[!=]=\s*[\w.>()-]*(?:\.|->)(?:verdict|outcome|state|phase|confirmation|revert|role)\(\)""")
# A label with a grammar read back by hand: a bisection's origin ("change point 7") is
# for people; its change point is a field (v1::ChangePointOf).
# A build's apply error is a message (Build.apply_failure, kbuild::ApplyFailureOf); its words
# are read back only for builds stored before it, in one place.
APPLY_WORDS_READ = {"services/controller/robot/verdict.cc"}
apply_parsed = re.compile(r"\bParseApplyFailure\(")
# A job's run options in their older spelling (JobSpec/Assignment events, mmap_lock_waits,
# profile): read through v1::RunOptionsOf (proto/faultline/v1/run_options.h) only.
OLDER_RUN_OPTIONS_READ = {"services/controller/convert/run_options.cc"}
older_run_options = re.compile(
    r"""\b(?:spec\(\)|spec|a|assignment)\.(?:events|mmap_lock_waits|profile|has_profile)\(\)""")
origin_parsed = re.compile(
    r"""origin\(\)\s*[!=]=|origin\(\)\.(?:rfind|find|starts_with|substr|compare)\(""")
for f in product:
    if f.startswith("proto/faultline/v1/"):
        continue
    for n, line in enumerate(open(f, encoding="utf-8", errors="replace"), 1):
        if line.lstrip().startswith("//"):
            continue
        if literal_state.search(line):
            breaches.append(f"{f}:{n}: compares an API state or verdict with a literal (use the "
                            "type: proto/faultline/v1/values.h)")
        if (apply_parsed.search(line) and not f.startswith("kbuild/")
                and f not in APPLY_WORDS_READ):
            breaches.append(f"{f}:{n}: parses a build's apply error (read the failure it carries: "
                            "Build.apply_failure)")
        if older_run_options.search(line) and f not in OLDER_RUN_OPTIONS_READ:
            breaches.append(f"{f}:{n}: reads a run option in its older spelling (read them "
                            "whole: v1::RunOptionsOf)")
        if origin_parsed.search(line):
            breaches.append(f"{f}:{n}: reads a bisection's origin by hand (its change point is "
                            "a field: v1::ChangePointOf)")

ninja = os.path.join(build, "build.ninja")
if os.path.isfile(ninja):
    text = open(ninja, encoding="utf-8", errors="replace").read()
    link = re.search(r"^build services/controller/faultline-controller: .*$(\n  .*)*", text, re.M)
    if link is None:
        breaches.append(f"{ninja}: no link step for services/controller/faultline-controller")
    elif "libfaultline_report.a" not in link.group(0):
        breaches.append("services/controller/faultline-controller does not link the report "
                        "library (report/: the controller renders what it sends)")

tidy = open(".clang-tidy", encoding="utf-8").read()
m = re.search(r"^HeaderFilterRegex:\s*'(.*)'", tidy, re.M)
if m is None:
    breaches.append(".clang-tidy: no HeaderFilterRegex")
else:
    # clang-tidy matches a header's path as found: absolute (the include path is).
    left_out = sorted({f.split("/")[0] for f in files if f.endswith(".h")
                       and re.search(m.group(1), "/checkout/" + f) is None})
    for folder in left_out:
        breaches.append(f".clang-tidy: HeaderFilterRegex leaves out headers in {folder}/")

for b in breaches:
    print(b)
if breaches:
    print(f"check-house: {len(breaches)} breach(es) of the house rules", file=sys.stderr)
    sys.exit(1)
print(f"check-house: {len(product)} product sources within the house rules")
PY
