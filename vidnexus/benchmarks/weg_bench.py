"""WEG specialization on skewed streams (the protocol of Table 5.2 of the reference, on the
project's 120-class glyph task).

Streams deliver one input every 1/6 s. A segment of a trace draws its inputs with probability p
from n dominant classes (chosen at random per segment, uniform among them) and otherwise from the
other classes; "random" is uniform over all classes. For every input the oracle's prediction and
each compact template's features come from the real models on real rendered test images; the cost
of an input is the measured batch-1 cost of the models WEG ran on it (the oracle for window inputs,
fall-throughs and audits; the compact model for every specialized input), plus the measured time of
every retraining (a head trained earlier in the stream for the same dominant set is reused at no
cost). Without WEG every input costs one oracle call.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from vidnexus.benchmarks.machine import machine_info

__all__ = ["run", "make_trace", "run_trace"]

RATE_HZ = 6.0


def make_trace(segments: list[tuple[int, float] | None], seg_inputs: int, classes: int,
               rng: np.random.Generator) -> np.ndarray:
    """True labels: for each segment, ``(n, p)`` (a new random dominant set) or ``None`` (uniform)."""
    out = []
    for seg in segments:
        if seg is None:
            out.append(rng.integers(0, classes, seg_inputs))
            continue
        n, p = seg
        dom = rng.choice(classes, n, replace=False)
        rest = np.setdiff1d(np.arange(classes), dom)
        pick = rng.random(seg_inputs) < p
        out.append(np.where(pick, rng.choice(dom, seg_inputs), rng.choice(rest, seg_inputs)))
    return np.concatenate(out)


def run_trace(labels: np.ndarray, pool: dict[str, Any], params: Any, templates: list[tuple[str, Any]],
              a_star: float, costs: dict[str, float], seed: int) -> dict[str, Any]:
    """Drive a fresh WEG state machine over ``labels``; returns accuracy, cost and WEG metrics."""
    from vidnexus.specialization.weg import OTHER, Weg
    from vidnexus.specialization.training import specialize

    rng = np.random.default_rng(seed)
    weg = Weg(params, templates, a_star, seed=seed)
    heads: dict[str, Any] = {}
    head = None
    correct = oracle_correct = 0  # WEG's answers and the oracle's, on the same images
    cost_ms = 0.0
    retrain_s: list[float] = []
    reused = 0
    chosen = {name: 0 for name, _ in templates}  # specializations per template (Eq. 5.1's pick)
    for y in labels:
        i = int(rng.choice(pool["by_class"][int(y)]))
        oracle = int(pool["oracle_pred"][i])
        oracle_correct += oracle == y
        act = weg.next_action()
        if act.kind == "specialize":
            dom = tuple(sorted(int(c) for c in act.dominant))
            key = f"{act.template}:{dom}"
            chosen[act.template] += 1
            if key in heads:           # this stream specialized to the same D before: reuse the head
                head = heads[key]
                reused += 1
            else:
                head = specialize(pool["train_cache"][act.template], dom, seed=len(retrain_s))
                retrain_s.append(head.train_seconds)
                cost_ms += head.train_seconds * 1000
                heads[key] = head
            weg.specialized(act.dominant, act.template)
            act = weg.next_action()
        if act.kind == "oracle":
            cost_ms += costs["oracle"]
            weg.observe_oracle(str(oracle))
            correct += oracle == y
            continue
        cost_ms += costs[act.template]
        assert head is not None
        c = int(head.predict(pool["feats"][act.template][i : i + 1])[0])
        compact = str(c) if c >= 0 else OTHER
        if c < 0 or act.audit:
            cost_ms += costs["oracle"]
            weg.observe_cascade(compact, str(oracle))
            out = oracle if c < 0 else c
        else:
            weg.observe_cascade(compact, None)
            out = c
        correct += out == y
    m = weg.metrics
    n = len(labels)
    return {
        "inputs": n, "accuracy": correct / n, "oracle_accuracy": oracle_correct / n, "cost_ms_per_input": cost_ms / n,
        "special_rate": round(m.special_rate, 4), "cascade_rate": round(m.cascade_rate, 4),
        "specializations": m.specializations, "specializations_by_template": chosen, "heads_reused": reused,
        "epochs": m.epochs,
        "exits_accuracy": m.exits_accuracy, "exits_false_positive": m.exits_fp,
        "mean_dominant": round(float(np.mean(m.dominant_sizes)), 2) if m.dominant_sizes else 0,
        "mean_window": round(float(np.mean(m.window_sizes)), 1) if m.window_sizes else 0,
        "mean_estimated_accuracy": round(float(np.mean(m.estimated)), 4) if m.estimated else None,
        "audited_accuracy": round(m.audited_accuracy, 4) if m.audited_accuracy is not None else None,
        "audits": m.audits,
        "retrain_s_mean": round(float(np.mean(retrain_s)), 3) if retrain_s else 0.0,
        "retrain_s_max": round(float(np.max(retrain_s)), 3) if retrain_s else 0.0,
    }


def run(quick: bool, console: Any) -> dict[str, Any]:
    import torch
    from rich.table import Table

    from vidnexus.config import load_settings
    from vidnexus.specialization.weg import AccuracyModel, WegParams
    from vidnexus.training import glyphs as g
    from vidnexus.specialization.training import accuracy_terms, features_of

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    gm = g.load_or_train(load_settings().data_dir / "models", quick=quick)
    setup: dict[str, Any] = {"models": gm.report, "load_or_train_s": round(time.perf_counter() - t0, 1)}
    per_class = gm.report["train_per_class"]
    xs, ys = g.render_dataset(per_class, seed=1)
    vx, vy = g.render_dataset(g.VAL_PER_CLASS, seed=2)
    px, py = g.render_dataset(10 if quick else 25, seed=7)
    templates = ["compact_a", "compact_b"]
    oracle = gm.models["oracle"]
    a_star = float((g.predict(oracle, vx) == vy).mean())
    costs = {a: round(g.cost_per_input_ms(gm.models[a], 1), 4) for a in g.ARCHS}
    pool: dict[str, Any] = {
        "by_class": [np.flatnonzero(py == c) for c in range(g.N_CLASSES)],
        "oracle_pred": g.predict(oracle, px),
        "feats": {}, "train_cache": {},
    }
    acc_models = []
    tables: dict[str, Any] = {}
    sizes = (1, 2, 3, 5, 8, 10, 15, 20, 30)
    for t in templates:
        pool["train_cache"][t] = features_of(gm.models[t], xs, ys)
        val = features_of(gm.models[t], vx, vy)
        pool["feats"][t] = features_of(gm.models[t], px, py).feats
        terms_by_n = {n: accuracy_terms(pool["train_cache"][t], val, n, trials=4 if quick else 10, classes=g.N_CLASSES)
                      for n in sizes}
        tables[t] = {str(n): [round(v, 4) for v in terms] for n, terms in terms_by_n.items()}
        acc_models.append((t, AccuracyModel(terms_by_n)))
    # Cheapest template first (template selection takes the first good enough).
    acc_models.sort(key=lambda tm: costs[tm[0]])
    setup.update({"oracle_val_accuracy": round(a_star, 4), "cost_ms_batch1": costs, "eq51_terms": tables,
                  "setup_s": round(time.perf_counter() - t0, 1)})

    seg = int((60 if quick else 300) * RATE_HZ)        # 1-minute (quick) or 5-minute segments
    nseg = 2 if quick else 4
    rows_spec: list[tuple[str, list[tuple[int, float] | None], int]] = [
        ("(5, .8)", [(5, 0.8)] * nseg, seg),
        ("(5, .9)", [(5, 0.9)] * nseg, seg),
        ("(10, .9)", [(10, 0.9)] * nseg, seg),
        ("(15, .9)", [(15, 0.9)] * nseg, seg),
        ("random", [None] * nseg, seg),
        ("(5, .9) then random", [(5, 0.9), None], seg),
        ("(5, .9) new D every 10 s", [(5, 0.9)] * (nseg * seg // 60), 60),
        ("(5, .9) new D every 20 s", [(5, 0.9)] * (nseg * seg // 120), 120),
        ("(5, .9) new D every 30 s", [(5, 0.9)] * (nseg * seg // 180), 180),
    ]
    # The reference's τ_a is +0.05 for a 69%-accurate object oracle and −0.05 for a 96% face oracle;
    # with a 99% oracle we ask for the cascade to stay within one point of it.
    params = WegParams(tau_a=-0.01)
    results = []
    for k, (name, segments, length) in enumerate(rows_spec):
        rng = np.random.default_rng(100 + k)
        labels = make_trace(segments, length, g.N_CLASSES, rng)
        r = run_trace(labels, pool, params, acc_models, a_star, costs, seed=k)
        base_acc = float(r["oracle_accuracy"])
        r.update({"trace": name, "oracle_accuracy": round(base_acc, 4), "oracle_cost_ms": costs["oracle"],
                  "speedup": round(costs["oracle"] / r["cost_ms_per_input"], 3),
                  "accuracy_delta_points": round(float(100 * (r["accuracy"] - base_acc)), 2)})
        r["accuracy"] = round(float(r["accuracy"]), 4)
        r["cost_ms_per_input"] = round(r["cost_ms_per_input"], 4)
        results.append(r)

    # The game app offers WEG one template (compact_a): the same traces with only that one, to show
    # what the second template buys (Eq. 5.1 picks compact_b only where compact_a misses the bar).
    # By name, not the cheaper one measured here: on a busy 2-core box the two templates' measured
    # costs (0.16 and 0.23 ms) swapped once (a make test of 2026-12-02), and the rows were compact_b's.
    from vidnexus.apps.game.models import TEMPLATE

    game_template = [tm for tm in acc_models if tm[0] == TEMPLATE]
    one_template = []
    for k, (name, segments, length) in enumerate(rows_spec):
        if name not in ("(5, .8)", "(5, .9)", "(10, .9)", "(15, .9)"):
            continue
        labels = make_trace(segments, length, g.N_CLASSES, np.random.default_rng(100 + k))
        r = run_trace(labels, pool, params, game_template, a_star, costs, seed=k)
        base_acc = float(r["oracle_accuracy"])
        one_template.append({"trace": name, "template": TEMPLATE,
                             "speedup": round(costs["oracle"] / r["cost_ms_per_input"], 3),
                             "accuracy_delta_points": round(float(100 * (r["accuracy"] - base_acc)), 2),
                             "specializations": r["specializations"]})

    table = Table("trace", "acc. %: oracle → WEG", "ms/input: oracle → WEG", "speedup", "compact alone",
                  "specializations (per template)", "mean |D|", title=f"WEG on the glyph task ({g.N_CLASSES} classes)")
    for r in results:
        table.add_row(r["trace"], f"{100 * r['oracle_accuracy']:.1f} → {100 * r['accuracy']:.1f}",
                      f"{r['oracle_cost_ms']:.2f} → {r['cost_ms_per_input']:.2f}", f"{r['speedup']:.2f}×",
                      f"{100 * r['special_rate']:.0f}%",
                      f"{r['specializations']} ({', '.join(f'{t} {n}' for t, n in r['specializations_by_template'].items())})",
                      str(r["mean_dominant"]))
    console.print(table)
    console.print(f"models: { {a: m['val_accuracy'] for a, m in gm.report['models'].items()} } validation accuracy; "
                  f"cost per input at batch 1: {costs} ms")
    by = {r["trace"]: r for r in results}
    summary = {
        "speedup_5_0.9": by["(5, .9)"]["speedup"],
        "acc_delta_5_0.9": float(by["(5, .9)"]["accuracy_delta_points"]),
        "speedup_random": by["random"]["speedup"],
        "acc_delta_random": float(by["random"]["accuracy_delta_points"]),
        "retrain_s_max": max(r["retrain_s_max"] for r in results),
        "specializations_by_template": {t: sum(r["specializations_by_template"][t] for r in results)
                                        for t, _ in acc_models},
        "one_template": one_template,
    }
    console.print(f"summary: {summary}")
    return {"name": "weg", "machine": machine_info(),
            "config": {"quick": quick, "rate_hz": RATE_HZ, "segment_inputs": seg, "segments": nseg,
                       "params": params.__dict__, "templates": templates, "torch_threads": 1, **setup},
            "results": results, "summary": summary}
