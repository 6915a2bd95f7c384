# watch.sh -- sourced by the GPU scripts that run one detached job across device calls.
#   job_running PIDFILE                  true while the job whose pid PIDFILE holds runs
#   watch_job PIDFILE LOG WATCH_S WHAT   print LOG's last lines every 30 s for up to
#                                        WATCH_S seconds while the job runs, then say
#                                        whether WHAT runs on or has exited
job_running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

watch_job() {
  local pidfile=$1 log=$2 what=$4 end=$((SECONDS + $3))
  while [ "$SECONDS" -lt "$end" ] && job_running "$pidfile"; do
    sleep $(( end - SECONDS < 30 ? end - SECONDS : 30 ))
    echo "--- $(date -u +%T) ---"; tail -n 3 "$log" | cut -c1-220
  done
  if job_running "$pidfile"; then echo "$what runs on"; else echo "$what has exited"; fi
}
