"""The judges section and the judge-check report as text tables: (title, header, body) triples
that the tables code renders as md or latex like its own tables."""
from __future__ import annotations

from typing import Callable

from memaudit.types import CATEGORIES


def judges_tables(section: dict, num: Callable, ci: Callable) -> list[tuple[str, list[str], list[list[str]]]]:
    agreement = section["agreement"]
    if agreement is None:
        summary = [["agreement", section["agreement_reason"]]]
    else:
        summary = [["Krippendorff's α (ordinal)", f"{num(agreement['alpha_ordinal'])} {ci(agreement['alpha_ci'])}"],
                   ["exact agreement (all judges)", num(agreement["exact"])],
                   ["within one level", num(agreement["within_one"])]]
        summary += [[f"α {c}", num(agreement["alpha_by_category"].get(c))] for c in CATEGORIES]
        summary += [[f"κ (quadratic) {p['a']} vs {p['b']}", f"{num(p['kappa_quadratic'])}; exact {num(p['exact'])}"]
                    for p in agreement["pairs"]]
    human = section.get("panel_human")
    if human is not None:
        summary.append(["panel vs human", _human(human, num)])
    out = [(f"Judges — panel {', '.join(section['panel']) or 'n/a'}", ["measure", "value"], summary)]
    header = ["judge", "B full-store", "B top-k", "positive pass", "negative false pass", "flag", "retest changed",
              "dropped", "vs human"]
    body = [[j["model"], num(j["B_dump_all"]), num(j["B_retrieve"]),
             _with_ci(j["positive_pass"], j.get("positive_pass_ci95"), num, ci),
             _with_ci(j["negative_false_pass"], j.get("negative_false_pass_ci95"), num, ci), j["flag"] or "n/a",
             num(j["retest_changed"]), num(j["dropped"]), _human(j["human"], num)] for j in section["per_judge"]]
    out.append(("Judges — per judge (B under this judge; control answers of judge-check; test–retest; human grades)",
                header, body))
    return out


def check_tables(summary: dict, num: Callable, ci: Callable) -> list[tuple[str, list[str], list[list[str]]]]:
    """judge-check's report: per judge overall and per category."""
    t = summary["thresholds"]
    header = ["judge", "category", "positives", "positive pass", "negatives", "negative false pass", "failed", "flag",
              "retest changed", "retest mean |Δ|"]
    body = []
    for name, j in summary["judges"].items():
        body.append([name, "all", num(j["positives"]), _with_ci(j["positive_pass"], j["positive_pass_ci95"], num, ci),
                     num(j["negatives"]), _with_ci(j["negative_false_pass"], j["negative_false_pass_ci95"], num, ci),
                     num(j["failed"]), j["flag"] or "n/a", num(j["retest_changed"]), num(j["retest_mean_abs_change"])])
        for c, r in j["categories"].items():
            if r["positives"] or r["negatives"]:
                body.append([name, c, num(r["positives"]), _with_ci(r["positive_pass"], r["positive_pass_ci95"], num, ci),
                             num(r["negatives"]),
                             _with_ci(r["negative_false_pass"], r["negative_false_pass_ci95"], num, ci),
                             num(r["failed"]), "", "", ""])
    title = (f"judge-check — control answers (lenient: false pass > {t['max_false_pass']}; harsh: positive pass "
             f"< {t['min_pass']}; 95% Wilson intervals)")
    return [(title, header, body)]


def _with_ci(value, interval, num, ci) -> str:
    return "n/a" if value is None else f"{num(value)} {ci(interval)}"


def _human(found: dict | None, num) -> str:
    if found is None:
        return "n/a"
    return f"κ {num(found['kappa_quadratic'])}, exact {num(found['exact'])}, ±1 {num(found['within_one'])} (n={found['n']})"
