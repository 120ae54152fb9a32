"""Results to JSON, a Markdown report (tables + targets) and a PNG plot."""

from __future__ import annotations

import json
import os
from typing import Optional

OURS = "mysql-state"
COLD = f"{OURS} save_list (cold: another process)"
WARM_REFERENCE = "reference: floor + orjson.dumps(list) + 1 memcmp"
FLOOR = "floor: 1 INSERT + COMMIT"
ENCRYPTED = " [encrypted]"
WORKLOAD_NAMES = {"append1": "after a turn of 1 message", "append2": "after a turn of 2 messages",
                  "grow": "after the last message grew in place"}
WORKLOADS = {
    "append1": "Append one turn: 1 new message",
    "append2": "Append one turn: 2 new messages (user + assistant)",
    "grow": "Last message grows in place + 1 appended",
    "compact": "Compaction: replaced by a summary + the last 10",
    "load_all": "Load the whole list",
    "load_tail": "Load the last 50",
}
TURN_WORKLOADS = ("append1", "append2", "grow")


def fmt_us(us: Optional[float]) -> str:
    if us is None:
        return "-"
    if us >= 100_000:
        return f"{us / 1000:,.0f} ms"
    if us >= 10_000:
        return f"{us / 1000:.1f} ms"
    return f"{us:,.0f} µs"


def fmt_ratio(r: Optional[float]) -> str:
    if r is None:
        return "-"
    return f"{r:.2f}×" if r < 10 else f"{r:,.0f}×"


class Results:
    def __init__(self, res: dict) -> None:
        self.res = res
        self.by = {}
        for c in res["cells"]:
            for s in c["subjects"]:
                self.by[(c["workload"], c["n"], s["name"])] = s
        self.sizes = sorted({c["n"] for c in res["cells"] if c["n"]})

    def cell(self, workload: str, n: int) -> Optional[dict]:
        for c in self.res["cells"]:
            if c["workload"] == workload and c["n"] == n:
                return c
        return None

    def med(self, workload: str, n: int, name: str) -> Optional[float]:
        s = self.by.get((workload, n, name))
        return s.get("median_us") if s else None

    def minimum(self, workload: str, n: int, name: str) -> Optional[float]:
        s = self.by.get((workload, n, name))
        return s.get("min_us") if s else None

    def rt(self, workload: str, n: int, name: str) -> Optional[int]:
        s = self.by.get((workload, n, name))
        return s.get("round_trips") if s else None

    def names(self, workload: str) -> list[str]:
        seen: list[str] = []
        for c in self.res["cells"]:
            if c["workload"] == workload:
                for s in c["subjects"]:
                    if s["name"] not in seen:
                        seen.append(s["name"])
        return seen

    @staticmethod
    def reference(workload: str) -> str:
        if workload == "load_all":
            return "bare SELECT ORDER BY item_index + orjson.loads"
        if workload == "load_tail":
            return "bare SELECT ... DESC LIMIT 50 + orjson.loads"
        if workload.startswith("get"):
            return "bare SELECT + orjson.loads"
        return "floor: 1 INSERT + COMMIT"


# ---- targets ----------------------------------------------------------------------------------


def targets(r: Results) -> list[dict]:
    out = []
    lo, hi = (r.sizes[0], r.sizes[-1]) if r.sizes else (None, None)

    def add(name, value, limit, ok, detail):
        out.append({"target": name, "value": value, "limit": limit, "met": ok, "detail": detail})

    if not r.sizes:
        return out
    for wl in ("append1", "append2"):
        a = f"{OURS} append_list"
        m_lo, m_hi = r.med(wl, lo, a), r.med(wl, hi, a)
        if m_lo and m_hi:
            ratio = m_hi / m_lo
            mins = (r.minimum(wl, hi, a) or 0) / (r.minimum(wl, lo, a) or 1)
            add(f"append_list ({wl[-1]} msg) cost N={hi} / N={lo} ≤ 1.3", round(ratio, 2), 1.3, ratio <= 1.3,
                f"{fmt_us(m_lo)} → {fmt_us(m_hi)} (ratio of the fastest runs: {mins:.2f})")
        rts = [r.rt(wl, n, a) for n in r.sizes]
        rts = [x for x in rts if x is not None]
        if rts:
            add(f"append_list ({wl[-1]} msg) round trips incl. COMMIT ≤ 2", max(rts), 2, max(rts) <= 2,
                "per N: " + ", ".join(str(x) for x in rts))
        ratios = []
        for n in r.sizes:
            m, f = r.med(wl, n, a), r.med(wl, n, FLOOR)
            if m and f:
                ratios.append((m / f, n))
        if ratios:
            worst = max(ratios)
            add(f"append_list ({wl[-1]} msg) ≤ 1.3× floor (1 INSERT + COMMIT)", round(worst[0], 2), 1.3,
                worst[0] <= 1.3, "per N: " + ", ".join(f"{x:.2f}×" for x, _ in ratios) + f" (worst at N={worst[1]})")
    warm = f"{OURS} save_list (warm)"
    for wl in ("append1", "append2", "grow"):
        for n, limit in ((1000, 1.5), (10000, 2.0)):
            w, c = r.med(wl, n, warm), r.med(wl, n, COLD)
            if w and c:
                add(f"cold save_list ({WORKLOAD_NAMES.get(wl, wl)}) ≤ {limit}× warm at N={n:,}", round(c / w, 2),
                    limit, c / w <= limit, f"cold {fmt_us(c)} vs warm {fmt_us(w)} (another process's store, "
                    "its connections open, no snapshot of the list)")
    for wl in ("append1", "append2"):
        w, ref = r.med(wl, hi, warm), r.med(wl, hi, WARM_REFERENCE)
        if w and ref:
            add(f"warm save_list ({WORKLOAD_NAMES.get(wl, wl)}) ≤ 1.3× ({WARM_REFERENCE}) at N={hi:,}",
                round(w / ref, 2), 1.3, w / ref <= 1.3, f"warm {fmt_us(w)} vs reference {fmt_us(ref)}")
    # encryption at rest costs little on the paths that matter (same run, same workloads)
    for wl, who, limit, n in (("append1", f"{OURS} append_list", 1.15, hi), ("append2", f"{OURS} append_list", 1.15, hi),
                              ("append1", warm, 1.25, 10000), ("append1", COLD, 1.25, 10000),
                              ("append2", warm, 1.25, 10000), ("append2", COLD, 1.25, 10000),
                              ("load_all", f"{OURS} get_list", 2.0, 10000)):
        plain, enc = r.med(wl, n, who), r.med(wl, n, who + ENCRYPTED)
        if plain and enc:
            add(f"{who} encrypted ≤ {limit}× plain ({WORKLOAD_NAMES.get(wl, wl)}, N={n:,})", round(enc / plain, 2),
                limit, enc / plain <= limit, f"encrypted {fmt_us(enc)} vs plain {fmt_us(plain)}")
    # faster per turn than every baseline and peer at N >= 100
    for who in (f"{OURS} append_list", f"{OURS} save_list (warm)"):
        losses, worst = [], 0.0
        for wl in TURN_WORKLOADS:
            for n in r.sizes:
                if n < 100:
                    continue
                m = r.med(wl, n, who)
                if m is None:
                    continue
                for name in r.names(wl):
                    s = r.by.get((wl, n, name))
                    if not s or s["kind"] not in ("baseline", "peer") or "median_us" not in s:
                        continue
                    ratio = m / s["median_us"]
                    worst = max(worst, ratio)
                    if ratio >= 1.0:
                        losses.append(f"{wl} N={n}: {ratio:.2f}× {name}")
        if worst:
            add(f"{who} faster per turn than every baseline and peer at N ≥ 100", round(worst, 2), 1.0,
                not losses, "slower than: " + "; ".join(losses) if losses else f"worst ratio {worst:.2f}× (ours / theirs)")
    ratios = []
    for n in r.sizes:
        m, b = r.med("load_all", n, f"{OURS} get_list"), r.med("load_all", n, Results.reference("load_all"))
        if m and b:
            ratios.append((m / b, n))
    if ratios:
        worst = max(ratios)
        add("get_list (whole list) ≤ 1.3× bare SELECT ORDER BY item_index + orjson.loads", round(worst[0], 2), 1.3,
            worst[0] <= 1.3, "per N: " + ", ".join(f"{x:.2f}×" for x, _ in ratios))
    return out


# ---- Markdown --------------------------------------------------------------------------------


def machine_line(m: dict) -> str:
    s = m.get("server_settings", {})
    return (
        f"{m['nproc']} cores ({m['cpu']}), {m['ram_gb']} GB RAM, {m['os']}, Python {m['python']}; "
        f"server {m['server']} ({m['connection']}; innodb_flush_log_at_trx_commit="
        f"{s.get('innodb_flush_log_at_trx_commit')}, binlog {'on' if s.get('log_bin') else 'off'}), "
        f"loopback TCP"
    )


def workload_table(r: Results, wl: str) -> list[str]:
    ref = Results.reference(wl)
    sizes = [n for n in r.sizes if r.cell(wl, n)]
    lines = ["| system | " + " | ".join(f"N={n:,}" for n in sizes) + " |",
             "|---|" + "---:|" * len(sizes)]
    for name in r.names(wl):
        cells = []
        for n in sizes:
            s = r.by.get((wl, n, name))
            if s is None:
                cells.append("-")
            elif "median_us" not in s:
                cells.append("error")
            else:
                base = r.med(wl, n, ref)
                ratio = s["median_us"] / base if base else None
                rt = s.get("round_trips")
                cells.append(f"{fmt_us(s['median_us'])} · {fmt_ratio(ratio)} · {rt if rt is not None else '?'} RT")
        bold = name.startswith(OURS)
        label = f"**{name}**" if bold else name
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    notes = []
    for n in sizes:
        c = r.cell(wl, n)
        for s in c["subjects"]:
            if s.get("error"):
                notes.append(f"- {s['name']} at N={n}: `{s['error']}`")
        for label, why in (c.get("not_applicable") or {}).items():
            note = f"- {label}: not applicable ({why})"
            if note not in notes:
                notes.append(note)
    return lines + ([""] + notes if notes else [])


def vs_table(r: Results, who: str) -> list[str]:
    """ours / theirs per turn workload and N (below 1: ours is faster)."""
    rows = []
    header = ["| vs | " + " | ".join(f"{WORKLOADS[wl].split(':')[0]} {wl[-1] if wl.startswith('append') else ''} N={n:,}".replace("  ", " ")
                                     for wl in TURN_WORKLOADS for n in r.sizes) + " |"]
    header.append("|---|" + "---:|" * (len(TURN_WORKLOADS) * len(r.sizes)))
    others: list[str] = []
    for wl in TURN_WORKLOADS:
        for name in r.names(wl):
            s = next((r.by.get((wl, n, name)) for n in r.sizes if r.by.get((wl, n, name))), None)
            if s and s["kind"] in ("baseline", "peer", "floor") and name not in others:
                others.append(name)
    for name in others:
        cells = []
        for wl in TURN_WORKLOADS:
            for n in r.sizes:
                m, t = r.med(wl, n, who), r.med(wl, n, name)
                cells.append(fmt_ratio(m / t) if m and t else "-")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return header + rows


def markdown(res: dict, png_name: str) -> str:
    r = Results(res)
    m = res["machine"]
    out = [f"# mysql-state benchmark, {res['date']} ({res['profile']} run)", ""]
    out += [f"Machine: {machine_line(m)}.", "",
            f"Reproduce: `{res['command']}` (elapsed {res['elapsed_s']:.0f} s). Every figure is the median of repeated "
            "runs, measured in one process with all systems interleaved in random order round by round; "
            "RT = statements the server received for one operation (its `Questions` + `Com_admin_commands` "
            "counters, read on a separate connection; COMMIT counts).", "",
            *([res["placement"] + ".", ""] if res.get("placement") else []),
            f"![cost against conversation length]({png_name})", ""]
    out += ["## Targets", "", "| target | measured | limit | met | detail |", "|---|---:|---:|:---:|---|"]
    for t in targets(r):
        out.append(f"| {t['target']} | {t['value']} | {t['limit']} | {'yes' if t['met'] else '**no**'} | {t['detail']} |")
    out += ["", "Cells: median · ratio to the reference (writes: the floor, one INSERT of the same bytes + COMMIT; "
            "reads: the bare SELECT + orjson.loads) · round trips.", ""]
    for wl, title in WORKLOADS.items():
        if not any(c["workload"] == wl for c in res["cells"]):
            continue
        out += [f"## {title}", ""] + workload_table(r, wl) + [""]
    for who in (f"{OURS} append_list", f"{OURS} save_list (warm)"):
        out += [f"## {who} / each alternative, per turn (below 1: {OURS} is faster)", ""] + vs_table(r, who) + [""]
    vals = [c for c in res["cells"] if c["n"] == 0]
    if vals:
        out += ["## Single values", "", "| operation | system | median | × reference | RT |", "|---|---|---:|---:|---:|"]
        for c in vals:
            ref = Results.reference(c["workload"])
            base = next((s.get("median_us") for s in c["subjects"] if s["name"] == ref), None)
            for s in c["subjects"]:
                ratio = s["median_us"] / base if base and "median_us" in s else None
                name = f"**{s['name']}**" if s["name"].startswith(OURS) else s["name"]
                out.append(f"| {c['workload']} | {name} | {fmt_us(s.get('median_us'))} | {fmt_ratio(ratio)} | "
                           f"{s.get('round_trips', '?')} |")
        out.append("")
    if res["throughput"]:
        threads = sorted({t["threads"] for t in res["throughput"]})
        out += ["## Throughput: many sessions written at once (one turn of 2 messages per operation)", "",
                "Each thread appends turns to sessions of its own (they start at 100 messages); "
                f"{OURS} is one store shared by all threads (pool_size=16), the baselines use one connection per "
                "thread. Median of the rounds.", "",
                "| system | " + " | ".join(f"{t} thread{'s' if t > 1 else ''}: turns/s (median latency)" for t in threads) + " |",
                "|---|" + "---:|" * len(threads)]
        names = []
        for t in res["throughput"]:
            if t["name"] not in names:
                names.append(t["name"])
        for name in names:
            cells = []
            for th in threads:
                t = next((x for x in res["throughput"] if x["name"] == name and x["threads"] == th), None)
                cells.append(f"{t['ops_per_s']:,.0f} ({fmt_us(t['median_latency_us'])})" if t else "-")
            label = f"**{name}**" if name.startswith(OURS) else name
            out.append(f"| {label} | " + " | ".join(cells) + " |")
        out.append("")
    out += ["## Peers", ""]
    for name, label in res["peers"].items():
        out.append(f"- {label}: ran.")
    for name, err in res["peer_errors"].items():
        out.append(f"- {name}: could not run on this server: `{err}`")
    out += ["", "Versions: " + ", ".join(f"{k} {v}" for k, v in m["packages"].items()) + ".", ""]
    return "\n".join(out)


# ---- plot ---------------------------------------------------------------------------------------


def plot(res: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = Results(res)
    panels = [wl for wl in ("append2", "grow", "compact", "load_all") if any(c["workload"] == wl for c in res["cells"])]
    cols = 2 if len(panels) > 2 else len(panels)
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6.4 * cols, 4.8 * rows), squeeze=False)
    palette = plt.get_cmap("tab10").colors
    colors: dict = {}

    def color(name: str):
        key = name.split(" (")[0] if not name.startswith(OURS) else name
        if key not in colors:
            colors[key] = palette[len(colors) % len(palette)]
        return colors[key]

    for ax, wl in zip([a for row in axes for a in row], panels):
        for name in r.names(wl):
            xs, ys = [], []
            for n in r.sizes:
                m = r.med(wl, n, name)
                if m:
                    xs.append(n)
                    ys.append(m / 1000)
            if not xs:
                continue
            kind = r.by.get((wl, xs[0], name), {}).get("kind")
            style = dict(marker="o", linewidth=1.5, color=color(name))
            if name.startswith(OURS):
                style.update(linewidth=2.8)
            elif kind == "floor":
                style.update(linestyle="--", color="grey", marker=None)
            elif kind == "peer":
                style.update(linestyle=":")
            ax.plot(xs, ys, label=name, **style)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("conversation length N (messages of ~500 bytes)")
        ax.set_ylabel("median ms per operation")
        ax.set_title(WORKLOADS[wl], fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6.5, loc="upper left")
    fig.suptitle(f"mysql-state vs baselines and peers, {res['date'][:10]} ({res['machine']['nproc']} cores, "
                 f"{res['machine']['server']})", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_all(res: dict, folder: str, stem: str) -> list[str]:
    jpath = os.path.join(folder, stem + ".json")
    mpath = os.path.join(folder, stem + ".md")
    ppath = os.path.join(folder, stem + ".png")
    res = dict(res, targets=targets(Results(res)))
    with open(jpath, "w") as f:
        json.dump(res, f, indent=1)
    plot(res, ppath)
    with open(mpath, "w") as f:
        f.write(markdown(res, os.path.basename(ppath)))
    return [jpath, mpath, ppath]


# ---- throughput (benchmarks/throughput.py) ------------------------------------------------------

TP_TARGETS = (("mysql-state", "vs_floor", 0.8, "turns/s ≥ 0.8× the floor's (issue 21)"),
              ("async", "vs_threads", 0.8, "turns/s ≥ 0.8× 64 threads on one sync store"))


def throughput_targets(res: dict) -> list[dict]:
    out = []
    by = {s["key"]: s for s in res["systems"]}
    for key, field, limit, what in TP_TARGETS:
        s = by.get(key)
        if s and s.get(field) is not None:
            out.append({"target": f"{s['name']}: {what}", "value": s[field], "limit": limit, "met": s[field] >= limit,
                        "detail": "median of the per-round ratios: " + ", ".join(
                            f"{r:.2f}" for r in paired_ratios(res, key, field))})
    return out


def paired_ratios(res: dict, key: str, field: str) -> list[float]:
    by = {s["key"]: s for s in res["systems"]}
    ref = by.get("floor" if field == "vs_floor" else "threads")
    if not ref:
        return []
    return [a["turns_per_s"] / b["turns_per_s"] for a, b in zip(by[key]["rounds"], ref["rounds"]) if b["turns_per_s"]]


def verified_text(v: dict) -> str:
    return f"{v['ok']}/{v['sessions']}" + (" **FAILED**" if v["failures"] else "")


def cpu_text(us: Optional[float]) -> str:
    """CPU microseconds per turn; '-' where it was not measured (a local system's clients, a
    server on another machine)."""
    return "-" if us is None else fmt_us(us)


def throughput_table(res: dict) -> list[str]:
    lines = ["| system | turns/s | × reference | p50 | p99 | statements per turn | client CPU per turn | server CPU per turn"
             " | same-process turns | errors | sessions verified |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in res["systems"]:
        same = [r["same_process"] for r in s["rounds"] if r["same_process"] is not None]
        errors = sum(r["n_errors"] for r in s["rounds"])
        name = f"**{s['name']}**" if s["name"].startswith(OURS) else s["name"]
        tps = f"{s['turns_per_s']:,.0f}" if s["turns_per_s"] is not None else "-"
        st = s.get("statements_per_turn")
        ref = (f"{fmt_ratio(s['vs_threads'])} threads" if s.get("vs_threads") is not None else
               f"{fmt_ratio(s['vs_floor'])} floor" if s["key"] != "threads" else "reference")
        lines.append(f"| {name} | {tps} | {ref} | {fmt_us(s['p50_us'])} | {fmt_us(s['p99_us'])} | "
                     f"{st if st is not None else '-'} | {cpu_text(s.get('client_cpu_us'))} | "
                     f"{cpu_text(s.get('server_cpu_us'))} | {sum(same) / len(same):.0%} | {errors} | "
                     f"{verified_text(s['verified'])} |" if same else
                     f"| {name} | {tps} | - | - | - | - | - | - | - | {errors} | {verified_text(s['verified'])} |")
    return lines


def throughput_markdown(res: dict, png_name: str) -> str:
    st = res["settings"]
    out = [f"# mysql-state throughput, {res['date']} ({res['profile']} run)", "",
           f"Machine: {machine_line(res['machine'])}.", "",
           f"Reproduce: `{res['command']}` (elapsed {res['elapsed_s']:.0f} s). {st['procs']} worker processes, each "
           f"with its own client of every system, serve {st['sessions']} sessions (50-200 AgentScope-shaped messages "
           "+ a summary at the start of each round, after one untimed warm-up round); a free worker takes a random free session, so no two turns of "
           "a session overlap and most turns land on another process than the session's last one. A turn = load the "
           "session, append a user message and a reply, save. × reference: to the floor at the same concurrency (P "
           "processes); the async store to 64 threads on one sync store (both in one process). Systems interleaved round by round "
           f"({st['rounds']} rounds × {st['seconds']:g} s each, random order per round); turns/s is the median of "
           "the rounds, × floor the median of the per-round ratios, p50/p99 pool every turn. Every session is "
           "read back after each round and must hold every completed turn exactly once, in order. Statements per "
           "turn: the server's `Questions` + `Com_admin_commands` over the round / turns (reads, writes, COMMITs). "
           "CPU per turn: the worker processes' own CPU time (clients) and the server process's (from /proc) "
           "over the round / turns; on this 2-core machine the 4 workers and the server share the cores, so "
           "their sum bounds the turns per second.", "",
           f"![turns per second and p99 latency]({png_name})", "",
           "## Targets", "", "| target | measured | limit | met | detail |", "|---|---:|---:|:---:|---|"]
    for t in res.get("targets") or throughput_targets(res):
        out.append(f"| {t['target']} | {t['value']} | {t['limit']} | {'yes' if t['met'] else '**no**'} | {t['detail']} |")
    out += ["", "## Turns per second", ""] + throughput_table(res) + [""]
    notes = [f"- {s['key']}: {f}" for s in res["systems"] for f in s["verified"]["failures"][:3]]
    notes += [f"- {s['key']} round {r['round']}: `{e}`" for s in res["systems"] for r in s["rounds"] for e in r["errors"]]
    notes += [f"- {name}: could not run: `{err}`" for name, err in res["errors"].items()]
    if notes:
        out += ["## Failures and errors", ""] + notes + [""]
    out += ["Versions: " + ", ".join(f"{k} {v}" for k, v in res["machine"]["packages"].items()) + ".", ""]
    return "\n".join(out)


def plot_throughput(res: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = [s for s in res["systems"] if s["turns_per_s"] is not None]
    names = [s["name"] for s in systems]
    ys = range(len(systems))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 0.55 * len(systems) + 1.8), sharey=True)
    colors = ["tab:blue" if s["name"].startswith(OURS) else "grey" if s["kind"] == "floor" else "tab:orange"
              for s in systems]
    ax1.barh(ys, [s["turns_per_s"] for s in systems], color=colors)
    for y, s in zip(ys, systems):
        ax1.plot([r["turns_per_s"] for r in s["rounds"]], [y] * len(s["rounds"]), "k.", markersize=4)
    ax1.set_xlabel("turns/s (bar: median of the rounds; dots: each round)")
    ax2.barh([y + 0.2 for y in ys], [s["p99_us"] / 1000 for s in systems], height=0.4, color=colors, label="p99")
    ax2.barh([y - 0.2 for y in ys], [s["p50_us"] / 1000 for s in systems], height=0.4, color=colors, alpha=0.45,
             label="p50")
    ax2.set_xscale("log")
    ax2.set_xlabel("latency per turn, ms, log scale (dark: p99, light: p50)")
    ax1.set_yticks(list(ys), names, fontsize=8)
    ax1.invert_yaxis()
    for ax in (ax1, ax2):
        ax.grid(True, axis="x", alpha=0.3)
    st = res["settings"]
    fig.suptitle(f"One agent turn (load, append 2 messages, save), {st['procs']} processes × {st['sessions']} "
                 f"sessions, {res['date'][:10]} ({res['machine']['nproc']} cores, {res['machine']['server']})",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_csv(res: dict, path: str) -> None:
    import csv

    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["system", "kind", "turns_per_s", "vs_floor", "p50_us", "p99_us", "statements_per_turn", "turns",
                    "rounds", "sessions_verified", "verification_failures"])
        for s in res["systems"]:
            w.writerow([s["name"], s["kind"], s["turns_per_s"], s["vs_floor"], s["p50_us"], s["p99_us"],
                        s.get("statements_per_turn"), s["turns"], len(s["rounds"]), s["verified"]["ok"],
                        len(s["verified"]["failures"])])


def write_throughput(res: dict, folder: str, stem: str) -> list[str]:
    paths = {ext: os.path.join(folder, f"{stem}.{ext}") for ext in ("json", "csv", "md", "png")}
    res = dict(res, targets=throughput_targets(res))
    with open(paths["json"], "w") as f:
        json.dump(res, f, indent=1)
    write_csv(res, paths["csv"])
    plot_throughput(res, paths["png"])
    with open(paths["md"], "w") as f:
        f.write(throughput_markdown(res, os.path.basename(paths["png"])))
    return list(paths.values())


if __name__ == "__main__":  # re-render a saved run: python benchmarks/report.py results/<stem>.json
    import sys

    src = sys.argv[1]
    with open(src) as f:
        saved = json.load(f)
    write = write_throughput if saved.get("kind") == "throughput" else write_all
    print(write(saved, os.path.dirname(os.path.abspath(src)), os.path.splitext(os.path.basename(src))[0]))
