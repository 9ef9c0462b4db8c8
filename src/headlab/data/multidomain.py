"""A seeded multi-domain task: the domains share one text distribution but label it by DIFFERENT
rules, each needing a different attention pattern, so per-domain Q/K/V has something to separate.

Every text is a `headlab.data.synthetic` text (its three planted features: `previous`, a
previous-token feature read by attending from each marker to the letter before it;
`first_last`, the last letter equals the first, read by attention between the two ends;
`exclaim`, the final punctuation). Domain d's label is ONE feature, `domains[d]` (default:
domain "previous" and domain "first_last"), so a text's label depends on its domain. With
`mark_domain` (default) each text starts with its domain's tag letter (upper case, "P" / "F"),
so a shared model can tell the domains apart from the text alone; without it only the domain id
can. Domain d's `n` texts are `generate_synthetic(n, seed=seed * 1000 + d)`: seeded, and adding
a domain leaves the others' texts unchanged. Labels are balanced (p = 0.5) in every domain.
"""

from __future__ import annotations

from headlab.config.values import check_int
from headlab.data.labeled import LabeledTexts
from headlab.data.synthetic import FEATURES, generate_synthetic
from headlab.errors import ConfigError

TAGS = {"previous": "P", "first_last": "F", "exclaim": "E"}


def generate_multidomain(n: int = 3000, seed: int = 0, domains: list[str] | tuple[str, ...] = ("previous", "first_last"),
                         mark_domain: bool = True, min_len: int = 16, max_len: int = 32) -> LabeledTexts:
    """`n` texts per domain; `domains` holds each text's domain (a feature name), `features` its flags."""
    domains = _check_args(n, domains, mark_domain)
    texts, labels, tags = [], [], []
    flags: dict[str, list[int]] = {name: [] for name in FEATURES}
    for index, domain in enumerate(domains):
        part = generate_synthetic(n=n, seed=seed * 1000 + index, min_len=min_len, max_len=max_len)
        prefix = TAGS[domain] if mark_domain else ""
        texts += [prefix + text for text in part.texts]
        labels += part.features[domain]
        tags += [domain] * n
        for name in FEATURES:
            flags[name] += part.features[name]
    stats = {"n_examples": len(texts), "n_positive": sum(labels), "n_domains": len(domains)}
    return LabeledTexts(texts=texts, labels=labels, label_names=["0", "1"], domains=tags, stats=stats, features=flags)


def _check_args(n: int, domains, mark_domain: bool) -> list[str]:
    check_int("data.multidomain.n", n, 1)
    names = list(domains) if not isinstance(domains, str) else [domains]
    if len(names) < 2 or len(set(names)) != len(names) or not set(names) <= set(FEATURES):
        raise ConfigError("data.multidomain.domains", list(names), f"2 or more distinct names from {list(FEATURES)}")
    if not isinstance(mark_domain, bool):
        raise ConfigError("data.multidomain.mark_domain", mark_domain, "true or false")
    return names
