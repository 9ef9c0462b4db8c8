"""The one shape every data source returns, so the datamodule never branches on the source."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LabeledTexts:
    """Texts with integer labels 0..C-1.

    `label_names[c]` names label c; `domains` is one tag per text when the source has one;
    `stats` counts what loading did (raw lines, dropped rows...) and goes into summary.json;
    `features` holds per-text 0/1 flags a source planted (the synthetic task), for checks.
    """

    texts: list[str]
    labels: list[int]
    label_names: list[str]
    domains: list[str] | None = None
    stats: dict[str, int] = field(default_factory=dict)
    features: dict[str, list[int]] | None = None

    def __post_init__(self) -> None:
        n = len(self.texts)
        if len(self.labels) != n:
            raise ValueError(f"{n} texts but {len(self.labels)} labels")
        if self.domains is not None and len(self.domains) != n:
            raise ValueError(f"{n} texts but {len(self.domains)} domains")
        for name, flags in (self.features or {}).items():
            if len(flags) != n:
                raise ValueError(f"{n} texts but {len(flags)} values of feature {name!r}")
        bad = [y for y in self.labels if not 0 <= y < len(self.label_names)]
        if bad:
            raise ValueError(f"labels must lie in [0, {len(self.label_names)}), got {bad[:5]}")

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, indices: list[int]) -> "LabeledTexts":
        """The rows at `indices` (same label names; stats are the parent's)."""

        def pick(values: list) -> list:
            return [values[i] for i in indices]

        return LabeledTexts(
            texts=pick(self.texts),
            labels=pick(self.labels),
            label_names=list(self.label_names),
            domains=None if self.domains is None else pick(self.domains),
            stats=dict(self.stats),
            features=None if self.features is None else {k: pick(v) for k, v in self.features.items()},
        )
