#!/bin/sh
# rebase.sh BASE (common.sh is prepended): the sandbox was restored from a snapshot taken after baseline.sh ran (a
# forked rollout, a regrade). Record the processes of the restored sandbox as the
# baseline's (none of the original ones exist any more) and print the baseline's new
# digest (the files' inodes and times change with the restore) as one JSON line.
base=$1
[ -d "$base" ] || exit 66  # NO_BASELINE
is_root || exit 65  # NOT_ROOT
record_procs
printf '{"digest":"%s"}\n' "$(digest "$base")"
