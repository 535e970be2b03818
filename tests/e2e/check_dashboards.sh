#!/usr/bin/env bash
# check_dashboards.sh PROM_URL PG_URL [DASHBOARD_DIR]
#
# Proves that every faultline Grafana dashboard works against a live stack, without
# Grafana: for each dashboards/*.json
#   - every templating variable of type query (Prometheus `label_values(metric, label)` /
#     `label_values(label)`, or PostgreSQL SQL) resolves to at least one value, in order,
#     so chained variables see the values of the ones before them;
#   - every Prometheus panel target, with variables ($v, ${v}, ${v:fmt}, [[v]]) and
#     built-ins ($__rate_interval, $__interval, $__range, ...) substituted the way Grafana
#     does it with "All" selected, runs through /api/v1/query (instant) without error and
#     returns data;
#   - every PostgreSQL panel target's rawSql, with $__timeFilter(col) & co. expanded over
#     the dashboard's default time range, runs through psql without error (read-only
#     transaction, 30 s statement timeout).
# Also fails on a panel/target/variable whose datasource uid is not one of the pinned ones
# and on dashboards without uid/title/schemaVersion.
#
# Prints one line per check and a summary; exits 1 if anything failed, 2 on usage errors.
# Needs bash, curl, jq, psql.
#
# Environment (optional):
#   FL_CHECK_RANGE          time range for $__range, SQL macros and series lookups
#                           (default: the dashboard's own default, e.g. now-7d -> 7d)
#   FL_CHECK_RATE_INTERVAL  value of $__rate_interval (default 1m)
#   FL_CHECK_INTERVAL       value of $__interval (default 15s)
#   FL_CHECK_NAN_FAILS=1    also fail Prometheus targets whose every value is NaN
#                           (histogram quantiles over an idle window); default: warn
#   FL_CHECK_VERBOSE=1      print every substituted query
#   FL_PROM_UID / FL_PG_UID pinned datasource uids (faultline-prometheus / faultline-postgres)
set -uo pipefail

usage() { echo "usage: $0 PROM_URL PG_URL [DASHBOARD_DIR]" >&2; exit 2; }
[[ $# -ge 2 && $# -le 3 ]] || usage
PROM_URL=${1%/}
PG_URL=$2
DIR=${3:-$(cd "$(dirname "$0")/../.." && pwd)/dashboards}
PROM_UID=${FL_PROM_UID:-faultline-prometheus}
PG_UID=${FL_PG_UID:-faultline-postgres}
RATE_INTERVAL=${FL_CHECK_RATE_INTERVAL:-1m}
INTERVAL=${FL_CHECK_INTERVAL:-15s}

for tool in curl jq psql; do
  command -v "$tool" >/dev/null || { echo "check_dashboards: $tool not found" >&2; exit 2; }
done
[[ -d $DIR ]] || { echo "check_dashboards: no directory $DIR" >&2; exit 2; }
shopt -s nullglob
FILES=("$DIR"/*.json)
[[ ${#FILES[@]} -gt 0 ]] || { echo "check_dashboards: no *.json in $DIR" >&2; exit 2; }

if ! curl -fsS --max-time 10 "$PROM_URL/api/v1/status/buildinfo" >/dev/null; then
  echo "check_dashboards: Prometheus at $PROM_URL does not answer" >&2; exit 2
fi
if ! psql "$PG_URL" -X -q -At -c 'SELECT 1' >/dev/null; then
  echo "check_dashboards: cannot connect to PostgreSQL ($PG_URL)" >&2; exit 2
fi

# ---- jq helpers shared by every stage -------------------------------------------------
# $vars: {name: {values: [...], multi: bool, includeAll: bool}}
JQ_LIB='
def promesc: gsub("(?<c>[\\\\$^*{}\\[\\]+?.()|])"; "\\\\\(.c)");
def sqlquote: "'"'"'" + gsub("'"'"'"; "'"'"''"'"'") + "'"'"'";
def fmtvar($v; $flavor):
  if $flavor == "prom" then
    (if ($v.multi or $v.includeAll) then
       (if ($v.values | length) == 1 then ($v.values[0] | promesc)
        else "(" + ($v.values | map(promesc) | join("|")) + ")" end)
     else $v.values[0] end)
  elif $flavor == "sql" then
    (if ($v.multi or $v.includeAll) then ($v.values | map(sqlquote) | join(","))
     else $v.values[0] end)
  else ($v.values | join(",")) end;
# ${var:format} (https://grafana.com/docs/grafana/latest/dashboards/variables/variable-syntax/)
def fmtnamed($v; $f; $default):
  if $f == "csv" or $f == "raw" then ($v.values | join(","))
  elif $f == "pipe" then ($v.values | join("|"))
  elif $f == "regex" then (if ($v.values | length) == 1 then ($v.values[0] | promesc)
                           else "(" + ($v.values | map(promesc) | join("|")) + ")" end)
  elif $f == "singlequote" then ($v.values | map(sqlquote) | join(","))
  elif $f == "doublequote" then ($v.values | map("\"" + . + "\"") | join(","))
  elif $f == "text" then ($v.values | join(" + "))
  else $default end;
# Substitute dashboard variables, longest name first so $board never eats $boards.
def interp($vars; $flavor):
  reduce ($vars | keys | sort_by(-length) | .[]) as $n (.;
    ($vars[$n]) as $v | fmtvar($v; $flavor) as $s |
    gsub("\\$\\{" + $n + ":(?<f>[a-z]+)\\}"; fmtnamed($v; .f; $s)) |
    gsub("\\$\\{" + $n + "\\}"; $s) |
    gsub("\\[\\[" + $n + "(:[^\\]]*)?\\]\\]"; $s) |
    gsub("\\$" + $n + "(?![A-Za-z0-9_])"; $s));
def builtins($b):
  gsub("\\$__rate_interval"; $b.rate_interval) |
  gsub("\\$__interval_ms"; ($b.interval_s * 1000 | tostring)) |
  gsub("\\$__interval"; $b.interval) |
  gsub("\\$__range_ms"; ($b.range_s * 1000 | tostring)) |
  gsub("\\$__range_s"; ($b.range_s | tostring)) |
  gsub("\\$__range"; $b.range);
def secs: capture("^(?<n>[0-9]+)(?<u>ms|s|m|h|d|w|y)$") |
  (.n | tonumber) * ({"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}[.u]);
# Grafana PostgreSQL macros (pkg/tsdb/grafana-postgresql-datasource/macros.go).
def sqlmacros($b):
  gsub("\\$__timeFilter\\((?<c>[^)]*)\\)"; "\(.c) BETWEEN '"'"'\($b.from_iso)'"'"' AND '"'"'\($b.to_iso)'"'"'") |
  gsub("\\$__timeFrom\\(\\)"; "'"'"'\($b.from_iso)'"'"'") |
  gsub("\\$__timeTo\\(\\)"; "'"'"'\($b.to_iso)'"'"'") |
  gsub("\\$__timeEpoch\\((?<c>[^)]*)\\)"; "extract(epoch from \(.c)) as \"time\"") |
  gsub("\\$__time\\((?<c>[^)]*)\\)"; "\(.c) AS \"time\"") |
  gsub("\\$__unixEpochFilter\\((?<c>[^)]*)\\)"; "\(.c) >= \($b.from_s) AND \(.c) <= \($b.to_s)") |
  gsub("\\$__unixEpochNanoFilter\\((?<c>[^)]*)\\)"; "\(.c) >= \($b.from_s)000000000 AND \(.c) <= \($b.to_s)000000000") |
  gsub("\\$__unixEpochFrom\\(\\)"; "\($b.from_s)") |
  gsub("\\$__unixEpochTo\\(\\)"; "\($b.to_s)") |
  gsub("\\$__timeGroupAlias\\((?<c>[^,)]*),\\s*'"'"'?(?<i>[0-9]+[a-z]+)'"'"'?[^)]*\\)";
       "floor(extract(epoch from \(.c))/\(.i | secs))*\(.i | secs) AS \"time\"") |
  gsub("\\$__timeGroup\\((?<c>[^,)]*),\\s*'"'"'?(?<i>[0-9]+[a-z]+)'"'"'?[^)]*\\)";
       "floor(extract(epoch from \(.c))/\(.i | secs))*\(.i | secs)") |
  gsub("\\$__unixEpochGroupAlias\\((?<c>[^,)]*),\\s*'"'"'?(?<i>[0-9]+[a-z]+)'"'"'?[^)]*\\)";
       "floor(\(.c)/\(.i | secs))*\(.i | secs) AS \"time\"") |
  gsub("\\$__unixEpochGroup\\((?<c>[^,)]*),\\s*'"'"'?(?<i>[0-9]+[a-z]+)'"'"'?[^)]*\\)";
       "floor(\(.c)/\(.i | secs))*\(.i | secs)") |
  gsub("\\$__interval_ms"; ($b.interval_s * 1000 | tostring)) |
  gsub("\\$__interval"; $b.interval);
def dsuid($default): (.datasource // $default) | if type == "object" then (.uid // "") elif type == "string" then . else "" end;
def dstype($default): (.datasource // $default) | if type == "object" then (.type // "") else "" end;
'

n_ok=0; n_fail=0; n_warn=0
declare -A COUNT=([var]=0 [prom]=0 [sql]=0)
ok()   { n_ok=$((n_ok + 1));     printf 'ok    %s\n' "$*"; }
warn() { n_warn=$((n_warn + 1)); printf 'WARN  %s\n' "$*"; }
fail() { n_fail=$((n_fail + 1)); printf 'FAIL  %s\n' "$*"; }
oneline() { tr '\n' ' ' | tr -s ' ' | cut -c1-"${1:-200}"; }

duration_seconds() {  # 30m, 7d, 1h -> seconds
  jq -rn --arg d "$1" "$JQ_LIB"'$d | secs | floor'
}

prom_query() {  # expr -> prints the API's JSON
  curl -sS --max-time 30 -G "$PROM_URL/api/v1/query" --data-urlencode "query=$1"
}

run_sql() {  # sql -> rows on stdout, errors on stderr
  PGOPTIONS='-c default_transaction_read_only=on -c statement_timeout=30s' \
    psql "$PG_URL" -X -q -At -v ON_ERROR_STOP=1 -c "$1"
}

check_dashboard() {
  local file=$1 name
  name=$(basename "$file")
  if ! jq -e . "$file" >/dev/null 2>&1; then fail "$name: not valid JSON"; return; fi
  local meta
  meta=$(jq -r '[.uid // "", .title // "", (.schemaVersion // 0 | tostring), .time.from // "now-6h"] | @tsv' "$file")
  local uid title schema from
  IFS=$'\t' read -r uid title schema from <<<"$meta"
  if [[ -z $uid || -z $title || $schema -lt 36 ]]; then
    fail "$name: needs uid, title and schemaVersion >= 36 (uid='$uid' schemaVersion=$schema)"
  fi

  # Time range: the dashboard's default (now-7d -> 7d) unless FL_CHECK_RANGE is set.
  local range=${FL_CHECK_RANGE:-}
  if [[ -z $range ]]; then
    if [[ $from =~ ^now-([0-9]+[smhdwy])$ ]]; then range=${BASH_REMATCH[1]}; else range=6h; fi
  fi
  local range_s now from_s interval_s
  range_s=$(duration_seconds "$range") || { fail "$name: bad time range '$range'"; return; }
  interval_s=$(duration_seconds "$INTERVAL")
  now=$(date -u +%s); from_s=$((now - range_s))
  local builtins
  builtins=$(jq -cn --arg ri "$RATE_INTERVAL" --arg i "$INTERVAL" --argjson is "$interval_s" \
    --arg r "$range" --argjson rs "$range_s" --argjson f "$from_s" --argjson t "$now" \
    --arg fi "$(date -u -d "@$from_s" +%Y-%m-%dT%H:%M:%SZ)" --arg ti "$(date -u -d "@$now" +%Y-%m-%dT%H:%M:%SZ)" \
    '{rate_interval: $ri, interval: $i, interval_s: $is, range: $r, range_s: $rs,
      from_s: $f, to_s: $t, from_iso: $fi, to_iso: $ti}')
  echo "== $name ($title, uid $uid, range $range)"

  # ---- variables, in order -----------------------------------------------------------
  local vars='{}' nvars i
  nvars=$(jq '.templating.list // [] | length' "$file")
  for ((i = 0; i < nvars; i++)); do
    local v vname vtype q uidv
    v=$(jq -c ".templating.list[$i]" "$file")
    vname=$(jq -r '.name' <<<"$v"); vtype=$(jq -r '.type' <<<"$v")
    local flags
    flags=$(jq -c '{multi: (.multi // false), includeAll: (.includeAll // false)}' <<<"$v")
    local values=''
    case $vtype in
      query)
        COUNT[var]=$((COUNT[var] + 1))
        uidv=$(jq -r --arg p "$PROM_UID" "$JQ_LIB"'dsuid({uid: $p})' <<<"$v")
        q=$(jq -r 'if (.query | type) == "object" then (.query.query // .definition // "")
                   else (.query // .definition // "") end' <<<"$v")
        if [[ $uidv == "$PROM_UID" ]]; then
          local sq
          sq=$(jq -rn --arg q "$q" --argjson vars "$vars" --argjson b "$builtins" \
            "$JQ_LIB"'$q | interp($vars; "prom") | builtins($b)')
          local resp
          if [[ $sq =~ ^[[:space:]]*label_values\([[:space:]]*([A-Za-z_][A-Za-z0-9_]*)[[:space:]]*\)[[:space:]]*$ ]]; then
            resp=$(curl -sS --max-time 30 -G "$PROM_URL/api/v1/label/${BASH_REMATCH[1]}/values" \
                     --data-urlencode "start=$from_s" --data-urlencode "end=$now")
            values=$(jq -r 'select(.status == "success") | .data[]' <<<"$resp" 2>/dev/null)
          elif [[ $sq =~ ^[[:space:]]*label_values\((.*),[[:space:]]*([A-Za-z_][A-Za-z0-9_]*)[[:space:]]*\)[[:space:]]*$ ]]; then
            local label=${BASH_REMATCH[2]} selector=${BASH_REMATCH[1]}
            resp=$(curl -sS --max-time 30 -G "$PROM_URL/api/v1/series" --data-urlencode "match[]=$selector" \
                     --data-urlencode "start=$from_s" --data-urlencode "end=$now")
            values=$(jq -r --arg l "$label" 'select(.status == "success") | [.data[][$l] // empty] | unique | .[]' <<<"$resp" 2>/dev/null)
          else
            fail "$name var \$$vname: unsupported Prometheus variable query: $sq"; continue
          fi
          if [[ $(jq -r '.status // "error"' <<<"$resp" 2>/dev/null) != success ]]; then
            fail "$name var \$$vname: $sq -> $(jq -r '.error // .' <<<"$resp" 2>/dev/null | oneline)"; continue
          fi
        elif [[ $uidv == "$PG_UID" ]]; then
          local sql err
          sql=$(jq -rn --arg q "$q" --argjson vars "$vars" --argjson b "$builtins" \
            "$JQ_LIB"'$q | interp($vars; "sql") | sqlmacros($b)')
          if ! values=$(run_sql "$sql" 2>/tmp/check_dashboards.$$.err | cut -d'|' -f1); then
            fail "$name var \$$vname: SQL error: $(oneline </tmp/check_dashboards.$$.err)"; continue
          fi
          q=$sql
        else
          fail "$name var \$$vname: datasource uid '$uidv' is not $PROM_UID or $PG_UID"; continue
        fi
        local regex
        regex=$(jq -r '.regex // ""' <<<"$v")
        if [[ -n $regex && -n $values ]]; then
          regex=${regex#/}; regex=${regex%/}
          values=$(grep -E -- "$regex" <<<"$values" || true)
        fi
        if [[ -z $values ]]; then
          fail "$name var \$$vname: $q resolves to nothing"; continue
        fi
        ok "$name var \$$vname = $(paste -sd' ' <<<"$values" | cut -c1-120)"
        ;;
      custom)
        values=$(jq -r '.query // "" | split(",") | map(gsub("^\\s+|\\s+$"; "")) | .[]' <<<"$v");;
      constant|textbox|interval)
        values=$(jq -r '.query // "" | split(",")[0]' <<<"$v");;
      datasource|adhoc)
        continue;;
      *)
        fail "$name var \$$vname: unsupported variable type $vtype"; continue;;
    esac
    # A single-valued variable (not multi, no "All") holds one value, as in Grafana: its
    # saved current value when the query returns it, else the first.
    local current
    current=$(jq -r '.current.value // "" | if type == "string" then . else "" end' <<<"$v")
    vars=$(jq -c --arg n "$vname" --arg vals "$values" --argjson f "$flags" --arg cur "$current" \
      '($vals | split("\n") | map(select(. != ""))) as $all
       | (if ($f.multi or $f.includeAll) then $all
          elif ($all | index($cur)) != null then [$cur]
          else $all[:1] end) as $vs
       | . + {($n): ($f + {values: $vs})}' <<<"$vars")
  done

  # ---- panel targets -----------------------------------------------------------------
  # Rows may hold their panels when collapsed; library panels are not followed.
  local targets
  targets=$(jq -c --argjson vars "$vars" --argjson b "$builtins" --arg p "$PROM_UID" --arg g "$PG_UID" "$JQ_LIB"'
    [.panels[]? | ., (.panels[]? // empty)] | .[] | . as $panel
    | select(.type != "row" or ((.targets // []) | length) > 0)
    | (if (.targets // []) | length == 0 then
         (if (.type == "text" or .type == "row" or .type == "news" or .type == "dashlist") then empty
          else {kind: "none", panel: $panel.title} end)
       else (.targets[] | . as $t
         | ($t | dsuid($panel.datasource)) as $uid
         | if $uid == $p or ($uid == "" and ($t | dstype($panel.datasource)) == "prometheus") then
             {kind: "prom", panel: $panel.title, ref: $t.refId,
              query: ($t.expr // "" | interp($vars; "prom") | builtins($b))}
           elif $uid == $g then
             {kind: "sql", panel: $panel.title, ref: $t.refId,
              query: ($t.rawSql // "" | interp($vars; "sql") | sqlmacros($b))}
           else {kind: "baduid", panel: $panel.title, ref: $t.refId, uid: $uid} end)
       end)' "$file")

  local t kind panel ref query
  while IFS= read -r t; do
    [[ -n $t ]] || continue
    kind=$(jq -r .kind <<<"$t"); panel=$(jq -r .panel <<<"$t"); ref=$(jq -r '.ref // "-"' <<<"$t")
    query=$(jq -r '.query // ""' <<<"$t")
    local where="$name \"$panel\" $ref"
    case $kind in
      none)  fail "$where: panel has no targets";;
      baduid) fail "$where: datasource uid '$(jq -r .uid <<<"$t")' is not $PROM_UID or $PG_UID";;
      prom)
        COUNT[prom]=$((COUNT[prom] + 1))
        if [[ -z $query ]]; then fail "$where: empty expr"; continue; fi
        if [[ $query == *'$'* || $query == *'[['* ]]; then
          fail "$where: unresolved variable in: $(oneline <<<"$query")"; continue
        fi
        local resp status
        resp=$(prom_query "$query")
        status=$(jq -r '.status // "error"' <<<"$resp" 2>/dev/null || echo error)
        if [[ $status != success ]]; then
          fail "$where: $(jq -r '(.errorType // "") + ": " + (.error // "")' <<<"$resp" 2>/dev/null || echo "$resp" | oneline)"
          printf '      query: %s\n' "$(oneline 400 <<<"$query")"
          continue
        fi
        local n nan
        read -r n nan < <(jq -r '.data as $d | if $d.resultType == "scalar" or $d.resultType == "string" then "1 0"
            else [($d.result | length), ([$d.result[] | (.value[1] // "")] | map(select(. == "NaN")) | length)] | map(tostring) | join(" ") end' <<<"$resp")
        if [[ $n -eq 0 ]]; then
          fail "$where: no data"
          printf '      query: %s\n' "$(oneline 400 <<<"$query")"
        elif [[ $nan -eq $n ]]; then
          if [[ ${FL_CHECK_NAN_FAILS:-0} == 1 ]]; then fail "$where: $n series, all NaN"
          else warn "$where: $n series, all NaN (nothing observed in the window)"; fi
        else
          ok "$where: $n series"
          [[ ${FL_CHECK_VERBOSE:-0} == 1 ]] && printf '      query: %s\n' "$(oneline 2000 <<<"$query")"
        fi
        ;;
      sql)
        COUNT[sql]=$((COUNT[sql] + 1))
        if [[ -z $query ]]; then fail "$where: empty rawSql"; continue; fi
        if [[ $query =~ \$[A-Za-z_] ]]; then
          fail "$where: unresolved variable or macro in SQL: $(oneline <<<"$query")"; continue
        fi
        local rows
        if rows=$(run_sql "$query" 2>/tmp/check_dashboards.$$.err); then
          ok "$where: SQL ran, $(grep -c . <<<"$rows") rows"
          [[ ${FL_CHECK_VERBOSE:-0} == 1 ]] && printf '      query: %s\n' "$(oneline 2000 <<<"$query")"
        else
          fail "$where: SQL error: $(oneline 300 </tmp/check_dashboards.$$.err)"
        fi
        ;;
    esac
  done <<<"$targets"
}

for f in "${FILES[@]}"; do check_dashboard "$f"; done
rm -f /tmp/check_dashboards.$$.err

echo "summary: ${#FILES[@]} dashboards; ${COUNT[var]} variable queries, ${COUNT[prom]} Prometheus targets, ${COUNT[sql]} SQL targets; $n_ok ok, $n_warn warnings, $n_fail failed"
[[ $n_fail -eq 0 ]]
