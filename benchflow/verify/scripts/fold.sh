#!/bin/sh
# fold.sh (run as `sh -c TEXT fold ARGS...`, common.sh NOT prepended): one root exec for a
# hardened rollout whose agent runs one command (the oracle's solve.sh), instead of three
# (baseline, the agent, harden). See benchflow/verify/fold.py.
#   BASELINE HARDEN   the texts of baseline.sh and harden.sh (common.sh prepended)
#   BASE WS PYINFO LOADER LOADER_DIR SCRUB NAMED   baseline.sh's arguments (NAMED: one per line)
#   AGENT_USER STEPS MOUNT PROTECTED               harden.sh's (PROTECTED: one per line)
#   TIMEOUT   the agent's deadline in seconds ("": none)
#   KEYS      the agent's environment variables, one per line: unset for the two scripts,
#             which see the image's environment as in execs of their own
#   SYSPATH   harden.sh's PATH
#   ARGV...   the agent's command
# Prints, on stdout: baseline.sh's JSON line (before the agent starts, so the agent cannot
# write ahead of it); then whatever the agent prints; then, once harden.sh's kill ran (no
# process the agent started can write any more), a newline and one last line:
# "benchflow-fold AGENT_CODE HARDEN_CODE HARDEN_JSON". Exits 0 only there: killed early
# (the agent can kill this shell), the exec's code says so and benchflow runs harden.sh in
# an exec of its own. A baseline.sh failure ends it with baseline.sh's code, no agent run.
# Exit codes: benchflow/sandbox/exit_codes.py.
nl='
'
baseline=$1 harden=$2 base=$3 ws=$4 pyinfo=$5 loader=$6 loader_dir=$7 scrub=$8 named=$9
shift 9
agent_user=$1 steps=$2 mount=$3 protected=$4 deadline=$5 keys=$6 syspath=$7
shift 7
set -f
# The scripts' environment: the image's, as in their own execs (the agent's keys unset).
# shellcheck disable=SC2086  # one key a line
scripts_env() { IFS=$nl; unset $keys; IFS=" $tab$nl"; }
tab='	'

# baseline.sh: this shell ($$) is left out of its process list (common.sh: record_procs)
# shellcheck disable=SC2086  # NAMED: one per line
out=$(scripts_env; IFS=$nl; fold_pid=$$; export fold_pid
      exec sh -c "$baseline" baseline "$base" "$ws" "$pyinfo" "$loader" "$loader_dir" \
          "$scrub" $named)
code=$?
if [ "$code" != 0 ]; then
    printf '%s\n' "$out" >&2
    exit "$code"  # baseline.sh's own code (USAGE, NOT_ROOT, ...)
fi
line=${out##*"$nl"}
case $line in
    '{"digest":"'*) ;;
    *) printf '%s\n' "$out" >&2; exit 66 ;;  # NO_BASELINE: no agent runs without one
esac
printf '%s\n' "$line"
digest=${line#'{"digest":"'}
digest=${digest%%'"'*}
hws=/
case $line in *'"workspace":true'*) hws=$ws ;; esac

# The agent, as root (fold.py folds only a root agent), with its own environment.
if [ -n "$deadline" ] && [ -x /usr/bin/timeout ]; then
    /usr/bin/timeout -k 5s "${deadline}s" "$@"
else
    "$@"
fi
agent_code=$?

# harden.sh: it keeps itself and its parents (this shell), kills everything else started
# after the baseline first.
# shellcheck disable=SC2086  # PROTECTED: one per line
hout=$(scripts_env; PATH=$syspath; export PATH; IFS=$nl
       exec sh -c "$harden" harden "$base" "$digest" "$hws" "$agent_user" "$steps" "$mount" \
           $protected)
hcode=$?
printf '\nbenchflow-fold %s %s %s\n' "$agent_code" "$hcode" "${hout##*"$nl"}"
exit 0  # OK
