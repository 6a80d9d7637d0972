#!/bin/bash
cd /work/main
for r in 1 2; do for v in old head; do
  if [ $v = old ]; then src=/tmp/wt_old/src; else src=/work/main/src; fi
  sync; sleep 10
  echo "$(date +%T) start $v r$r load $(cut -d' ' -f1 /proc/loadavg)"
  rm -f bench/.work/oncefire-backlog-*
  BENCH_SRC=$src PYTHONPATH=$src BENCH_SITTING=ab-$v BENCH_DB_SUFFIX=_ab$v \
    bench/run_all --no-peers --no-profile --runs 1 --stores sqlite --only throughput,write_path,latency \
    --out /tmp/ab2/$v-r$r/RESULTS.md > /tmp/ab2/$v-r$r.log 2>&1
  echo "$(date +%T) end $v r$r rc=$?"
done; done
echo ALLDONE
