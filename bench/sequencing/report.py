#!/usr/bin/env python3
"""The markdown summary of run.sh's raw results (append.txt, drain.txt, resume.txt)."""
import statistics as st
import sys
from collections import defaultdict

out, secs, clients, nap, drain, page = sys.argv[1:7]
NAMES = {"bare": "bare INSERT", "base": "today: insert + UPDATE", "a": "A: snapshot ticks", "a2": "A2: ticks, no txid index",
         "b": "B: position map", "c": "C: batched map (ids[])"}
ORDER = ["bare", "base", "a", "a2", "b", "c"]

app = defaultdict(dict)      # (design, sc) -> round -> (tps, wal)
for line in open(f"{out}/append.txt"):
    d, sc, r, tps, wal, n, steps, ticks = line.split()
    app[(d, sc)][int(r)] = (float(tps), float(wal), int(n), int(steps), int(ticks))
designs = [d for d in ORDER if any((d, sc) in app for sc in ("on", "off"))]
rounds = sorted({r for v in app.values() for r in v})

def med(xs):
    return st.median(xs) if xs else float("nan")

print(f"Append: {clients} clients, {secs} s per run, {len(rounds)} rounds interleaved (design order "
      f"rotated each round), sequencer loop napping {float(nap) * 1000:g} ms between steps; medians; "
      f"ratios taken within each round, then the median.\n")
print("| design | tx/s sc=on | × bare | tx/s sc=off | × bare | WAL B/record (on) | × bare | WAL B/record (off) | sequencer CPU µs/record (on, off) |")
print("|---|---|---|---|---|---|---|---|---|")
for d in designs:
    cells = []
    for sc in ("on", "off"):
        rs = app.get((d, sc), {})
        tps = med([v[0] for v in rs.values()])
        ratio = med([rs[r][0] / app[("bare", sc)][r][0] for r in rs if r in app.get(("bare", sc), {})])
        cells += [f"{tps:,.0f}", f"{ratio:.2f}"]
    won = app.get((d, "on"), {})
    woff = app.get((d, "off"), {})
    wratio = med([won[r][1] / app[("bare", "on")][r][1] for r in won if r in app.get(("bare", "on"), {})])
    cells += [f"{med([v[1] for v in won.values()]):.0f}", f"{wratio:.2f}",
              f"{med([v[1] for v in woff.values()]):.0f}"]
    cpu = [med([v[4] * 10000.0 / v[2] for v in app.get((d, sc), {}).values()]) for sc in ("on", "off")]
    cells.append("–" if d == "bare" else f"{cpu[0]:.1f}, {cpu[1]:.1f}")
    print(f"| {NAMES[d]} | " + " | ".join(cells) + " |")

dr = defaultdict(list)
for line in open(f"{out}/drain.txt"):
    d, r, recs, pages, secs_, last, rate = line.split()
    dr[d].append((float(rate), int(recs), int(pages), int(last)))
rs = defaultdict(list)
for line in open(f"{out}/resume.txt"):
    d, r, ms = line.split()
    rs[d].append(float(ms))
print(f"\nRead: drain of {int(drain):,} records in pages of {page} from the start of the feed "
      f"(rows only, server side), median of the rounds; resume: median time of one page after a "
      f"random position in the drained range (50 per round), median of the rounds.\n")
print("| design | drain records/s | pages | × today | resume: ms per page | drain: ms per page |")
print("|---|---|---|---|---|---|")
base_rate = med([x[0] for x in dr.get("base", [])])
for d in designs:
    if d not in dr:
        continue
    rate = med([x[0] for x in dr[d]])
    pages = dr[d][0][2]
    print(f"| {NAMES[d]} | {rate:,.0f} | {pages} | {rate / base_rate:.2f} | {med(rs[d]):.2f} | "
          f"{dr[d][0][1] / rate / pages * 1000:.2f} |")
