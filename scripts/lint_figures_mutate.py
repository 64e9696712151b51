#!/usr/bin/env python3
"""How strong scripts/lint_figures.py is: each figure it checks in README.md and
bench/README.md is raised by 13% (at its own precision, at least one unit of its last digit),
one at a time, and the lint run on the document so changed; a figure is caught when the lint
reports a problem it did not report on the unchanged document. Figures the lint exempts by
rule (a target, a sentence that says "not stored") and zeros are counted, not mutated.

  scripts/lint_figures_mutate.py [--out FILE] [--min RATE] [--missed]

Prints the catch rate per document and overall (with --missed, every figure that got
through); exits 1 when the overall rate is below --min (default 0: report only).
"""

import argparse
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lint_figures  # noqa: E402

DOCUMENTS = ["README.md", os.path.join("bench", "README.md")]
RAISE = 1.13


def mutated(figure):
    """`figure` raised by RAISE, written as it is written (decimals, thousands commas)."""
    places = len(figure.split(".")[1]) if "." in figure else 0
    value = float(figure.replace(",", ""))
    new = round(value * RAISE, places)
    if abs(new - value) < 10**-places / 2:
        new = value + 10**-places
    text = f"{new:,.{places}f}" if "," in figure else f"{new:.{places}f}"
    return text


def run(root):
    """(per-document counts, missed figures)."""
    results, missed = {}, []
    for rel in DOCUMENTS:
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            lines = f.read().split("\n")
        baseline = set(lint_figures.check_lines(lines, rel, root))
        # The figures the lint lets through only because scripts/lint_figures_known.txt
        # lists them (they do not trace): counted apart.
        raw = lint_figures.check_lines(lines, rel, root, use_known=False)
        known = {p.split(": the figure '")[0] + "'" + p.split(": the figure '")[1].split("'")[0] for p in raw if ": the figure '" in p}
        figs = lint_figures.document_figures(lines, rel, root)
        counts = dict.fromkeys(("figures", "exempt", "zero", "mutated", "caught", "known", "known caught"), 0)
        counts["figures"] = len(figs)
        for fig in figs:
            if fig.exempt:
                counts["exempt"] += 1
                continue
            if float(fig.text.replace(",", "")) == 0:
                counts["zero"] += 1
                continue
            is_known = f"{rel}:{fig.line + 1}'{fig.shown}" in known
            line = lines[fig.line]
            assert line[fig.col : fig.col + len(fig.text)] == fig.text, (rel, fig.line, fig.text)
            new = mutated(fig.text)
            changed = list(lines)
            changed[fig.line] = line[: fig.col] + new + line[fig.col + len(fig.text) :]
            caught = bool(set(lint_figures.check_lines(changed, rel, root)) - baseline)
            if is_known:
                counts["known"] += 1
                counts["known caught"] += caught
                continue
            counts["mutated"] += 1
            counts["caught"] += caught
            digits = "1 digit" if len(fig.text.replace(",", "").replace(".", "").lstrip("0")) < 2 else "2+ digits"
            counts[digits] = counts.get(digits, 0) + 1
            counts[digits + " caught"] = counts.get(digits + " caught", 0) + caught
            if not caught:
                fig.text, text = new, fig.text
                how = "on a labelled line" if lint_figures.on_labelled_line(fig) == "label" else "derived"
                fig.text = text
                missed.append(f"{rel}:{fig.line + 1}: {fig.text} -> {new} ({fig.shown}): {how}")
        counts["baseline problems"] = len(baseline)
        results[rel] = counts
    return results, missed


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="also write the report to this file")
    parser.add_argument("--min", type=float, default=0.0, help="fail below this catch rate (0-1)")
    parser.add_argument("--missed", action="store_true", help="list every figure not caught")
    args = parser.parse_args(argv[1:])
    root = os.environ.get("GUESTFLOW_ROOT") or os.path.dirname(
        os.path.dirname(os.path.abspath(__file__))
    )
    started = time.time()
    results, missed = run(root)
    commit = subprocess.run(
        ["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", root, "status", "--porcelain", "--", "scripts/lint_figures.py", *DOCUMENTS],
        capture_output=True, text=True,
    ).stdout.strip()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    out = [
        f"# scripts/lint_figures_mutate.py: each checked figure +{round((RAISE - 1) * 100)}%, one at a time",
        f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, host {platform.node()}, tree {commit}"
        f"{' (lint or documents changed since)' if dirty else ''}, load {load}, {time.time() - started:.1f} s",
    ]
    total = dict.fromkeys(("mutated", "caught", "known", "known caught"), 0)
    for rel, c in results.items():
        rate = c["caught"] / c["mutated"] if c["mutated"] else 1.0
        out.append(
            f"{rel:16} figures {c['figures']:4}  exempt {c['exempt']:3} (target or not stored)  zero {c['zero']:2}"
            f"  listed as not tracing {c['known']:3} (caught {c['known caught']})"
            f"  tracing: mutated {c['mutated']:4} caught {c['caught']:4} rate {rate:.3f}"
            f"  (lint problems before mutating: {c['baseline problems']})"
        )
        for k in total:
            total[k] += c[k]
    rate = total["caught"] / total["mutated"] if total["mutated"] else 1.0
    verdict = "met" if rate >= 0.9 else "MISSED"
    for digits in ("1 digit", "2+ digits"):  # a one-digit figure +13% is +1 in its digit: 2x, 3 ms
        n = sum(c.get(digits, 0) for c in results.values())
        k = sum(c.get(digits + " caught", 0) for c in results.values())
        out.append(f"  figures of {digits}: caught {k} of {n} = {k / (n or 1):.3f}")
    out.append(
        f"overall, figures that trace: caught {total['caught']} of {total['mutated']} = {rate:.3f}"
        f" (target >= 0.90: {verdict})"
    )
    everything = (total["caught"] + total["known caught"]) / ((total["mutated"] + total["known"]) or 1)
    out.append(
        f"with the {total['known']} listed in {lint_figures.KNOWN} (a changed one is no longer"
        f" the listed one): {total['caught'] + total['known caught']} of"
        f" {total['mutated'] + total['known']} = {everything:.3f}"
    )
    if args.missed or args.out:
        out.append(f"not caught ({len(missed)}):")
        out += ["  " + m for m in missed]
    text = "\n".join(out) + "\n"
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "x", encoding="utf-8") as f:  # never over a stored result
            f.write(text)
    return 1 if rate < args.min else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
