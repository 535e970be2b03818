#!/usr/bin/env bash
# A history to bisect (docs/bisect.md): 16 commits of our own on top of the tree's tag
# (deploy/kernel/linux-tree.sh), on the branch faultline-bisect-demo:
#   - 14 harmless ones (a comment in an mm/ or kernel/ file each: compiled, no effect);
#   - commit 8 does not build (a syntax error in mm/util.c), commit 9 fixes it;
#   - commit 11 makes x86 user page faults take mmap_lock instead of the per-VMA lock
#     (arch/x86/mm/fault.c: the lock_vma_under_rcu path is skipped): every fault now counts
#     in mmap_lock:mmap_lock_start_locking, an effect that is certain.
#   deploy/kernel/bisect-demo.sh [TREE]     prints "GOOD BAD" (the tag and the branch)
# The tree's own HEAD and worktree are left as they are (commits are made in a temporary
# worktree). An existing branch with the same 16 subjects is kept.
set -euo pipefail
tree=${1:-/var/cache/faultline-kbuild/linux-6.12}
branch=faultline-bisect-demo
good=$(git -C "$tree" describe --tags --exact-match HEAD)
log() { echo "[bisect-demo] $*" >&2; }
if git -C "$tree" rev-parse --verify -q "refs/heads/$branch" >/dev/null &&
   [ "$(git -C "$tree" rev-list --count "$good..$branch")" = 16 ]; then
  echo "$good $branch"; exit 0
fi
wt=$(mktemp -d /tmp/faultline-bisect-demo.XXXXXX)
cleanup() { git -C "$tree" worktree remove --force "$wt" 2>/dev/null || rm -rf "$wt"; git -C "$tree" worktree prune; }
trap cleanup EXIT
git -C "$tree" worktree add -q --detach "$wt" "$good"
commit() {  # FILE MESSAGE: appends a comment line to FILE (or runs $EDIT) and commits
  git -C "$wt" add -f "$1"
  git -C "$wt" -c user.name="Faultline Demo" -c user.email=demo@faultline.invalid \
    commit -q -m "$2"
}
note() {  # FILE N: a harmless comment
  printf '/* faultline bisect demo: harmless change %s */\n' "$2" >>"$wt/$1"
  commit "$1" "$(dirname "$1" | tr / -): harmless change $2 (faultline bisect demo)"
}
files=(mm/filemap.c mm/memory.c mm/mmap.c kernel/fork.c mm/page_alloc.c mm/rmap.c mm/vmscan.c
       mm/swap.c mm/madvise.c mm/mprotect.c mm/mremap.c mm/truncate.c mm/readahead.c mm/shmem.c)
n=0 f=0
for i in $(seq 1 16); do
  case $i in
    8) printf 'int faultline_bisect_demo_broken = ;\n' >>"$wt/mm/util.c"
       commit mm/util.c "mm/util: a change that does not build (faultline bisect demo)" ;;
    9) sed -i '/faultline_bisect_demo_broken/d' "$wt/mm/util.c"
       commit mm/util.c "mm/util: fix the build (faultline bisect demo)" ;;
    11) grep -q 'if (!(flags & FAULT_FLAG_USER))$' "$wt/arch/x86/mm/fault.c" ||
          { log "arch/x86/mm/fault.c: the per-VMA lock check is not where 6.12 has it"; exit 1; }
        sed -i 's/if (!(flags \& FAULT_FLAG_USER))$/if (1 || !(flags \& FAULT_FLAG_USER))/' "$wt/arch/x86/mm/fault.c"
        commit arch/x86/mm/fault.c "x86/mm: take mmap_lock for every user fault (faultline bisect demo)" ;;
    *) note "${files[$f]}" "$i"; f=$((f + 1)) ;;
  esac
  n=$((n + 1))
done
git -C "$wt" branch -f "$branch" HEAD
log "$branch: $n commits on $good"
echo "$good $branch"
