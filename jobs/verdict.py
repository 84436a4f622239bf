"""From raw samples to an experiment status. Pure: RawResult + config in, Judgement out."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .config import TargetConfig
from .model import MetricResult, Status
from .spec import RawResult
from .stats import compare, cv_pct, sanity_problems


@dataclass
class Judgement:
    status: Status
    reason: str
    metrics: list[MetricResult] = field(default_factory=list)
    remeasure: bool = False        # anomalous spread: measure once more before deciding

    def metric_dicts(self) -> list[dict]:
        return [asdict(m) for m in self.metrics]


def compare_all(raw: RawResult, config: TargetConfig, floor_pct: float) -> list[MetricResult]:
    results = []
    for metric in config.metrics:
        base = raw.base.values.get(metric.name, [])
        head = raw.head.values.get(metric.name, [])
        if not base or not head:
            continue
        results.append(compare(
            base, head, direction=metric.direction, alpha=config.thresholds.alpha, floor_pct=floor_pct,
            base_order=raw.base.order, head_order=raw.head.order,
            base_probe=raw.base.probe or None, head_probe=raw.head.probe or None, name=metric.name))
    return results


def baseline_problems(base_values: dict[str, list[float]], config: TargetConfig) -> list[str]:
    """The config's sanity rules on the baseline's samples (a broken parser shows up here)."""
    return sanity_problems(base_values, max_spread=config.thresholds.max_spread,
                           inverse_pairs=config.sanity.inverse_pairs)


def judge(raw: RawResult, config: TargetConfig, floor_pct: float, *, remeasured: bool = False) -> Judgement:
    if raw.status != "ok":
        return Judgement(Status(raw.status), raw.reason)
    insane = baseline_problems(raw.base.values, config)
    if insane:
        return Judgement(Status.NOISE, "baseline failed its sanity check (a broken benchmark parser?): "
                         + "; ".join(insane))
    primary = config.primary.name
    anomalies = [f"{arm} CV {cv:.1f}%" for arm, values in (("baseline", raw.base.values.get(primary)),
                                                           ("candidate", raw.head.values.get(primary)))
                 if values and (cv := cv_pct(values)) > config.thresholds.max_cv_pct]
    results = compare_all(raw, config, floor_pct)
    if anomalies:
        if not remeasured:
            return Judgement(Status.NOISE, "anomalous spread: " + ", ".join(anomalies), results, remeasure=True)
        return Judgement(Status.NOISE, f"still anomalous after a re-measure ({', '.join(anomalies)}; "
                         f"limit {config.thresholds.max_cv_pct:g}%)", results)
    by_name = {r.name: r for r in results}
    main = by_name.get(primary)
    if main is None:
        return Judgement(Status.CRASH, f"primary metric {primary} has no samples", results)
    if main.verdict == "untrusted":
        return Judgement(Status.NOISE, f"{primary}: {main.note}", results)
    losses = [r for r in results if r.verdict == "loss" and r.name != primary]
    if main.verdict == "win":
        if losses:
            worst = ", ".join(f"{r.name} {r.delta_pct:+.1f}% (p={r.p_value:.3f})" for r in losses)
            return Judgement(Status.DISCARD, f"{primary} {main.delta_pct:+.1f}% but regresses {worst}", results)
        return Judgement(Status.KEEP, f"{primary} {main.delta_pct:+.1f}% (p={main.p_value:.3g}, "
                         f"floor {floor_pct:.1f}%)", results)
    if main.verdict == "loss":
        return Judgement(Status.DISCARD, f"{primary} slower: {main.delta_pct:+.1f}% (p={main.p_value:.3g})", results)
    if main.p_value < config.thresholds.alpha:
        # Statistically clear but smaller than this machine's A/A noise floor: not a win here.
        return Judgement(Status.DISCARD, f"{primary} {main.delta_pct:+.1f}% (p={main.p_value:.3g}) is below the "
                         f"{floor_pct:.1f}% effect floor set by this machine's A/A noise", results)
    return Judgement(Status.DISCARD, f"{primary}: no detectable difference ({main.delta_pct:+.1f}%, "
                     f"p={main.p_value:.2f}, MDE {main.mde_pct:.1f}%)", results)
