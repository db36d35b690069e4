#!/usr/bin/env python3
"""The table of scripts/bench.sh, from its results.jsonl (one JSON object per measurement).

    report.py RESULTS_JSONL             print the Markdown table (medians over runs) and goals
    report.py --one CATCHUP_JSON        one-line summary of a single catch-up measurement
    report.py --latency-rate RESULTS    records/s for the latency phase: 20% of the slowest
                                        replicator's median catch-up rate on variant `none`
                                        (10000 without one), at most half the target's ingest
                                        limit for `none`: a load every replicator sustains, so
                                        that latency is replication delay, not a growing backlog

Units: MB = 2^20 bytes of record payload (keys + values, as ProducerPerformance and
ConsumerPerformance count), GiB = 2^30 bytes of payload. The catch-up rate is measured from the
first record on the target to the last, so start-up time is excluded (it has its own column).
"""
import json
import statistics
import sys

REPLICATORS = ["strait", "strait-coalesce", "mm2-default", "mm2-tuned", "strait-tls", "mm2-tuned-tls", "strait-metrics",
               "strait-eos", "mm2-eos"]
STRAITS = [r for r in REPLICATORS if r.startswith("strait")]
MM2S = [r for r in REPLICATORS if r.startswith("mm2")]
VARIANTS = ["none", "lz4", "small", "many"]
CLASSIC = VARIANTS[:3]  # 6 partitions, 1 KiB records; `many` has goals of its own
MB = 1 << 20
GIB = 1 << 30


def catchup_metrics(m: dict) -> dict:
    """Derived numbers of one catch-up measurement."""
    size = m.get("record_size", 1024)
    window_s = max(m["done_ms"] - m["first_ms"], 1) / 1000
    records = m["have"]
    gib = records * size / GIB
    tck = m.get("clk_tck", 100)
    busy, total = m["machine_busy_ticks_window"], m["machine_total_ticks_window"]
    brokers = m.get("broker_ticks_window", [])
    return {
        "complete": m["complete"],
        "rps": records / window_s,
        "mbps": records * size / MB / window_s,
        "cpu_s_per_gib": m["cpu_ticks_window"] / tck / gib if gib else float("nan"),
        "cpu_s_startup": m["cpu_ticks_startup"] / tck,
        "rss_mib": m["vm_hwm_kib"] / 1024,
        "first_s": m["first_ms"] / 1000,
        "total_s": m["done_ms"] / 1000,
        "machine_busy": busy / total if total > 0 else float("nan"),
        "replicator_cores": m["cpu_ticks_window"] / tck / window_s,
        "source_broker_cores": brokers[0] / tck / window_s if len(brokers) > 0 else float("nan"),
        "target_broker_cores": brokers[1] / tck / window_s if len(brokers) > 1 else float("nan"),
        "target_bytes": m.get("target_bytes", 0),
    }


def med(xs):
    xs = [x for x in xs if x == x]  # drop NaN
    return statistics.median(xs) if xs else float("nan")


def load(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def fmt(x, digits=1):
    if x != x:
        return "–"
    if abs(x) >= 100 or digits == 0:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def ratio(a, b):
    return a / b if b and b == b and a == a else float("nan")


def rx(x):
    return "–" if x != x else (f"{x:.2f}×" if x < 10 else f"{x:.0f}×")


def summarize(rows):
    meta = next((r for r in rows if r.get("kind") == "meta"), {})
    limits = {}  # (variant, limit) -> median records/s
    for v in VARIANTS:
        for lim in ("ingest", "fetch", "machine"):
            xs = [r["records_per_s"] for r in rows
                  if r.get("kind") == "limit" and r["variant"] == v and r["limit"] == lim]
            limits[(v, lim)] = med(xs)
    catch = {}  # (variant, replicator) -> {metric: median}, plus counts
    for v in VARIANTS:
        for rep in REPLICATORS:
            ms = [catchup_metrics(r) for r in rows if r.get("kind") == "catchup"
                  and r["variant"] == v and r["replicator"] == rep]
            if not ms:
                continue
            keys = ms[0].keys() - {"complete"}
            d = {k: med([m[k] for m in ms if m["complete"]]) for k in keys}
            d["runs"] = sum(1 for m in ms if m["complete"])
            d["failed"] = sum(1 for m in ms if not m["complete"])
            catch[(v, rep)] = d
    lat = {}
    for rep in ["direct"] + REPLICATORS:
        ls = [r for r in rows if r.get("kind") == "latency" and r["replicator"] == rep and r["count"] > 0]
        if ls:
            lat[rep] = {k: med([r[k] for r in ls]) for k in ("p50_ms", "p99_ms", "p999_ms", "max_ms", "count")}
            lat[rep]["expected"] = med([r.get("expected", float("nan")) for r in ls])
            lat[rep]["runs"] = len(ls)
            lat[rep]["rate"] = ls[0].get("rate")
    preload = {r["variant"]: r for r in rows if r.get("kind") == "preload"}
    return meta, limits, catch, lat, preload


def table(rows):
    meta, limits, catch, lat, preload = summarize(rows)
    out = []
    w = out.append
    size = meta.get("record_size", 1024)
    w(f"Runs: {meta.get('runs', '?')} (medians shown); {meta.get('records', '?'):,} records of "
      f"{size} B per variant ({meta.get('records', 0) * size / GIB:.2f} GiB of payload), "
      f"{meta.get('partitions', '?')} partitions; strait {meta.get('strait_rev', '?')}.")
    if meta.get("target_latency_ms") is not None:
        w("")
        w(f"The replicators reach the target through Toxiproxy adding "
          f"{meta['target_latency_ms']} ms each way (the tools and limits go direct).")
    w("")
    w("Stored sizes on the source: " + ", ".join(
        f"`{v}` {p['source_bytes'] / GIB:.2f} GiB" for v, p in preload.items()) + ".")
    w("")
    w("### Each side alone: the limits no replicator can beat (records/s, MB/s)")
    w("")
    w("| variant | produce only into the target (strait's engine, from memory, acks=all) "
      "| fetch only from the source (strait's engine, into memory) | min | both at once "
      "(the machine limit: the slower side while the other runs) |")
    w("|---|---|---|---|---|")
    for v in VARIANTS:
        i, f, b = limits[(v, "ingest")], limits[(v, "fetch")], limits[(v, "machine")]
        if i != i and f != f:
            continue  # not measured (`many`)
        m = min(i, f) if i == i and f == f else float("nan")
        w(f"| {v} | {fmt(i, 0)} rec/s ({fmt(i * size / MB)} MB/s) | {fmt(f, 0)} rec/s "
          f"({fmt(f * size / MB)} MB/s) | {fmt(m * size / MB)} MB/s | {fmt(b, 0)} rec/s "
          f"({fmt(b * size / MB)} MB/s) |")
    w("")
    w("### Catch-up")
    w("")
    w("| variant | replicator | MB/s | records/s | strait ÷ this | ÷ min(limits) | ÷ machine limit "
      "| CPU s/GiB | peak RSS MiB | start → first record s | replicator / source broker / target broker cores "
      "| machine busy |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for v in VARIANTS:
        lim = min(limits[(v, "ingest")], limits[(v, "fetch")])
        machine = limits[(v, "machine")]
        st = catch.get((v, "strait"))
        for rep in REPLICATORS:
            d = catch.get((v, rep))
            if not d:
                continue
            runs = f" ({d['failed']} failed)" if d["failed"] else ""
            speed = "—" if rep == "strait" or not st else rx(ratio(st["rps"], d["rps"]))
            w(f"| {v} | {rep}{runs} | {fmt(d['mbps'])} | {fmt(d['rps'], 0)} | {speed} | "
              f"{fmt(100 * ratio(d['rps'], lim), 0)}% | {fmt(100 * ratio(d['rps'], machine), 0)}% | "
              f"{fmt(d['cpu_s_per_gib'], 2)} | "
              f"{fmt(d['rss_mib'])} | {fmt(d['first_s'], 2)} | {fmt(d['replicator_cores'], 2)} / "
              f"{fmt(d['source_broker_cores'], 2)} / {fmt(d['target_broker_cores'], 2)} | "
              f"{fmt(100 * d['machine_busy'], 0)}% |")
    w("")
    w("Ratios of strait to MM2 (strait ÷ MM2 for rates, MM2 ÷ strait for costs):")
    w("")
    w("| variant | strait | vs | catch-up | CPU s/GiB | peak RSS | start → first record |")
    w("|---|---|---|---|---|---|---|")
    for v in VARIANTS:
        for s in STRAITS:
            st = catch.get((v, s))
            if not st:
                continue
            for rep in MM2S:
                d = catch.get((v, rep))
                # Like with like: TLS against TLS, exactly-once against exactly-once.
                if not d or any(s.endswith(k) != rep.endswith(k) for k in ("-tls", "-eos")):
                    continue
                w(f"| {v} | {s} | {rep} | {rx(ratio(st['rps'], d['rps']))} | "
                  f"{rx(ratio(d['cpu_s_per_gib'], st['cpu_s_per_gib']))} | "
                  f"{rx(ratio(d['rss_mib'], st['rss_mib']))} | "
                  f"{rx(ratio(d['first_s'], st['first_s']))} |")
    if lat:
        w("")
        rate = next(iter(lat.values()))["rate"]
        w(f"### End-to-end latency (now − CreateTime on a target consumer, {rate} records/s)")
        w("")
        w("`direct` is the floor: no replicator, the same consumer on the source topic. "
          "\"p99 added\" is a replicator's p99 minus the floor's.")
        w("")
        w("| replicator | p50 ms | p99 ms | p99.9 ms | max ms | records (expected) | p99 MM2 ÷ strait "
          "| p99 added ms | added MM2 ÷ strait |")
        w("|---|---|---|---|---|---|---|---|---|")
        st, floor = lat.get("strait"), lat.get("direct")

        def added(d):
            return d["p99_ms"] - floor["p99_ms"] if floor else float("nan")

        for rep in ["direct"] + REPLICATORS:
            d = lat.get(rep)
            if not d:
                continue
            r = "—" if rep in ("strait", "direct") or not st else rx(ratio(d["p99_ms"], st["p99_ms"]))
            a = "—" if rep in ("strait", "direct") or not st else rx(ratio(added(d), added(st)))
            if d.get("expected") == d.get("expected") and d["count"] < 0.9 * d["expected"]:
                r += (f" (only {fmt(100 * d['count'] / d['expected'], 0)}% of the window's records "
                      "arrived: the load was not sustained end to end, latency is a backlog)")
            w(f"| {rep} | {fmt(d['p50_ms'], 0)} | {fmt(d['p99_ms'], 0)} | {fmt(d['p999_ms'], 0)} | "
              f"{fmt(d['max_ms'], 0)} | {fmt(d['count'], 0)} ({fmt(d.get('expected', float('nan')), 0)}) | {r} "
              f"| {'—' if rep == 'direct' else fmt(added(d), 0)} | {a} |")
    w("")
    w("### Goals")
    w("")
    w("| goal | measured | met |")
    w("|---|---|---|")

    def goal(name, measured, ok):
        w(f"| {name} | {measured} | {'–' if ok is None else ('yes' if ok else 'no')} |")

    for v in ("none", "lz4"):
        st, mt = catch.get((v, "strait")), catch.get((v, "mm2-tuned"))
        lim = min(limits[(v, "ingest")], limits[(v, "fetch")])
        if st and mt:
            x = ratio(st["rps"], mt["rps"])
            goal(f"catch-up ≥ 3× tuned MM2 ({v})", rx(x), x >= 3)
        if st:
            x = ratio(st["rps"], lim)
            goal(f"catch-up ≥ 90% of min(fetch only, produce only) ({v})", f"{fmt(100 * x, 0)}%", x >= 0.9)
    for key, name, lim_ratio in (("cpu_s_per_gib", "CPU s/GiB ≤ 1/20 of MM2's", 20),
                                 ("rss_mib", "peak RSS ≤ 1/20 of MM2's", 20),
                                 ("first_s", "start → first record ≤ 1/20 of MM2's", 20)):
        worst = None
        for v in CLASSIC:
            st = catch.get((v, "strait"))
            for rep in (r for r in MM2S if not r.endswith(("-tls", "-eos"))):
                d = catch.get((v, rep))
                if st and d:
                    x = ratio(d[key], st[key])
                    worst = x if worst is None or x < worst else worst
        if worst is not None:
            goal(name + " (worst variant/config)", f"MM2 ÷ strait = {rx(worst)}", worst >= lim_ratio)
    for v in ("none", "lz4"):
        st, sx, mx = (catch.get((v, r)) for r in ("strait", "strait-tls", "mm2-tuned-tls"))
        if st and sx:
            added = sx["cpu_s_per_gib"] - st["cpu_s_per_gib"]
            goal(f"TLS adds ≤ 1 CPU s/GiB to strait ({v})",
                 f"{fmt(added, 2)} s/GiB ({fmt(st['cpu_s_per_gib'], 2)} → "
                 f"{fmt(sx['cpu_s_per_gib'], 2)})", added <= 1)
        if sx and mx:
            x = ratio(sx["rps"], mx["rps"])
            goal(f"over TLS, catch-up ≥ 3× tuned MM2 over TLS ({v})", rx(x), x >= 3)
            x = ratio(mx["cpu_s_per_gib"], sx["cpu_s_per_gib"])
            goal(f"over TLS, CPU s/GiB ≤ 1/10 of tuned MM2's over TLS ({v})",
                 f"MM2 ÷ strait = {rx(x)}", x >= 10)
    for v in CLASSIC:
        st, se, me = (catch.get((v, r)) for r in ("strait", "strait-eos", "mm2-eos"))
        if st and se:
            x = ratio(se["rps"], st["rps"])
            goal(f"exactly-once keeps ≥ 80% of strait's catch-up ({v})", f"{fmt(100 * x, 0)}%",
                 x >= 0.8)
        if se and me:
            x = ratio(se["rps"], me["rps"])
            goal(f"exactly-once: catch-up ≥ 3× MM2's exactly-once ({v})", rx(x), x >= 3)
            x = ratio(me["cpu_s_per_gib"], se["cpu_s_per_gib"])
            goal(f"exactly-once: CPU s/GiB, MM2 ÷ strait ({v})", rx(x), None)
    rss = [catch[(v, "strait")]["rss_mib"] for v in CLASSIC if (v, "strait") in catch]
    if rss:
        goal("strait peak RSS < 64 MiB", f"{fmt(max(rss))} MiB (max over variants)", max(rss) < 64)
    st = catch.get(("many", "strait"))
    if st:
        goal("many partitions: strait peak RSS < 256 MiB", f"{fmt(st['rss_mib'])} MiB",
             st["rss_mib"] < 256)
        for rep in (r for r in MM2S if not r.endswith("-tls")):
            d = catch.get(("many", rep))
            if not d:
                continue
            x = ratio(st["rps"], d["rps"])
            goal(f"many partitions: catch-up ≥ 5× {rep}", rx(x), x >= 5)
            x = ratio(d["rss_mib"], st["rss_mib"])
            goal(f"many partitions: peak RSS ≤ 1/10 of {rep}'s", f"MM2 ÷ strait = {rx(x)}", x >= 10)
            x = ratio(d["first_s"], st["first_s"])
            goal(f"many partitions: start → first record ≤ 1/20 of {rep}'s",
                 f"MM2 ÷ strait = {rx(x)}", x >= 20)
    if "strait" in lat:
        others = [lat[r]["p99_ms"] for r in MM2S if r in lat]
        if others:
            x = ratio(min(others), lat["strait"]["p99_ms"])
            goal("p99 latency ≤ 1/5 of MM2's (best MM2)", f"MM2 ÷ strait = {rx(x)}", x >= 5)
            if "direct" in lat:
                floor = lat["direct"]["p99_ms"]
                goal("1/5 of MM2's p99 lies above the floor (no replicator)",
                     f"floor (no replicator) p99 {fmt(floor, 0)} ms vs 1/5 of MM2's "
                     f"{fmt(min(others) / 5, 1)} ms", min(others) / 5 > floor)
    return "\n".join(out)


def main():
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "--one":
        m = json.loads(args[1])
        d = catchup_metrics(m)
        print(f"{'complete' if d['complete'] else 'INCOMPLETE'} {d['mbps']:.1f} MB/s "
              f"{d['rps']:,.0f} rec/s, first record {d['first_s']:.2f} s, "
              f"CPU {d['cpu_s_per_gib']:.2f} s/GiB, RSS {d['rss_mib']:.1f} MiB, "
              f"cores repl/src/tgt {d['replicator_cores']:.2f}/{d['source_broker_cores']:.2f}/"
              f"{d['target_broker_cores']:.2f}, machine busy {100 * d['machine_busy']:.0f}%")
    elif len(args) == 2 and args[0] == "--latency-rate":
        rows = load(args[1])
        medians = [med([catchup_metrics(r)["rps"] for r in rows if r.get("kind") == "catchup"
                        and r["replicator"] == rep and r["variant"] == "none" and r["complete"]])
                   for rep in REPLICATORS]
        medians = [x for x in medians if x == x]
        rate = 0.2 * min(medians) if medians else 10000
        # A steady load must stay well inside what the source broker takes from one producer.
        ingest = med([r["records_per_s"] for r in rows if r.get("kind") == "limit"
                      and r["limit"] == "ingest" and r["variant"] == "none"])
        if ingest == ingest:
            rate = min(rate, 0.5 * ingest)
        print(max(int(rate), 100))
    elif len(args) == 1:
        print(table(load(args[0])))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
