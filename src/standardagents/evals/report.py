"""An experiment's report as files and as a comparison: the JSON report, a JUnit XML for CI,
and what changed against an earlier run's report (regressions first)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from .datasets import DatasetError

__all__ = ["compare", "load_report", "to_junit", "write_json", "write_junit"]


def write_json(report: dict[str, Any], path: str | Path) -> None:
    Path(path).write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")


def load_report(path: str | Path) -> dict[str, Any]:
    """An earlier run's JSON report (raises DatasetError naming the file when unreadable)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise DatasetError(f"cannot read the baseline report: {exc.strerror or exc}", source=str(path)) from None
    except ValueError as exc:
        raise DatasetError(f"the baseline report is not JSON: {exc}", source=str(path)) from None
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise DatasetError("not an eval report (no 'cases' list)", source=str(path))
    return data


def _failure_text(case: dict[str, Any]) -> str:
    if case.get("error"):
        return str(case["error"])
    return "; ".join(f"{s['name']}: {s.get('reason') or 'failed'}" for s in case["scores"] if not s["passed"])


def to_junit(report: dict[str, Any]) -> ET.ElementTree:
    """One ``testsuite`` per dataset, one ``testcase`` per case run (repeats named ``#n``)."""
    suites = ET.Element("testsuites", name="standardagents eval", tests=str(len(report["cases"])),
                        failures=str(report["failed"]))
    by_dataset: dict[str, list[dict[str, Any]]] = {}
    for case in report["cases"]:
        by_dataset.setdefault(case["dataset"], []).append(case)
    for dataset, cases in by_dataset.items():
        suite = ET.SubElement(suites, "testsuite", name=dataset, tests=str(len(cases)),
                              failures=str(sum(1 for c in cases if not c["passed"] and not c.get("error"))),
                              errors=str(sum(1 for c in cases if c.get("error"))),
                              time=f"{sum(c.get('latencyMs') or 0 for c in cases) / 1000:.3f}")
        for case in cases:
            name = case["name"] + (f" #{case['repeat'] + 1}" if case.get("repeat") else "")
            item = ET.SubElement(suite, "testcase", classname=dataset, name=name,
                                 time=f"{(case.get('latencyMs') or 0) / 1000:.3f}")
            if case.get("error"):
                ET.SubElement(item, "error", message=_failure_text(case)).text = _failure_text(case)
            elif not case["passed"]:
                ET.SubElement(item, "failure", message=_failure_text(case)).text = _failure_text(case)
            scores = ", ".join(f"{s['name']}={s['score']:.2f}" for s in case["scores"])
            ET.SubElement(item, "system-out").text = (
                f"scores: {scores}\ntokens: {case.get('tokens')}\ncost: {case.get('cost')}\n"
                f"reply: {case.get('reply') or ''}")
    return ET.ElementTree(suites)


def write_junit(report: dict[str, Any], path: str | Path) -> None:
    tree = to_junit(report)
    ET.indent(tree)
    tree.write(str(path), encoding="utf-8", xml_declaration=True)


def _key(case: dict[str, Any]) -> tuple[str, str]:
    return (str(case["dataset"]), str(case["name"]))


def _aggregate(report: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """Each case's runs folded into one: passed only when every repeat passed; mean scores."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for case in report["cases"]:
        entry = out.setdefault(_key(case), {"passed": True, "scores": {}, "runs": 0})
        entry["runs"] += 1
        entry["passed"] = entry["passed"] and bool(case["passed"])
        for s in case.get("scores") or ():
            entry["scores"].setdefault(s["name"], []).append(float(s["score"]))
    for entry in out.values():
        entry["scores"] = {k: sum(v) / len(v) for k, v in entry["scores"].items()}
    return out


def compare(current: dict[str, Any], baseline: dict[str, Any], *, tolerance: float = 1e-9) -> list[dict[str, Any]]:
    """What changed from ``baseline`` to ``current``, one entry per case that changed, sorted
    regressions first (a case that now fails, then scores that dropped), then fixes, new and
    removed cases. Each entry: ``kind``, ``dataset``, ``name``, ``detail``."""
    now, before = _aggregate(current), _aggregate(baseline)
    changes: list[dict[str, Any]] = []
    order = {"regression": 0, "score_down": 1, "fixed": 2, "score_up": 3, "new": 4, "removed": 5}
    for key, entry in now.items():
        old = before.get(key)
        if old is None:
            changes.append({"kind": "new", "dataset": key[0], "name": key[1],
                            "detail": "passes" if entry["passed"] else "fails"})
            continue
        if old["passed"] and not entry["passed"]:
            changes.append({"kind": "regression", "dataset": key[0], "name": key[1], "detail": "passed, now fails"})
        elif not old["passed"] and entry["passed"]:
            changes.append({"kind": "fixed", "dataset": key[0], "name": key[1], "detail": "failed, now passes"})
        for name, value in entry["scores"].items():
            prev = old["scores"].get(name)
            if prev is None or abs(value - prev) <= tolerance:
                continue
            changes.append({"kind": "score_down" if value < prev else "score_up", "dataset": key[0], "name": key[1],
                            "detail": f"{name} {prev:.2f} -> {value:.2f}"})
    for key in before:
        if key not in now:
            changes.append({"kind": "removed", "dataset": key[0], "name": key[1], "detail": "not run"})
    changes.sort(key=lambda c: (order[c["kind"]], c["dataset"], c["name"]))
    return changes
