# bench/plot.gp — jobs/s against enqueue_shards, one panel per workload.
# gnuplot -e "outdir='bench/out'" bench/plot.gp  (reads enqueue.dat, drain.dat, latency.dat)
if (!exists("outdir")) outdir = "bench/out"
set terminal pngcairo size 1500,520 font "sans,10"
set output outdir."/benchmarks.png"
set datafile missing "NaN"
set multiplot layout 1,3
set logscale x 2
set logscale y 10
set grid
set key bottom right font ",8"
set xlabel "enqueue\\_shards (S)"
set ylabel "jobs/s"

set title "1. Enqueue, 16 producers"
set xrange [0.8:20]
plot outdir."/enqueue.dat" u 1:2 w lp lw 2 pt 7 lc rgb "#1f77b4" t "awa insert\\_jobs, batch 500", \
     ""                    u 1:4 w l lw 2 dt 2 lc rgb "#1f77b4" t "raw multi-row INSERT (limit)", \
     ""                    u 1:6 w l lw 1 dt 3 lc rgb "#1f77b4" t "PgQ, 500 events/txn", \
     ""                    u 1:3 w lp lw 2 pt 5 lc rgb "#d62728" t "awa insert\\_job\\_compat, single row", \
     ""                    u 1:5 w l lw 2 dt 2 lc rgb "#d62728" t "raw single-row INSERT (limit)", \
     ""                    u 1:7 w l lw 1 dt 3 lc rgb "#d62728" t "PgQ, single event"

set title "2. Claim + complete drain, 8 workers"
set xrange [0.8:10]
plot outdir."/drain.dat" u 1:2 w lp lw 2 pt 7 lc rgb "#1f77b4" t "awa, batch 10", \
     ""                  u 1:3 w lp lw 2 pt 5 lc rgb "#2ca02c" t "awa, batch 100", \
     ""                  u 1:4 w l lw 2 dt 2 lc rgb "#1f77b4" t "SKIP LOCKED at-least-once, batch 10", \
     ""                  u 1:5 w l lw 2 dt 2 lc rgb "#2ca02c" t "SKIP LOCKED at-least-once, batch 100", \
     ""                  u 1:6 w l lw 1 dt 3 lc rgb "#1f77b4" t "SKIP LOCKED at-most-once, batch 10", \
     ""                  u 1:7 w l lw 1 dt 3 lc rgb "#2ca02c" t "SKIP LOCKED at-most-once, batch 100"

set title "4. Claim latency, 1 client, batch 10"
set xrange [0.8:80]
unset logscale y
set yrange [0:*]
set ylabel "ms per claim call"
plot outdir."/latency.dat" u 1:2 w lp lw 2 pt 7 lc rgb "#9467bd" t "awa claim\\_ready\\_runtime"
unset multiplot
